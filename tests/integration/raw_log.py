"""Reading an offsets topic raw, in log order, as Connect's own reader would: the ground truth that
tests compare the daemon's answers with (never the daemon's own view of it)."""

from __future__ import annotations

import json
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition


def read_topic(bootstrap: str, topic: str, partitions: int, key: bytes, committed_only: bool = False) -> list[int]:
    """Every stored ``position`` of ``key`` in log order, up to the end offsets at the call.

    ``read_uncommitted`` by default, as Connect's reader is unless exactly-once source is enabled.
    """
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
        found: list[int] = []
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
                if message.key() == key and message.value() is not None:
                    found.append(json.loads(message.value())["position"])
            for p, end in ends.items():  # transaction markers leave no message; the position says where we are
                if positions[p] < end:
                    [at] = consumer.position([TopicPartition(topic, p)])
                    positions[p] = max(positions[p], at.offset)
        return found
    finally:
        consumer.close()
