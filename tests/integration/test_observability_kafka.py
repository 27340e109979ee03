"""Metrics against real activity on Kafka (Tansu): writes counted, the reader's lag and end offsets
compared with the broker's, and a sink connector's consumer-group lag compared with what was
produced and committed. ``/metrics`` is read with prometheus_client's own parser.
"""

from __future__ import annotations

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from emulator.logs.kafka.topics import LATEST, list_offsets
from tests.fixtures.broker import TansuBroker
from tests.fixtures.connect_cluster import ConnectClusterDaemon, Step, config, connector_config, tasks
from tests.fixtures.daemon import KafkaDaemon
from tests.integration.connect_helpers import unique
from tests.integration.scrape import Samples, scrape, scrape_until

pytestmark = pytest.mark.kafka

SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"


def sink(name: str, topic: str) -> Step:
    return connector_config(name, {"connector.class": SINK_CLASS, "topics": topic})


def commit(broker: TansuBroker, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as a sink task's consumer would, without joining the group (assign, not subscribe)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, p) for p in offsets])
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def at_end(samples: Samples, before: Samples, records: int) -> bool:
    """The reader has read ``records`` more than ``before`` and stands at the end of every partition."""
    lags = samples.series("connect_offsets_reader_lag")
    read = samples.value("connect_offsets_reader_records_read_total")
    return read - before.value("connect_offsets_reader_records_read_total") >= records and set(lags.values()) == {0.0}


@pytest.mark.slow
def test_writes_are_counted_and_the_reader_follows_the_topics_end(
    kafka_broker: TansuBroker, kafka_daemon: KafkaDaemon
) -> None:
    name, topic = unique("kafka-src"), kafka_daemon.offsets_topic
    before = scrape(kafka_daemon.url)
    url = f"{kafka_daemon.url}/connectors/{name}/offsets"
    for n in range(3):
        body = {"offsets": [{"partition": {"file": "in.txt"}, "offset": {"position": n}}]}
        assert httpx.patch(url, json=body, params={"create": "true"}).status_code == 200
    others = [(b'["%s-other",{"file":"f%d"}]' % (name.encode(), n), b'{"position":1}', n) for n in range(3)]
    kafka_broker.produce_raw(topic, others)  # Connect writing at the same time: not the daemon's

    samples = scrape_until(kafka_daemon.url, lambda s: at_end(s, before, 6), "the reader at the end after 6 records")
    partitions = sorted(int(dict(labels)["partition"]) for labels in samples.series("connect_offsets_reader_lag"))
    ends = list_offsets(kafka_broker.admin(), topic, partitions, LATEST, 15)
    for partition, end in ends.items():
        assert samples.get("connect_offsets_reader_end_offset", partition=str(partition)) == end
        assert samples.get("connect_offsets_reader_position", partition=str(partition)) == end
    read = samples.value("connect_offsets_reader_records_read_total")
    assert read - before.value("connect_offsets_reader_records_read_total") == 6
    assert samples.value("connect_offsets_writes_total", connector=name, operation="PATCH", result="ok") == 3
    # The log timed produce to acknowledgement for each of the daemon's 3 writes (Connect's are not its own).
    for metric in ("connect_offsets_log_write_duration_seconds_count", "connect_offsets_log_written_records_total"):
        assert samples.value(metric) - before.value(metric) == 3, metric
    assert samples.value("connect_offsets_log_write_duration_seconds_sum") > before.value(
        "connect_offsets_log_write_duration_seconds_sum"
    )
    status = httpx.get(f"{kafka_daemon.url}/status").json()
    assert status["end_offsets"] == {str(p): e for p, e in ends.items()} == status["positions"]
    assert status["lag_total"] == 0


@pytest.mark.jvm
@pytest.mark.slow
def test_a_sink_connectors_group_lag_is_what_was_produced_minus_what_was_committed(
    cluster: ConnectClusterDaemon,
) -> None:
    name, topic, source = unique("lagging-sink"), unique("orders"), unique("a-source")
    cluster.broker.create_topic(topic, 3)
    cluster.write(sink(name, topic), tasks(name, 1), config(source), tasks(source, 1))
    produced = [(b"k", b"v", 0)] * 5 + [(b"k", b"v", 1)] * 3  # partition 2 stays empty
    cluster.broker.produce_raw(topic, produced)
    commit(cluster.broker, f"connect-{name}", topic, {0: 2, 1: 3})  # partition 2: never committed
    # The daemon knows the connector as a sink once its GET answers the group's offsets.
    known = cluster.get(name)
    assert known.status_code == 200, known.text
    assert len(known.json()["offsets"]) == 2

    samples = scrape(cluster.daemon.url)
    group = f"connect-{name}"
    lag = {
        p: samples.get("connect_offsets_sink_consumer_lag", connector=name, group=group, topic=topic, partition=str(p))
        for p in range(3)
    }
    assert lag == {0: 5 - 2, 1: 3 - 3, 2: None}  # produced minus committed; no commit, no lag series
    labels = {"connector": name, "group": group, "topic": topic, "partition": "0"}
    assert samples.get("connect_offsets_sink_committed_offset", **labels) == 2
    assert samples.get("connect_offsets_sink_log_end_offset", **labels) == 5
    assert source not in samples.label_values("connect_offsets_sink_consumer_lag", "connector")
    assert samples.value("connect_offsets_sink_lag_errors_total") == 0
    assert samples.get("connect_offsets_sink_lag_computed_timestamp_seconds") is not None
    for topic_name in (cluster.config_topic, cluster.status_topic):
        assert samples.get("connect_offsets_cluster_reader_caught_up", topic=topic_name) == 1
        assert samples.get("connect_offsets_cluster_reader_alive", topic=topic_name) == 1
        assert samples.get("connect_offsets_cluster_reader_lag", topic=topic_name) == 0
    assert samples.value("connect_offsets_cluster_connectors") >= 2
