"""Exact handoff between a Connect sink task's consumer group and Spark's ``connect-kafka`` source.

A plain confluent_kafka consumer in group ``connect-<name>`` stands in for the sink task (assign +
synchronous commit, as a sink task commits what it has written). Spark continues from the group's
committed offsets, and after Spark stops the group's offsets are Spark's last completed batch, so
the consumer continues from there: every record is consumed exactly once across both switches.
Spark calls ``reader.commit`` one batch late and never for the last batch, so the last batch is
published by ``ListenerCommitter`` with a sink ``CommitTarget`` (it reads the checkpoint).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from emulator.spark import CommitTarget, ListenerCommitter
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.fixtures.sockets import silent_port
from tests.spark.helpers import eventually, unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

PARTITIONS = 2


class ValueCollector:
    """``foreachBatch``: every batch's (partition, offset, value) in the driver."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, bytes]] = []

    def __call__(self, frame: Any, batch_id: int) -> None:
        self.rows.extend((r.partition, r.offset, bytes(r.value)) for r in frame.collect())


def produce(broker: TansuBroker, topic: str, first: int, last: int) -> None:
    """Records ``first..last`` per partition, value ``p<partition>-<n>`` (n is also the offset)."""
    records = [(None, f"p{p}-{n}".encode(), p) for n in range(first, last + 1) for p in range(PARTITIONS)]
    broker.produce_raw(topic, records)


def group_consumer(broker: TansuBroker, name: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"connect-{name}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )


def consume_and_commit(broker: TansuBroker, topic: str, name: str, counts: dict[int, int]) -> list[bytes]:
    """As a sink task: resume from the group's committed offsets, take ``counts[p]`` records per
    partition, commit the next offsets synchronously. Returns the values taken, per partition order."""
    from confluent_kafka import OFFSET_STORED, TopicPartition

    consumer = group_consumer(broker, name)
    taken: dict[int, list[tuple[int, bytes]]] = {p: [] for p in counts}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_STORED) for p in counts])
        deadline = time.monotonic() + 30
        while any(len(taken[p]) < counts[p] for p in counts) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            if len(taken[msg.partition()]) < counts[msg.partition()]:
                taken[msg.partition()].append((msg.offset(), msg.value()))
        assert all(len(taken[p]) == counts[p] for p in counts), f"timed out: {taken}"
        commits = [TopicPartition(topic, p, taken[p][-1][0] + 1) for p in counts if taken[p]]
        consumer.commit(offsets=commits, asynchronous=False)
    finally:
        consumer.close()
    return [value for p in sorted(taken) for _, value in taken[p]]


def values(first: int, last: int, partition: int) -> list[bytes]:
    return [f"p{partition}-{n}".encode() for n in range(first, last + 1)]


def sink_offsets(url: str, name: str) -> Any:
    response = httpx.get(f"{url}/connectors/{name}/offsets", params={"kind": "sink"}, timeout=10)
    return response.status_code, response.json()


def shape(topic: str, offsets: dict[int, int]) -> list[dict[str, Any]]:
    return [
        {"partition": {"kafka_partition": p, "kafka_topic": topic}, "offset": {"kafka_offset": o}}
        for p, o in sorted(offsets.items())
    ]


def rows_of(body: Any) -> list[dict[str, Any]]:
    rows = body.get("offsets", []) if isinstance(body, dict) else []
    return sorted(rows, key=lambda r: r["partition"]["kafka_partition"])


@dataclass(frozen=True)
class GroupHandoff:
    """The input topic, the sink connector's name (its group is ``connect-<name>``) and a daemon on Kafka."""

    topic: str
    name: str
    daemon: DaemonProcess


@pytest.fixture
def setup(kafka_broker: TansuBroker, daemon_factory: DaemonFactory) -> GroupHandoff:
    topic = kafka_broker.unique_topic("spark-group")
    kafka_broker.create_topic(topic, PARTITIONS)
    daemon = daemon_factory(
        "--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", kafka_broker.unique_topic("offsets")
    )
    return GroupHandoff(topic, unique("kafka-sink"), daemon)


def test_the_daemon_shows_the_groups_commit_in_connects_sink_shape(
    kafka_broker: TansuBroker, setup: GroupHandoff
) -> None:
    topic, name, url = setup.topic, setup.name, setup.daemon.url
    produce(kafka_broker, topic, 0, 5)
    consume_and_commit(kafka_broker, topic, name, {0: 4, 1: 2})
    expected = shape(topic, {0: 4, 1: 2})
    status, body = eventually(lambda: sink_offsets(url, name), lambda r: rows_of(r[1]) == expected, 15)
    assert status == 200, body
    assert rows_of(body) == expected


