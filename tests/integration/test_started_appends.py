"""A commit on Kafka is handed to the producer from the event loop, and its delivery report wakes the
loop: no worker thread is parked per write (``OffsetLog.start_append_fenced``).

Specified here against the session's broker: a started write keeps every promise of the blocking
one (the same records at Java's partitions, read-your-writes before the answer, the history's
attribution, an answer by the deadline while the broker stalls and the write applied once after),
and the daemon still appends from a worker thread whenever starting could block or mis-fence: a
topic where claims are in use, a write too big for the loop, a producer queue filling up.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import emulator.logs.kafka.writer as kafka_writer
from emulator.codec.murmur2 import partition_for
from emulator.history.origins import EXTERNAL_ORIGIN, OriginRegistry
from emulator.history.tracked_log import TrackedLog
from emulator.logs.kafka.offsets_log import KafkaOffsetLog
from emulator.model.claims import Fence
from emulator.model.connectors import NoConnectCluster
from emulator.model.errors import ClaimHeld, InvalidRecord, LogTimeout, WriteOutcomeUnknown
from emulator.model.records import LogRecord, Position
from emulator.model.sequences import SequenceTracker
from emulator.service.results import PlannedRecord
from emulator.service.write_guard import NO_AUTH, WriteGuard
from emulator.service.writer import Deadline, OffsetsWriter
from emulator.view.offset_view import OffsetView
from tests.fixtures.broker import TANSU_TAIL_FETCH_WAIT_MS, TansuBroker
from tests.integration.test_kafka_log import Collector

pytestmark = pytest.mark.kafka

WAIT_S = 15.0
PARTITIONS = 5


@pytest.fixture
def kafka_log(kafka_broker: TansuBroker, topic_name: str) -> Iterator[tuple[KafkaOffsetLog, Collector]]:
    """An opened log on the session broker, caught up, with a sink remembering what it read."""
    log = KafkaOffsetLog(
        kafka_broker.bootstrap, topic_name, partitions=PARTITIONS, tail_fetch_wait_ms=TANSU_TAIL_FETCH_WAIT_MS
    )
    sink = Collector()
    log.open()
    try:
        log.start_reading(sink)
        assert log.wait_caught_up(WAIT_S)
        yield log, sink
    finally:
        log.close()


class Writer:
    """An ``OffsetsWriter`` over the log, counting the writes that went through a worker thread."""

    def __init__(self, log: KafkaOffsetLog, write_timeout_s: float = 10.0) -> None:
        self.view = OffsetView()
        guard = WriteGuard(log, NoConnectCluster(), SequenceTracker())
        self.writer = OffsetsWriter(log, self.view, guard, write_timeout_s)
        self.worker_appends = 0
        blocking = self.writer.append_now

        def counted(*args: Any) -> None:
            self.worker_appends += 1
            blocking(*args)

        self.writer.append_now = counted  # type: ignore[method-assign]

    def planned(self, connector: str, name: str, position: int) -> PlannedRecord:
        key = json.dumps([connector, {"file": name}], separators=(",", ":")).encode()
        return self.writer.planned(key, b'{"position":%d}' % position, existing=False)

    def positions(self, connector: str) -> dict[str, int]:
        return {row.partition["file"]: row.offset["position"] for row in self.view.offsets(connector)}


def delivered(sink: Collector, records: Sequence[PlannedRecord]) -> list[tuple[int, bytes, bytes | None]]:
    """(partition, key, value) of every record the reader delivered with one of ``records``' keys."""
    keys = {r.key for r in records}
    assert sink.wait_for(lambda rs: sum(1 for r in rs if r.key in keys) >= len(records))
    return [(r.partition, r.key, r.value) for r in sink.records if r.key in keys]


def test_a_commit_is_written_and_readable_before_its_answer_without_a_worker_thread(
    kafka_log: tuple[KafkaOffsetLog, Collector],
) -> None:
    log, sink = kafka_log
    w = Writer(log)
    records = [w.planned("c", f"/in/{i}.txt", i) for i in range(3)]

    async def commit() -> dict[str, int]:
        await w.writer.write("c", records, NO_AUTH)
        return w.positions("c")  # read-your-writes: in the view the moment the write answered

    assert asyncio.run(asyncio.wait_for(commit(), WAIT_S)) == {"/in/0.txt": 0, "/in/1.txt": 1, "/in/2.txt": 2}
    assert w.worker_appends == 0, "the commit was handed over from the loop, not from a worker thread"
    # In the topic, once each, on the partition Java's producer picks.
    assert sorted(delivered(sink, records)) == sorted(
        (partition_for(r.key, PARTITIONS), r.key, r.value) for r in records
    )


