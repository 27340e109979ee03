"""Reading an offsets topic raw, in log order, as Connect's own reader would: the ground truth that
tests compare the daemon's answers with (never the daemon's own view of it)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition


def read_topic(bootstrap: str, topic: str, partitions: int, key: bytes, committed_only: bool = False) -> list[int]:
    """Every stored ``position`` of ``key`` in log order, up to the end offsets at the call.

    ``read_uncommitted`` by default, as Connect's reader is unless exactly-once source is enabled.
    """
    return [
        json.loads(value)["position"]
        for found, value in messages(bootstrap, topic, partitions, committed_only)
        if found == key and value is not None
    ]


def count_records(bootstrap: str, topic: str, partitions: int) -> tuple[int, int]:
    """(records, tombstones) in the topic up to the end offsets at the call: what a reader that read
    it whole delivered, whoever wrote them."""
    records = tombstones = 0
    for _, value in messages(bootstrap, topic, partitions):
        records += 1
        tombstones += value is None
    return records, tombstones


def messages(
    bootstrap: str, topic: str, partitions: int, committed_only: bool = False
) -> Iterator[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record, in log order per partition, up to the end offsets at the call."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        positions = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 30
        while any(positions[p] < end for p, end in ends.items()):
            assert time.monotonic() < deadline, f"topic not read to its end: {positions} of {ends}"
            for message in consumer.consume(500, 0.2):
                if message.error() is not None:
                    continue
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                positions[partition] = offset + 1
                yield message.key(), message.value()
            for p, end in ends.items():  # transaction markers leave no message; the position says where we are
                if positions[p] < end:
                    [at] = consumer.position([TopicPartition(topic, p)])
                    positions[p] = max(positions[p], at.offset)
    finally:
        consumer.close()
