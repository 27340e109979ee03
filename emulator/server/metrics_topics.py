"""Connectors' own offsets topics (KIP-618) as Prometheus metrics, read at scrape time.

A source connector that names its own ``offsets.storage.topic`` has its offsets in a log of its own
(``emulator.connect_cluster.offsets_topics``): ``/readyz`` waits for it, GETs read its view and
PATCHes write through its producer. Its reader falling behind or its broker answering slowly is as
much an operator's concern as the worker topic's, so each store gets the worker log's measures under
labels ``topic`` and ``isolation`` (two connectors may read one topic at different isolation levels,
each through a store of its own). A store the configs want but that is not open yet (its broker
refused, or it is still being created) is there with ``ready`` 0, as ``/readyz`` counts it.

Only snapshots are read (the registry's readiness and each log's write timings), never the broker.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from emulator.connect_cluster.offsets_topics import ConnectorTopics, isolation_name

LABELS = ["topic", "isolation"]


def connector_topic_metrics(topics: ConnectorTopics) -> Iterator[Metric]:
    ready = GaugeMetricFamily(
        "connect_offsets_connector_topic_ready",
        "1 when the connector-specific offsets topic was read to its end without error (0: not yet, not open, "
        "or failing; /readyz waits for every topic a current config names)",
        labels=LABELS,
    )
    lag = GaugeMetricFamily(
        "connect_offsets_connector_topic_reader_lag", "Records not read yet, over the topic's partitions", labels=LABELS
    )
    read = CounterMetricFamily(
        "connect_offsets_connector_topic_reader_records_read",
        "Records the topic's reader delivered to its view",
        labels=LABELS,
    )
    live_keys = GaugeMetricFamily(
        "connect_offsets_connector_topic_live_keys", "Raw keys with a live value in the topic's view", labels=LABELS
    )
    skipped = CounterMetricFamily(
        "connect_offsets_connector_topic_records_skipped",
        "Records in the topic whose key Connect would skip, by reason (not-json, not-a-list, partition-null, ...)",
        labels=[*LABELS, "reason"],
    )
    writes = HistogramMetricFamily(
        "connect_offsets_connector_topic_write_duration_seconds",
        "Time from handing a write's first record to the topic's producer to the broker's last acknowledgement",
        labels=LABELS,
    )
    records = CounterMetricFamily(
        "connect_offsets_connector_topic_written_records", "Records those writes made durable", labels=LABELS
    )
    for entry in topics.readiness()["topics"]:
        labels = [entry["topic"], entry["isolation"]]
        ready.add_metric(labels, int(entry["ready"]))
        if entry["open"]:
            lag.add_metric(labels, entry["lag"])
            read.add_metric(labels, entry["records_read"])
            live_keys.add_metric(labels, entry["live_keys"])
            for reason, count in sorted(entry["skipped_keys"].items()):
                skipped.add_metric([*labels, reason], count)
    for store in topics.open_stores():
        timings = store.log.write_timings
        if timings is None:
            continue
        t = timings.snapshot()
        labels = [store.topic, isolation_name(store.read_committed)]
        writes.add_metric(labels, t.prometheus_buckets(), t.sum_s)
        records.add_metric(labels, t.records)
    yield from (ready, lag, read, live_keys, skipped, writes, records)
