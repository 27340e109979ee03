"""Small pieces shared by the Spark tests: collecting a query's output, running the real connector,
reading the shared offset."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from emulator.client.errors import ApiError
from emulator.client.http import OffsetsClient
from tests.fixtures.broker import TansuBroker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")
OFFSETS_PARTITIONS = 5


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Collector:
    """A ``foreachBatch`` sink that keeps every batch's lines, in order, in the driver."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[str]]] = []
        self._lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        lines = [row.value for row in frame.collect()]
        with self._lock:
            self.batches.append((batch_id, lines))

    @property
    def lines(self) -> list[str]:
        with self._lock:
            return [line for _, batch in self.batches for line in batch]


def start_file_query(
    spark: SparkSession,
    url: str,
    connector: str,
    file: str,
    checkpoint: str,
    sink: Collector,
    *,
    max_lines: int | None = None,
    commit: bool = True,
) -> Any:
    reader = (
        spark.readStream.format("connect-file")
        .option("url", url)
        .option("connector", connector)
        .option("file", file)
        .option("commitOffsets", str(commit).lower())
    )
    if max_lines is not None:
        reader = reader.option("maxLinesPerTrigger", str(max_lines))
    return (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def lines_bytes(lines: list[str], terminator: str = "\n") -> bytes:
    return "".join(line + terminator for line in lines).encode("utf-8")


def stored_position(client: OffsetsClient, connector: str, file: str) -> int | None:
    try:
        rows = client.offsets(connector)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    for row in rows:
        if row["partition"] == {"filename": file}:
            value = row["offset"]["position"]
            assert isinstance(value, int)
            return value
    return None


def eventually(probe: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 30.0) -> T:
    deadline = time.monotonic() + timeout_s
    value = probe()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.1)
        value = probe()
    return value


def run_connector(oracle: Any, broker: TansuBroker, topic: str, connector: str, file: str, expect: int) -> list[str]:
    """Apache Kafka's FileStreamSourceConnector (oracle JVM subprocess) until ``expect`` lines, then a
    graceful stop that commits its offset through KafkaOffsetBackingStore."""
    lines: list[str] = oracle.filestream_run(
        broker.bootstrap, topic, connector, file, partitions=OFFSETS_PARTITIONS, expect_lines=expect, timeout_s=40
    )
    return lines


def daemon_args(broker: TansuBroker, topic: str) -> list[str]:
    return [
        "--bootstrap-servers",
        broker.bootstrap,
        "--offsets-topic",
        topic,
        "--offsets-partitions",
        str(OFFSETS_PARTITIONS),
    ]


def written_positions(bootstrap: str, topic: str, connector: str, timeout_s: float = 15.0) -> list[int | None]:
    """Every ``position`` ever written for ``connector`` in the offsets topic, in log order (all keys of
    the connector live in one partition per key; a connector here has one key). ``None`` = tombstone."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("raw"), "enable.auto.commit": False, "log_level": 0}
    )
    try:
        count = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(count)])
        found: list[tuple[int, int, int | None]] = []
        deadline, quiet = time.monotonic() + timeout_s, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet < 1.5:
            batch = consumer.consume(500, 0.2)
            for msg in batch:
                assert msg.error() is None, msg.error()
                key = json.loads(msg.key())
                if key[0] == connector:
                    value = msg.value()
                    found.append(
                        (msg.partition(), msg.offset(), None if value is None else json.loads(value)["position"])
                    )
            if batch:
                quiet = time.monotonic()
        partitions = {p for p, _, _ in found}
        assert len(partitions) <= 1, f"one key, one partition: {found}"
        return [v for _, _, v in sorted(found)]
    finally:
        consumer.close()