def test_the_log_checks_entries_first_and_declines_what_needs_a_claim(
    kafka_log: tuple[KafkaOffsetLog, Collector],
) -> None:
    log, sink = kafka_log
    with pytest.raises(InvalidRecord, match="entry 1: key must be bytes"):
        log.start_append_fenced(Fence("c", None), [(b"ok", b"v"), ("text", b"v")])  # type: ignore[list-item]
    assert log.start_append_fenced(Fence("c", 3), [(b"k", b"v")]) is None, "a claim's write is a transaction"

    started = log.start_append_fenced(Fence("c", None), [(b"k1", b"v1"), (b"k2", None)])
    assert started is not None
    positions = started.result(WAIT_S)
    assert sink.wait_for(lambda rs: {Position(r.partition, r.offset) for r in rs} >= set(positions))
    seen = {Position(r.partition, r.offset): (r.key, r.value) for r in sink.records}
    assert [seen[p] for p in positions] == [(b"k1", b"v1"), (b"k2", None)]
    assert sink.records.count(next(r for r in sink.records if r.key == b"k1")) == 1
    assert not any(r.key == b"ok" for r in sink.records), "the refused entries wrote nothing"


@pytest.mark.slow  # 2-7 s here (2026-11-27)
def test_writes_go_through_a_worker_when_claims_are_in_use_when_big_or_when_the_queue_fills(
    kafka_log: tuple[KafkaOffsetLog, Collector], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, sink = kafka_log
    w = Writer(log)

    async def write(connector: str, records: list[PlannedRecord]) -> None:
        await w.writer.write(connector, records, NO_AUTH)

    big = [w.planned("big", f"/in/{i}.txt", i) for i in range(300)]
    asyncio.run(write("big", big))
    assert w.worker_appends == 1, "300 records are checked and applied off the loop"
    assert len(w.positions("big")) == 300

    with monkeypatch.context() as queue_full:
        queue_full.setattr(kafka_writer, "_START_QUEUE_ROOM", 0)
        asyncio.run(write("queued", [w.planned("queued", "/a", 1)]))
    assert w.worker_appends == 2, "a filling producer queue is waited for in a worker, not on the loop"
    assert w.positions("queued") == {"/a": 1}

    log.claim("held", "someone")
    asyncio.run(write("free", [w.planned("free", "/a", 1)]))
    assert w.worker_appends == 3, "with claims in use an unclaimed write is checked against them"
    assert w.positions("free") == {"/a": 1}
    with pytest.raises(ClaimHeld):
        asyncio.run(write("held", [w.planned("held", "/a", 1)]))
    assert w.positions("held") == {}
    assert len(delivered(sink, [*big, w.planned("free", "/a", 1)])) == 301


@pytest.mark.slow  # 2-7 s here (2026-11-27)
def test_history_attributes_a_started_write_and_forgets_one_the_log_declined(
    kafka_log: tuple[KafkaOffsetLog, Collector],
) -> None:
    log, _ = kafka_log
    origins = OriginRegistry()
    origins.enable()
    origins.WAIT_S = 0.5  # a ticket left pending would make the lookup below wait this long
    tracked = TrackedLog(log, origins)

    started = tracked.start_append_fenced(Fence("c", None), [(b"mine", b"1")])
    assert started is not None
    (position,) = started.result(WAIT_S)
    record = LogRecord(b"mine", b"1", position.partition, position.offset, 0)
    assert origins.lookup(record).origin == "daemon"

    log.claim("someone-elses", "owner")  # from now on the log declines to start unclaimed writes
    assert tracked.start_append_fenced(Fence("c", None), [(b"declined", b"2")]) is None
    t0 = time.monotonic()
    # Nothing was appended: a record with those bytes written by someone else is theirs, at once.
    assert origins.lookup(LogRecord(b"declined", b"2", 0, 10_000, 0)) == EXTERNAL_ORIGIN
    assert time.monotonic() - t0 < 0.4


@pytest.mark.slow
def test_a_commit_during_a_broker_stall_answers_at_its_deadline_keeps_its_connector_and_lands_once(
    kafka_broker: TansuBroker, kafka_log: tuple[KafkaOffsetLog, Collector]
) -> None:
    log, sink = kafka_log
    w = Writer(log, write_timeout_s=1.0)
    stalled = w.planned("c", "/stalled", 1)

    async def scenario() -> tuple[float, str]:
        with kafka_broker.paused():
            t0 = time.monotonic()
            with pytest.raises(WriteOutcomeUnknown) as unknown:
                await w.writer.write("c", [stalled], NO_AUTH)
            answered_after = time.monotonic() - t0
            # The connector stays taken until the broker answers: a retry cannot overtake the write.
            with pytest.raises(
                LogTimeout,
                match=r"previous write still held it after 0\.3 s .*: that write has not finished \(it waits",
            ):
                async with w.writer.section("c", Deadline(0.3)):
                    pass
        deadline = time.monotonic() + WAIT_S
        while not w.positions("c") and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        async with w.writer.section("c", Deadline(WAIT_S)):  # released once the write was applied
            pass
        return answered_after, unknown.value.message

    answered_after, message = asyncio.run(asyncio.wait_for(scenario(), 3 * WAIT_S))
    assert 0.9 <= answered_after < 1.5, f"answered {answered_after:.2f} s into a 1 s deadline"
    assert "did not answer a write of connector c within 1 s" in message
    assert w.positions("c") == {"/stalled": 1}, "applied to the view once the broker answered"
    assert w.worker_appends == 0
    assert len(delivered(sink, [stalled])) == 1, "written exactly once"