def test_sink_task_to_spark_and_back_with_no_gap_and_no_duplicate(
    spark: SparkSession, kafka_broker: TansuBroker, setup: GroupHandoff, tmp_path: Path
) -> None:
    topic, name, url = setup.topic, setup.name, setup.daemon.url
    produce(kafka_broker, topic, 0, 9)

    # The "sink task" processes 4 records of partition 0 and 3 of partition 1, and commits.
    assert consume_and_commit(kafka_broker, topic, name, {0: 4, 1: 3}) == values(0, 3, 0) + values(0, 2, 1)
    eventually(lambda: sink_offsets(url, name), lambda r: rows_of(r[1]) == shape(topic, {0: 4, 1: 3}), 15)

    # Spark, fresh checkpoint, same group: continues at exactly the committed records.
    listener = ListenerCommitter(spark, url=url, targets=[CommitTarget(0, name, "sink")], own_sources=False)
    spark.streams.addListener(listener)
    out = ValueCollector()
    try:
        query = (
            spark.readStream.format("connect-kafka")
            .option("url", url)
            .option("connector", name)
            .option("topics", topic)
            .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
            .load()
            .writeStream.foreachBatch(out)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        query.processAllAvailable()
        produce(kafka_broker, topic, 10, 12)  # more arrives while Spark owns the group
        query.processAllAvailable()
        query.stop()
        assert listener.wait_for_termination(query, 60), "the listener never saw the query terminate"
    finally:
        spark.streams.removeListener(listener)
    assert listener.errors == []
    by_partition = {p: [(o, v) for q, o, v in out.rows if q == p] for p in range(PARTITIONS)}
    assert [v for _, v in by_partition[0]] == values(4, 12, 0), "partition 0: from record 4, each once, in order"
    assert [v for _, v in by_partition[1]] == values(3, 12, 1), "partition 1: from record 3, each once, in order"
    assert [o for o, _ in by_partition[0]] == list(range(4, 13))

    # The group now holds Spark's last completed batch (next offsets), in Connect's sink shape.
    status, body = sink_offsets(url, name)
    assert status == 200, body
    assert rows_of(body) == shape(topic, {0: 13, 1: 13})

    # The "sink task" takes over again: exactly the records Spark did not process.
    produce(kafka_broker, topic, 13, 14)
    assert consume_and_commit(kafka_broker, topic, name, {0: 2, 1: 2}) == values(13, 14, 0) + values(13, 14, 1)


def reader_for(url: str, kafka_broker: TansuBroker, setup: GroupHandoff) -> Any:
    from emulator.spark.kafka_source import ConnectKafkaStreamReader

    options = {
        "url": url,
        "connector": setup.name,
        "topics": setup.topic,
        "kafka.bootstrap.servers": kafka_broker.bootstrap,
    }
    return ConnectKafkaStreamReader(options)


def test_the_sources_commit_reaches_the_group_from_a_background_thread(
    kafka_broker: TansuBroker, setup: GroupHandoff
) -> None:
    from emulator.spark.background import committer_for

    reader = reader_for(setup.daemon.url, kafka_broker, setup)
    reader.commit({setup.topic: {"0": 3, "1": 1}})
    reader.commit({setup.topic: {"0": 5, "1": 2}})  # newest wins; commits are monotonic anyway

    committer = committer_for(setup.daemon.url, setup.name, reader.daemon.credentials, kind="sink")
    assert committer.flush(30), "the background commit did not finish within 30 s"
    status, body = sink_offsets(setup.daemon.url, setup.name)
    assert status == 200 and rows_of(body) == shape(setup.topic, {0: 5, 1: 2}), body


def test_a_daemon_that_does_not_answer_does_not_hold_up_the_next_batch(
    kafka_broker: TansuBroker, setup: GroupHandoff
) -> None:
    """``reader.commit`` runs inside Spark's planning of the next batch: before, a daemon that
    accepted the connection and did not answer (restarting, waiting for its broker) held every
    trigger for the client's 30 s timeout."""
    with silent_port() as port:  # at its end the commit's thread fails, logs a warning, and waits for the next one
        reader = reader_for(f"http://127.0.0.1:{port}", kafka_broker, setup)
        started = time.monotonic()
        reader.commit({setup.topic: {"0": 3, "1": 1}})
        assert time.monotonic() - started < 1.0
