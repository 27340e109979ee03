"""Metrics against real activity on Kafka (Tansu): writes counted, the reader's lag and end offsets
compared with the broker's, and a sink connector's consumer-group lag compared with what was
produced and committed. ``/metrics`` is read with prometheus_client's own parser.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from emulator.logs.kafka.topics import LATEST, list_offsets
from tests.fixtures.broker import TansuBroker
from tests.fixtures.connect_cluster import ConnectClusterDaemon, Step, config, connector_config, tasks
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.fixtures.waits import until
from tests.integration.connect_helpers import unique
from tests.integration.raw_log import count_records
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
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """On a topic of its own: the session daemon's topic may hold multi-record batches of earlier
    tests, after which Tansu's ListOffsets under-reports the end (docs/testing.md, "The test broker:
    Tansu"), while the reader rightly counts the records it read (ci of stop 50: 7 read, 5 listed)."""
    topic = kafka_broker.unique_topic("observed")
    daemon = daemon_factory(
        "--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "7"
    )
    name = unique("kafka-src")
    before = scrape(daemon.url)
    url = f"{daemon.url}/connectors/{name}/offsets"
    for n in range(3):
        body = {"offsets": [{"partition": {"file": "in.txt"}, "offset": {"position": n}}]}
        assert httpx.patch(url, json=body, params={"create": "true"}).status_code == 200
    others = [(b'["%s-other",{"file":"f%d"}]' % (name.encode(), n), b'{"position":1}', n) for n in range(3)]
    kafka_broker.produce_raw(topic, others)  # Connect writing at the same time: not the daemon's

    samples = scrape_until(daemon.url, lambda s: at_end(s, before, 6), "the reader at the end after 6 records")
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
    status = httpx.get(f"{daemon.url}/status").json()
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


def read_to_the_end(daemon: DaemonProcess, broker: TansuBroker, topic: str, partitions: int) -> dict[str, Any]:
    """``/status`` once the daemon's reader stands at the broker's end of every partition."""
    ends = {str(p): e for p, e in list_offsets(broker.admin(), topic, list(range(partitions)), LATEST, 15).items()}
    answer: dict[str, Any] = {}

    def at_end() -> bool:
        answer.update(httpx.get(f"{daemon.url}/status", timeout=5).json())
        return all(answer["positions"].get(p, 0) >= end for p, end in ends.items())

    until(at_end, f"{daemon.url} read {topic} to {ends}", timeout_s=30)
    return answer


@pytest.mark.slow
def test_tombstones_another_daemon_writes_between_this_ones_writes_are_counted_once_each(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """Daemon A PATCHes, daemon B DELETEs, in turns, on one topic. A's next PATCH is acknowledged and
    applied (write-through) before A's reader delivers B's tombstone, which is then older than what A
    holds and skipped by the view, as it must be. The counters count what the reader delivers, so A
    counts it all the same, as B and a restarted daemon do. A's tail fetch wait of 500 ms (Tansu holds
    every fetch that long) makes nearly every round such a one: A counted 1 of 30 tombstones (QA D4)."""
    topic, partitions, rounds = kafka_broker.unique_topic("tombstones"), 3, 12
    args = ("--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3")
    a, b = daemon_factory(*args, "--tail-fetch-wait", "500ms"), daemon_factory(*args)
    connector = f"tombstones-{uuid.uuid4().hex[:8]}"
    path = f"/connectors/{connector}/offsets"
    with httpx.Client(base_url=a.url, timeout=30) as via_a, httpx.Client(base_url=b.url, timeout=30) as via_b:
        for n in range(rounds):
            body = {"offsets": [{"partition": {"file": "in.txt"}, "offset": {"position": n}}]}
            assert via_a.patch(path, params={"create": "true"}, json=body).status_code == 200
            deleted = via_b.delete(path)
            assert deleted.status_code == 200, deleted.text
    records, tombstones = count_records(kafka_broker.bootstrap, topic, partitions)
    assert tombstones == rounds and records == 2 * rounds, (records, tombstones)
    for name, daemon in (("A", a), ("B", b)):
        view = read_to_the_end(daemon, kafka_broker, topic, partitions)["view"]
        assert (view["records_applied"], view["tombstones_applied"]) == (records, tombstones), (name, view)
        samples = scrape(daemon.url)
        assert samples.value("connect_offsets_tombstones_applied_total") == tombstones, name
