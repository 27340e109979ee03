"""Shared pieces of the tests that prove the daemon against Apache Kafka Connect's own code.

Everything "expected" in those tests comes from Java (the oracle) or from the typed values handed to
Java; these helpers only move values between the two worlds and read the raw topic.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from tests.oracle import typed

T = TypeVar("T")

JAVA_ONE_RECORD_PER_BATCH = {"batch.size": "0"}
"""Worker producer setting for every Java write in these tests.

Tansu reports a partition's end offset as "base offset of its last batch + 1"
(docs/testing.md, "The test broker: Tansu"), and Java's producer batches the records of one flush that share a partition
(measured: 20 records on 3 partitions reported end offsets summing to 4). A reader that trusts end
offsets, as Connect and the daemon rightly do on real Kafka, would then call itself "read to the end"
too early. ``batch.size=0`` keeps Connect's code path (OffsetStorageWriter, KafkaOffsetBackingStore,
a worker-level producer setting passed through like any other) and makes the end offsets exact.
"""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def canon(value: Any) -> str:
    """Order-free but type-exact text of a JSON value: ``1`` / ``1.0`` / ``true`` stay distinct."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=True)


def from_java(value: Any) -> Any:
    """A typed value as Python sees it (Long -> int, Double -> float, maps -> dict)."""
    return typed.to_python(value)


def expected_after(writes: Iterable[tuple[Any, Any]]) -> dict[str, Any]:
    """Replay typed ``(partition, offset-or-None)`` writes: what Connect then holds, by ``canon(partition)``.

    Last write wins and ``None`` deletes, as ``KafkaOffsetBackingStore`` applies records; partitions are
    compared logically (as Connect's ``connectorPartitions`` set does), offsets type-exactly.
    """
    state: dict[str, Any] = {}
    for partition, offset in writes:
        key = canon(from_java(partition))
        if offset is None:
            state.pop(key, None)
        else:
            state[key] = from_java(offset)
    return {k: canon(v) for k, v in state.items()}


def daemon_offsets(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The daemon's GET rows in the shape of ``expected_after``; duplicate partitions fail loudly."""
    out: dict[str, Any] = {}
    for row in rows:
        key = canon(row["partition"])
        assert key not in out, f"partition listed twice by the daemon: {row['partition']!r}"
        out[key] = canon(row["offset"])
    return out


def eventually(probe: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 20.0) -> T:
    """Poll ``probe`` until ``done`` holds or the deadline passes; returns the last value either way,
    so the caller's assertion shows what was seen."""
    deadline = time.monotonic() + timeout_s
    value = probe()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.1)
        value = probe()
    return value


def kafka_daemon_args(bootstrap: str, topic: str, partitions: int) -> list[str]:
    return ["--bootstrap-servers", bootstrap, "--offsets-topic", topic, "--offsets-partitions", str(partitions)]


def status(url: str) -> dict[str, Any]:
    response = httpx.get(url + "/status", timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@dataclass(frozen=True)
class RawRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Any


def read_topic(
    bootstrap: str, topic: str, expect: int, timeout_s: float = 20.0, settle_s: float = 1.0
) -> list[RawRecord]:
    """Every record of ``topic``, read with ``assign`` from the beginning of all partitions.

    Stops once ``expect`` records arrived and ``settle_s`` more passed without new ones, so records
    beyond the expected count are seen too (end offsets cannot be trusted on Tansu for records that a
    producer batched, which the daemon's producer may do).
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("raw-reader"),
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "log_level": 0,
        }
    )
    try:
        count = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(count)])
        records: list[RawRecord] = []
        deadline = time.monotonic() + timeout_s
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            batch = consumer.consume(500, 0.2)
            for msg in batch:
                assert msg.error() is None, msg.error()
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None  # always set on a consumed record
                records.append(RawRecord(partition, offset, msg.key(), msg.value(), msg.headers()))
            if batch:
                quiet_since = time.monotonic()
            elif len(records) >= expect and time.monotonic() - quiet_since >= settle_s:
                break
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def utf16_units(text: str) -> int:
    """Length in Java ``char``s: what ``FileStreamSourceTask`` counts its ``position`` in."""
    return len(text.encode("utf-16-le")) // 2
