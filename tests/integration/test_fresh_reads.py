"""Several daemons on one offsets topic: ``?fresh=true`` reads reflect every write any daemon
acknowledged before the read began (the log is read to its end first, as Connect's herder does).

Write through one daemon, read through the other, 1,000 times each way of reading. The counts are
the measurement quoted in docs/operations.md:
``pytest tests/integration/test_fresh_reads.py -s -p no:cacheprovider``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from emulator.client.http import OffsetsClient
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory

pytestmark = pytest.mark.kafka

ROUNDS = 1_000
PARTITION = {"filename": "/data/fresh.txt"}


def body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": PARTITION, "offset": {"position": position}}]}


def stale_reads(writer: OffsetsClient, reader: OffsetsClient, connector: str, fresh: bool) -> int:
    """Write n through one daemon, then read through the other: how often it did not show n yet."""
    stale = 0
    for n in range(1, ROUNDS + 1):
        writer.alter(connector, body(n))
        [row] = reader.offsets(connector, fresh=fresh)
        stale += row["offset"]["position"] != n
    return stale


@pytest.mark.slow
def test_fresh_reads_through_another_daemon_are_never_stale(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic = kafka_broker.unique_topic("fresh")
    args = ("--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3")
    first, second = daemon_factory(*args), daemon_factory(*args)
    fresh_connector, plain_connector = f"fresh-{uuid.uuid4().hex[:8]}", f"plain-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(first.url) as writer, OffsetsClient(second.url) as reader:
        for connector in (fresh_connector, plain_connector):
            writer.alter(connector, body(0), create=True)
            assert reader.offsets(connector, fresh=True) == [{"partition": PARTITION, "offset": {"position": 0}}]
            assert connector in reader.connectors(fresh=True)
        plain = stale_reads(writer, reader, plain_connector, fresh=False)
        fresh = stale_reads(writer, reader, fresh_connector, fresh=True)
    print(f"fresh reads through another daemon: {fresh} of {ROUNDS} stale; without fresh=true: {plain} of {ROUNDS}")
    assert fresh == 0, f"{fresh} of {ROUNDS} fresh reads missed a write acknowledged before they began"


RESETS = 100


@pytest.mark.slow
def test_a_reset_through_another_daemon_removes_every_partition_written_before_it(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """Connect reads the offsets topic to its end before it lists what to reset (docs/protocol.md
    §4.5). A daemon that reset from its view as it stood left a partition another writer had just
    committed, and a task resumed from it: here a partition written through one daemon, then at
    once the connector reset through another, RESETS times."""
    topic = kafka_broker.unique_topic("fresh-reset")
    args = ("--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3")
    first, second = daemon_factory(*args), daemon_factory(*args)
    connector = f"reset-{uuid.uuid4().hex[:8]}"
    left = 0
    with OffsetsClient(first.url) as writer, OffsetsClient(second.url) as resetter:
        writer.alter(connector, body(0), create=True)
        assert connector in resetter.connectors(fresh=True)
        for n in range(RESETS):
            partition = {"filename": f"/data/reset-{n}.txt"}
            writer.alter(connector, {"offsets": [{"partition": partition, "offset": {"position": n}}]}, create=True)
            resetter.reset(connector)
            left += bool(writer.offsets(connector, fresh=True))
    print(f"resets through another daemon that left a partition written just before: {left} of {RESETS}")
    assert left == 0, f"{left} of {RESETS} resets left the partition written just before them"
