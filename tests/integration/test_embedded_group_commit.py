"""Appends to the embedded log are group-committed, and every answer is exact.

Specification (``emulator/logs/embedded/group_commit.py``): writes that wait while a transaction
runs are written together in the next one (one fsync for all of them); a write still waiting when
its deadline passes is withdrawn, answered ``LogTimeout`` and never written; closing the log fails
the writes no commit has picked up, and refuses later ones. The test holds the log's writing
connection the way a long transaction holds it, so the waits are real, not simulated.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from emulator.codec.keys import encode_key
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.errors import LogTimeout, LogWriteError, OffsetsError
from emulator.model.records import Position
from tests.fixtures.waits import until


@pytest.fixture
def log(tmp_path: Path) -> Iterator[EmbeddedOffsetLog]:
    offsets_log = EmbeddedOffsetLog(tmp_path, partitions=3, synchronous="NORMAL")
    offsets_log.open()
    try:
        yield offsets_log
    finally:
        offsets_log.close()


def key(name: str) -> bytes:
    return encode_key(f"group-{name}", {"p": 0})


def waiting(log: EmbeddedOffsetLog) -> int:
    """Writes queued for the next commit."""
    with log._commits._pending_lock:
        return len(log._commits._pending)


def in_thread(call: Callable[[], list[Position]]) -> tuple[threading.Thread, dict[str, object]]:
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["positions"] = call()
        except OffsetsError as e:
            outcome["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def keys_in(log: EmbeddedOffsetLog) -> list[bytes]:
    """Every record's key in the log's file, read on a connection of its own."""
    ranges = {p: (0, end) for p, end in log.end_offsets().items()}
    return [r.key for records in log.reread(ranges, 5) for r in records]


def test_writes_that_wait_while_a_transaction_runs_share_the_next_one(log: EmbeddedOffsetLog) -> None:
    writers = []
    with log._writing.lock:  # a transaction in progress
        for i in range(8):
            writers.append(in_thread(lambda i=i: log.append([(key(f"w{i}"), b"%d" % i)], timeout_s=10)))
        until(lambda: waiting(log) == 8, "eight writes queued", timeout_s=5.0)
    for thread, _ in writers:
        thread.join(10)
    outcomes = [outcome for _, outcome in writers]
    assert all("positions" in o for o in outcomes), outcomes
    timings = log.write_timings.snapshot()
    assert (timings.count, timings.records) == (1, 8), "one transaction wrote all eight"
    assert sorted(keys_in(log)) == sorted(key(f"w{i}") for i in range(8))


def test_a_write_still_waiting_at_its_deadline_is_withdrawn_and_never_written(log: EmbeddedOffsetLog) -> None:
    with log._writing.lock:  # a transaction that outlasts the write's deadline
        thread, outcome = in_thread(lambda: log.append([(key("late"), b"1")], timeout_s=0.3))
        started = time.monotonic()
        thread.join(5)
        waited = time.monotonic() - started
    error = outcome.get("error")
    assert isinstance(error, LogTimeout), outcome
    assert "write timed out after 0.3 s waiting for the log; nothing was written" in str(error)
    assert waited < 2.0, f"answered {waited:.2f} s after a 0.3 s deadline"
    assert waiting(log) == 0, "withdrawn from the queue"
    log.append([(key("next"), b"2")])  # the next commit: the withdrawn write must not ride along
    assert keys_in(log) == [key("next")]


def test_closing_fails_the_writes_no_commit_has_picked_up_and_refuses_later_ones(log: EmbeddedOffsetLog) -> None:
    with log._writing.lock:  # the transaction in progress, which close waits for
        thread, outcome = in_thread(lambda: log.append([(key("queued"), b"1")], timeout_s=30))
        until(lambda: waiting(log) == 1, "the write queued", timeout_s=5.0)
        closing = threading.Thread(target=log.close)
        closing.start()
        until(lambda: waiting(log) == 0, "the queued write failed by close", timeout_s=5.0)
    thread.join(5)
    closing.join(10)
    assert not thread.is_alive() and not closing.is_alive()
    error = outcome.get("error")
    assert isinstance(error, LogWriteError) and "was closed before this write was started" in str(error), outcome
    with pytest.raises(LogWriteError, match="not open; nothing was written"):
        log.append([(key("after"), b"2")])
    reopened = EmbeddedOffsetLog(log.path.parent, partitions=3, synchronous="NORMAL")
    reopened.open()
    try:
        assert reopened.end_offsets() == {0: 0, 1: 0, 2: 0}, "nothing was written"
    finally:
        reopened.close()


def test_in_one_commit_each_write_waits_for_another_process_until_its_own_deadline(log: EmbeddedOffsetLog) -> None:
    """Two writes with different deadlines share a commit that waits for another process's write
    lock: the short one is answered "nothing was written" at its deadline, not at the other's; the
    long one is not failed with it, and is written once the lock is free — whichever leads."""
    answered: dict[str, float] = {}

    def timed(name: str, timeout_s: float) -> Callable[[], list[Position]]:
        def call() -> list[Position]:
            try:
                return log.append([(key(name), name.encode())], timeout_s=timeout_s)
            finally:
                answered[name] = time.monotonic()

        return call

    other_process = sqlite3.connect(log.path, isolation_level=None)
    try:
        other_process.execute("BEGIN IMMEDIATE")  # another process's write, holding SQLite's lock
        with log._writing.lock:  # both queue, so the next commit takes both
            started = time.monotonic()
            short, short_outcome = in_thread(timed("short", 0.4))
            long, long_outcome = in_thread(timed("long", 10))
            until(lambda: waiting(log) == 2, "both writes queued", timeout_s=5.0)
        short.join(1.5)
        other_process.execute("ROLLBACK")
    finally:
        other_process.close()
    short.join(5)
    long.join(5)
    assert not short.is_alive() and not long.is_alive()
    error = short_outcome.get("error")
    assert isinstance(error, LogTimeout) and "nothing was written" in str(error), short_outcome
    assert answered["short"] - started < 1.0, f"answered {answered['short'] - started:.2f} s after a 0.4 s deadline"
    assert "positions" in long_outcome, f"the write with 10 s left failed with the other: {long_outcome}"
    assert keys_in(log) == [key("long")]
