"""The daemon's state as Prometheus metrics, read at scrape time (see ``emulator.server.metrics``).

Every number here already exists in the daemon (the reader's progress, the view's counters, the
archiver's status, the Connect cluster's readers); this collector only reads snapshots of them, so
nothing on the paths that change them pays for metrics. Timestamps are Unix seconds, so an alert
can say ``time() - connect_offsets_reader_last_poll_timestamp_seconds > 60``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from emulator.codec.surrogates import printable
from emulator.connect_cluster.offsets_topics import ConnectorTopics
from emulator.history.archive import HistoryArchive
from emulator.logs.base import OffsetLog, ReadProgress
from emulator.server.metrics_topics import connector_topic_metrics
from emulator.server.sink_lag import SinkLag
from emulator.view.offset_view import OffsetView

if TYPE_CHECKING:  # the Kafka client behind it is imported only when a Connect cluster is read
    from emulator.connect_cluster import ConnectCluster

HISTORY_MODES = ("writing", "reading-back", "read-only", "stalled", "failed")


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


class StateCollector(Collector):
    """Reads the log, view, archive, cluster and sink lag when Prometheus scrapes."""

    def __init__(
        self,
        log: OffsetLog,
        view: OffsetView,
        cluster: ConnectCluster | None,
        history: Callable[[], HistoryArchive | None],
        ready: Callable[[], bool],
        topics: ConnectorTopics | None = None,
        sink_lag: SinkLag | None = None,
    ) -> None:
        """``ready``: ``/readyz``'s own rule, so the gauge cannot say ready while ``/readyz`` says 503."""
        self._log = log
        self._view = view
        self._cluster = cluster
        self._history = history
        self._ready = ready
        self._topics = topics
        self._sink_lag = sink_lag

    def describe(self) -> list[Metric]:
        """Nothing to describe ahead: registering must not read the daemon's state (or the broker)."""
        return []

    def collect(self) -> Iterator[Metric]:
        yield _gauge(
            "connect_offsets_ready",
            "1 when /readyz answers 200: every log read to its end (the offsets log, the Connect cluster's "
            "topics, connectors' own offsets topics) and the offsets log's storage answering",
            int(self._ready()),
        )
        yield from self._reader(self._log.progress())
        yield from self._log_writes()
        yield from self._view_metrics()
        yield from self._history_metrics()
        yield from self._cluster_metrics()
        if self._topics is not None:
            yield from connector_topic_metrics(self._topics)
        yield from self._sink_metrics()

    # ------------------------------------------------------------------ the offsets log's writes

    def _log_writes(self) -> Iterator[Metric]:
        timings = self._log.write_timings
        if timings is None:
            return
        t = timings.snapshot()
        yield HistogramMetricFamily(
            "connect_offsets_log_write_duration_seconds",
            "Time the offsets log took to make a write durable: the embedded log's transaction with its "
            "fsync (concurrent writes share one), or from produce to the broker's last acknowledgement",
            buckets=t.prometheus_buckets(),
            sum_value=t.sum_s,
        )
        yield _counter("connect_offsets_log_written_records", "Records those writes made durable", t.records)
        compaction = self._log.compaction()
        if compaction is not None:
            yield _counter(
                "connect_offsets_log_compactions",
                "Compactions the daemon ran on its embedded log",
                compaction["compactions"],
            )
            yield _counter(
                "connect_offsets_log_compaction_removed_records",
                "Superseded records those compactions removed",
                compaction["records_removed"],
            )
            if compaction["last_at"] is not None:
                yield _gauge(
                    "connect_offsets_log_compaction_last_timestamp_seconds",
                    "When the last compaction of the embedded log ended (Unix seconds)",
                    compaction["last_at"],
                )

    # ------------------------------------------------------------------ the offsets log's reader

    def _reader(self, p: ReadProgress) -> Iterator[Metric]:
        yield _counter(
            "connect_offsets_reader_records_read", "Records the reader delivered to the view", p.records_read
        )
        yield _counter(
            "connect_offsets_reader_records_dropped",
            "Records the view refused repeatedly; logged with their coordinates and skipped",
            p.records_dropped,
        )
        position = GaugeMetricFamily(
            "connect_offsets_reader_position",
            "Next offset the reader will deliver, per partition",
            labels=["partition"],
        )
        end = GaugeMetricFamily(
            "connect_offsets_reader_end_offset",
            "The partition's end offset as the reader last saw it (until caught up: the end captured at start)",
            labels=["partition"],
        )
        lag = GaugeMetricFamily(
            "connect_offsets_reader_lag",
            "Records between the reader's position and the end offset",
            labels=["partition"],
        )
        lags = p.lag()
        for partition, end_offset in sorted(p.end_offsets.items()):
            label = [str(partition)]
            position.add_metric(label, p.positions.get(partition, 0))
            end.add_metric(label, end_offset)
            lag.add_metric(label, lags[partition])
        yield from (position, end, lag)
        yield _gauge(
            "connect_offsets_reader_caught_up",
            "1 once the initial read to the end (Connect's rule) finished",
            int(p.caught_up),
        )
        yield _gauge(
            "connect_offsets_replay_partitions_at_end",
            "Partitions whose position reached their end offset (replay progress)",
            p.partitions_done,
        )
        yield _gauge("connect_offsets_replay_partitions", "Partitions of the offsets log", len(p.end_offsets))
        yield _gauge("connect_offsets_reader_alive", "1 while the reader thread runs", int(p.alive))
        yield _gauge(
            "connect_offsets_reader_stopped",
            "1 when the reader stopped for good (e.g. a damaged embedded log): restart needed",
            int(p.error is not None),
        )
        yield from _timestamps("connect_offsets_reader", p)

    # ------------------------------------------------------------------ the view

    def _view_metrics(self) -> Iterator[Metric]:
        stats = self._view.stats
        yield _counter(
            "connect_offsets_records_applied",
            "Records the reader delivered to the view (every kind, each once, those it skipped as older included)",
            stats.records_applied,
        )
        yield _counter(
            "connect_offsets_tombstones_applied",
            "Tombstones (null values) among the records the reader delivered to the view",
            stats.tombstones_applied,
        )
        yield _counter(
            "connect_offsets_empty_values_applied",
            "Records with an empty (not null) value among those the reader delivered to the view",
            stats.empty_values,
        )
        skipped = CounterMetricFamily(
            "connect_offsets_records_skipped",
            "Records whose key Connect would skip, by reason (not-json, not-a-list, partition-null, ...)",
            labels=["reason"],
        )
        for reason, count in sorted(dict(stats.skipped_keys).items()):
            skipped.add_metric([reason], count)
        yield skipped
        yield _counter(
            "connect_offsets_keys_in_two_partitions",
            "Records whose key the view last had from another Kafka partition (no defined winner; a deletion may "
            "not last a restart)",
            stats.keys_in_two_partitions,
        )
        yield _counter(
            "connect_offsets_unparseable_values",
            "Values no Connect task could read (counted once per record, when first read)",
            stats.unparseable_values,
        )
        yield _counter(
            "connect_offsets_view_listener_failures",
            "Batches a view listener (the history archiver) failed on",
            self._view.listener_failures,
        )
        yield _gauge("connect_offsets_live_keys", "Raw keys with a live value in the view", self._view.live_keys())
        yield _gauge("connect_offsets_connectors", "Connectors with offsets in the log", len(self._view.connectors()))

    # ------------------------------------------------------------------ history

    def _history_metrics(self) -> Iterator[Metric]:
        archive = self._history()
        yield _gauge("connect_offsets_history_enabled", "1 unless started with --no-history", int(archive is not None))
        if archive is None:
            return
        status = archive.status()
        mode = GaugeMetricFamily("connect_offsets_history_mode", "1 for the archiver's current mode", labels=["mode"])
        for name in HISTORY_MODES:
            mode.add_metric([name], int(status["mode"] == name))
        yield mode
        yield _gauge(
            "connect_offsets_history_queued_records",
            "Records waiting for the archiver (the reader waits when the queue is full)",
            status["queued_records"],
        )
        yield _counter(
            "connect_offsets_history_records_archived", "Records written to the archive", status["records_archived"]
        )
        yield _counter(
            "connect_offsets_history_records_not_archived",
            "Records left out of the archive after write errors",
            status["records_not_archived"],
        )
        yield _counter(
            "connect_offsets_history_records_let_go",
            "Records the archiver's queue let go while the archive could not be written, to read back from the log",
            status["records_let_go"],
        )
        yield _counter(
            "connect_offsets_history_records_read_back",
            "Records let go while the archive could not be written, then read back from the log and archived",
            status["records_read_back"],
        )
        yield _gauge(
            "connect_offsets_history_offsets_to_read_back",
            "Offsets of the log the archiver still has to read back (0 unless it let records go)",
            status["offsets_to_read_back"],
        )
        yield _counter(
            "connect_offsets_history_write_errors", "Failed archive writes, fsyncs or folds", status["write_errors"]
        )
        yield _gauge(
            "connect_offsets_history_recovery_problems",
            "What the start's recovery cut, set aside or found damaged in the archive (recovered_files)",
            len(status["recovered_files"]),
        )
        yield _counter(
            "connect_offsets_history_backpressure_seconds",
            "Time the reader waited for room in the archiver's queue",
            status["backpressure_s"],
        )
        yield _counter(
            "connect_offsets_history_yielded_to_requests_seconds",
            "Time the archiver paused or waited while requests were being answered",
            status["yielded_to_requests_s"],
        )

    # ------------------------------------------------------------------ Connect cluster

    def _cluster_metrics(self) -> Iterator[Metric]:
        cluster = self._cluster
        if cluster is None:
            return
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            "caught_up": GaugeMetricFamily(
                "connect_offsets_cluster_reader_caught_up", "1 once the topic was read to its end", labels=["topic"]
            ),
            "alive": GaugeMetricFamily(
                "connect_offsets_cluster_reader_alive", "1 while the topic's reader thread runs", labels=["topic"]
            ),
            "lag": GaugeMetricFamily(
                "connect_offsets_cluster_reader_lag",
                "Records not read yet, over the topic's partitions",
                labels=["topic"],
            ),
            "read": CounterMetricFamily(
                "connect_offsets_cluster_reader_records_read", "Records read from the topic", labels=["topic"]
            ),
            "poll": GaugeMetricFamily(
                "connect_offsets_cluster_reader_last_poll_timestamp_seconds",
                "When the topic's reader last asked for records",
                labels=["topic"],
            ),
            "error": GaugeMetricFamily(
                "connect_offsets_cluster_reader_last_error_timestamp_seconds",
                "When the topic's reader last met an error (absent: never)",
                labels=["topic"],
            ),
        }
        for topic, p in sorted(cluster.topic_progress().items()):
            families["caught_up"].add_metric([topic], int(p.caught_up))
            families["alive"].add_metric([topic], int(p.alive))
            families["lag"].add_metric([topic], sum(p.lag().values()))
            families["read"].add_metric([topic], p.records_read)
            if p.last_poll_at is not None:
                families["poll"].add_metric([topic], p.last_poll_at)
            if p.last_error_at is not None:
                families["error"].add_metric([topic], p.last_error_at)
        yield from families.values()
        stats = cluster.state.stats()
        yield _gauge("connect_offsets_cluster_connectors", "Connectors in the config topic", stats["connectors"])
        skipped = CounterMetricFamily(
            "connect_offsets_cluster_records_skipped",
            "Config or status records the herder would skip, by reason",
            labels=["reason"],
        )
        for reason, count in sorted(stats["skipped_records"].items()):
            skipped.add_metric([reason], count)
        yield skipped

    # ------------------------------------------------------------------ sink connectors

    def _sink_metrics(self) -> Iterator[Metric]:
        if self._sink_lag is None:
            return
        snap = self._sink_lag.snapshot()
        labels = ["connector", "group", "topic", "partition"]
        lag = GaugeMetricFamily(
            "connect_offsets_sink_consumer_lag",
            "A sink connector's consumer-group lag: log end offset - committed offset",
            labels=labels,
        )
        committed = GaugeMetricFamily(
            "connect_offsets_sink_committed_offset", "The sink connector's group's committed offset", labels=labels
        )
        end = GaugeMetricFamily(
            "connect_offsets_sink_log_end_offset",
            "The topic-partition's log end offset (high watermark)",
            labels=labels,
        )
        for p in snap.partitions:
            # A connector (so its group) named with half a surrogate pair is no UTF-8: escaped, or every
            # scrape failed (audit._label says the same).
            values = [printable(p.connector), printable(p.group), p.topic, str(p.partition)]
            lag.add_metric(values, p.lag)
            committed.add_metric(values, p.committed)
            end.add_metric(values, p.end)
        yield from (lag, committed, end)
        yield _counter(
            "connect_offsets_sink_lag_errors",
            "Sink-lag computations (or single groups) that failed or ran out of time",
            snap.errors,
        )
        if snap.computed_at is not None:
            yield _gauge(
                "connect_offsets_sink_lag_computed_timestamp_seconds",
                "When sink lag was last read from the broker for every sink connector",
                snap.computed_at,
            )


def _timestamps(prefix: str, p: ReadProgress) -> Iterator[Metric]:
    """Poll, records and error times; a time that never happened is left out, not 0."""
    for suffix, doc, value in (
        ("last_poll_timestamp_seconds", "When the reader last asked the log for records", p.last_poll_at),
        ("last_records_timestamp_seconds", "When the reader last delivered records", p.last_records_at),
        ("last_error_timestamp_seconds", "When the reader (or the log's clients) last met an error", p.last_error_at),
    ):
        if value is not None:
            yield _gauge(f"{prefix}_{suffix}", doc, value)
