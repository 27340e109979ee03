"""Several daemons on one offsets topic: ``?fresh=true`` reads reflect every write any daemon
acknowledged before the read began (the log is read to its end first, as Connect's herder does).

Write through one daemon, read through the other, ``ROUNDS`` times each way of reading; the counts
are printed (``pytest tests/integration/test_fresh_reads.py -s -p no:cacheprovider``), and
docs/operations.md quotes them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from emulator.client.history import HistoryClient
from emulator.client.http import OffsetsClient
from emulator.codec.murmur2 import partition_for
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory

pytestmark = pytest.mark.kafka

ROUNDS = 300  # docs/operations.md quotes runs of 1,000; of 300 without fresh=true, 243 were stale in one run
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


ROLLBACKS = 20


def between_writes() -> int:
    """A time (epoch ms) strictly after the record just written and before the next one."""
    time.sleep(0.02)
    at_ms = time.time_ns() // 1_000_000
    time.sleep(0.02)
    return at_ms


def missed_rollbacks(
    setter: OffsetsClient, other_write: Callable[[int], None], roller: HistoryClient, connector: str
) -> int:
    """Each round: ``position`` set through ``setter``, a time T, then at once ``position + 1`` written
    by another writer and the connector rolled back to T through ``roller``. Counts the rounds whose
    rollback did not reach the state at T: every other one is a dry run, which must plan the change
    back (a real rollback after a dry run would start from a view the dry run brought up to date)."""
    missed = 0
    for n in range(ROLLBACKS):
        position = 2 * n
        setter.alter(connector, body(position))
        assert roller.offsets(connector, fresh=True) == body(position)["offsets"]  # archived by the roller too
        at_ms = between_writes()
        other_write(position + 1)
        if n % 2:
            plan = roller.rollback(connector, at_ms, dry_run=True)["changes"]
            missed += [(c["action"], c["current_offset"], c["target_offset"]) for c in plan] != [
                ("change", {"position": position + 1}, {"position": position})
            ]
        else:
            answer = roller.rollback(connector, at_ms)
            missed += len(answer["changes"]) != 1 or roller.offsets(connector, fresh=True) != body(position)["offsets"]
    return missed


@pytest.mark.slow
def test_a_rollback_right_after_another_writers_write_reaches_the_state_at_its_time(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """A rollback is a diff between the state at T and the current state. Planned from a view that had
    not yet read a write another writer had just acknowledged, it answered 200 "Nothing to roll back"
    and left that write (QA, two daemons on one topic): the rollback reads the log to its end first, as
    a reset does. Another writer here is a second daemon, then a producer writing Connect's record."""
    topic, partitions = kafka_broker.unique_topic("fresh-rollback"), 3
    # Tansu holds a fetch for its whole wait even when a record arrives (tests/fixtures/broker.py), so a
    # wait of 200 ms keeps each daemon's reader a moment behind every other writer's write, as a busy
    # daemon is on Kafka: at the session's 10 ms, 2 to 6 of 20 rollbacks per writer missed the write.
    args = (
        *("--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3"),
        *("--tail-fetch-wait", "200ms"),
    )
    first, second = daemon_factory(*args), daemon_factory(*args)
    via_daemon, via_producer = f"rollback-{uuid.uuid4().hex[:8]}", f"rollback-raw-{uuid.uuid4().hex[:8]}"
    with HistoryClient(first.url) as a, HistoryClient(second.url) as b:
        for connector in (via_daemon, via_producer):
            a.alter(connector, body(0), create=True)

        def produced(position: int) -> None:
            """Connect's record, as a task's producer writes it: Jackson's key bytes, Java's partition."""
            key = json.dumps([via_producer, PARTITION], separators=(",", ":")).encode()
            value = json.dumps({"position": position}, separators=(",", ":")).encode()
            kafka_broker.produce_raw(topic, [(key, value, partition_for(key, partitions))])

        through_other_daemon = missed_rollbacks(a, lambda p: a.alter(via_daemon, body(p)), b, via_daemon)
        after_producer = missed_rollbacks(a, produced, a, via_producer)
    print(
        f"rollbacks that missed the write just before them: {through_other_daemon} of {ROLLBACKS} through another "
        f"daemon, {after_producer} of {ROLLBACKS} after a producer's write"
    )
    assert (through_other_daemon, after_producer) == (0, 0), "rollbacks planned from a view behind the log"


IMPORTS = 10


@pytest.mark.slow
def test_an_import_right_after_another_daemons_write_writes_what_it_imports(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """An import writes only the records that differ from the current state. Diffed against a view
    that had not yet read another daemon's just-acknowledged write, a record equal to what that view
    still held was left out ("changes nothing") and the other write stayed: the import reads the log
    to its end first, as a reset and a rollback do."""
    topic = kafka_broker.unique_topic("fresh-import")
    args = (
        *("--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3"),
        *("--tail-fetch-wait", "200ms"),  # each reader a moment behind the other daemon's writes (as above)
    )
    first, second = daemon_factory(*args), daemon_factory(*args)
    connector = f"import-{uuid.uuid4().hex[:8]}"
    key = json.dumps([connector, PARTITION], separators=(",", ":")).encode()
    missed = []
    with OffsetsClient(first.url) as a, OffsetsClient(second.url) as b:
        a.alter(connector, body(0), create=True)
        for n in range(IMPORTS):
            position = 2 * n
            a.alter(connector, body(position))
            assert b.offsets(connector, fresh=True) == body(position)["offsets"]  # b has read it
            a.alter(connector, body(position + 1))
            written = b.import_records([(key, json.dumps({"position": position}, separators=(",", ":")).encode())])
            if written["written"] != 1 or b.offsets(connector, fresh=True) != body(position)["offsets"]:
                missed.append(n)
    assert missed == [], f"imports diffed against a view behind the other daemon's write in rounds {missed}"
