"""An export lists records in log order — by topic (the worker's first), Kafka partition, offset — as
one sort of them all would, although it sorts per partition (a single sort of 200,000 records held
the interpreter lock, and so the event loop, for 0.2–0.4 s)."""

from __future__ import annotations

import random

import pytest

from emulator.service.records import ExportedRecord, _in_log_order


def record(topic: str | None, partition: int, offset: int) -> ExportedRecord:
    return {
        "key": f"k-{topic}-{partition}-{offset}",
        "value": "",
        "connector": "c",
        "kafka_partition": partition,
        "offset": offset,
        "timestamp_ms": 0,
        "store": "worker" if topic is None else "connector",
        "topic": topic,
    }


@pytest.mark.parametrize("seed", range(5))
def test_the_order_is_topic_then_partition_then_offset(seed: int) -> None:
    rng = random.Random(seed)
    records = [
        record(topic, partition, offset)
        for topic in (None, "own-a", "own-b")
        for partition in range(rng.randrange(1, 6))
        for offset in rng.sample(range(1000), rng.randrange(0, 40))
    ]
    rng.shuffle(records)
    expected = sorted(records, key=lambda r: (r["topic"] or "", r["kafka_partition"], r["offset"]))
    assert _in_log_order(records) == expected
