"""The embedded offset log behaves like the Kafka offsets topic it replaces.

Specification: records are placed by Java's murmur2 partitioner and replayed per partition in
offset order with their exact bytes (null value = tombstone, ``b""`` is a value); readiness is
"position >= end offset captured at start" for every partition; new records are tailed whether this
process or another one wrote them; an acknowledged write survives ``kill -9``; a damaged file is a
clear ``LogConfigError``. Needs no broker: SQLite is the real component here.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from emulator.codec.murmur2 import partition_for
from emulator.logs.embedded import reader as embedded_reader
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.model.errors import (
    InvalidRecord,
    LogConfigError,
    LogTimeout,
    LogUnavailable,
    LogWriteError,
    NotReady,
    NotReadyYet,
)
from emulator.model.records import LogRecord, Position
from emulator.service.checks import ConnectorChecks
from emulator.view.offset_view import OffsetView
from tests.fixtures.disk_faults import damage_records
from tests.fixtures.waits import until
from tests.integration.embedded_writer_proc import record

WRITER = Path(__file__).with_name("embedded_writer_proc.py")
REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------- helpers


class Collector:
    """A sink that keeps every delivered record, thread-safely, and counts calls."""

    def __init__(self) -> None:
        self.records: list[LogRecord] = []
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, batch: Sequence[LogRecord]) -> None:
        with self._lock:
            self.records.extend(batch)
            self.calls += 1

    def snapshot(self) -> list[LogRecord]:
        with self._lock:
            return list(self.records)

    def by_partition(self) -> dict[int, list[LogRecord]]:
        out: dict[int, list[LogRecord]] = defaultdict(list)
        for r in self.snapshot():
            out[r.partition].append(r)
        return dict(out)


def replay_all(data_dir: Path, partitions: int = 25) -> list[LogRecord]:
    """Open the log afresh, read it to the end and return everything it holds."""
    log = EmbeddedOffsetLog(data_dir, partitions=partitions)
    log.open()
    sink = Collector()
    try:
        log.start_reading(sink)
        until(lambda: log.progress().caught_up, "replay to catch up")
        return sink.snapshot()
    finally:
        log.close()


def reader_passed(offsets_log: EmbeddedOffsetLog, pos: Position) -> Callable[[], bool]:
    return lambda: offsets_log.progress().positions[pos.partition] > pos.offset


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "offsets-data"


@pytest.fixture
def log(data_dir: Path) -> Iterator[EmbeddedOffsetLog]:
    offsets_log = EmbeddedOffsetLog(data_dir, partitions=5)
    offsets_log.open()
    yield offsets_log
    offsets_log.close()


def connect_key(connector: str, n: int) -> bytes:
    return b'["%s",{"file":"/data/%d.txt"}]' % (connector.encode(), n)


# ---------------------------------------------------------------------------- replay


def test_replay_returns_every_record_per_partition_in_offset_order_with_exact_bytes(
    log: EmbeddedOffsetLog,
) -> None:
    entries: list[tuple[bytes, bytes | None]] = []
    for i in range(300):
        key = connect_key("replay", i % 17)
        value: bytes | None = b'{"position":%d}' % i
        if i % 10 == 3:
            value = None  # tombstone
        elif i % 10 == 7:
            value = b""  # a live, empty value: not a tombstone
        entries.append((key, value))
    positions = log.append(entries[:100]) + log.append(entries[100:])

    sink = Collector()
    log.start_reading(sink)
    until(lambda: log.progress().caught_up, "the replay to catch up")

    delivered = {(r.partition, r.offset): r for r in sink.snapshot()}
    assert len(delivered) == len(entries) == len(sink.snapshot())
    for (key, value), pos in zip(entries, positions, strict=True):
        rec = delivered[(pos.partition, pos.offset)]
        assert (rec.key, rec.value) == (key, value)
        assert type(rec.value) is type(value)  # None stays None, b"" stays bytes
    for part, recs in sink.by_partition().items():
        assert [r.offset for r in recs] == list(range(len(recs))), f"partition {part} out of order"
    assert sum(1 for r in sink.snapshot() if r.value is None) == 30
    assert sum(1 for r in sink.snapshot() if r.value == b"") == 30


def test_records_are_placed_where_javas_producer_would_place_them(data_dir: Path) -> None:
    offsets_log = EmbeddedOffsetLog(data_dir)  # Connect's default: 25 partitions
    offsets_log.open()
    try:
        keys = [connect_key("placement", i) for i in range(200)]
        keys.append(b'["local-file-source",{"filename":"/tmp/test.txt"}]')  # Java puts this in 21 of 25
        positions = offsets_log.append([(k, b"{}") for k in keys])
        assert [p.partition for p in positions] == [partition_for(k, 25) for k in keys]
        assert positions[-1].partition == 21
        assert len({p.partition for p in positions}) == 25
    finally:
        offsets_log.close()


def test_the_log_names_its_file_by_the_absolute_path_it_had_when_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write names its log (a deadline's message); the name is resolved once, so a write asks
    nothing of the filesystem for it and a daemon whose working directory went away still answers.
    The reader, which connects later, reads that same file."""
    monkeypatch.chdir(tmp_path)
    offsets_log = EmbeddedOffsetLog("data", partitions=3)
    offsets_log.open()
    try:
        named = f"embedded://{(tmp_path / 'data' / 'connect-offsets.sqlite3').resolve()}"
        assert offsets_log.description == named
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)  # a relative path would now resolve under elsewhere/
        assert offsets_log.description == named
        sink = Collector()
        offsets_log.start_reading(sink)
        [landed] = offsets_log.append([(connect_key("moved", 0), b"1")])
        assert offsets_log.read_own_writes(5.0), f"the reader never read its file: {offsets_log.progress().last_error}"
        assert [(r.partition, r.offset, r.value) for r in sink.snapshot()] == [(landed.partition, landed.offset, b"1")]
        assert not (elsewhere / "data").exists()
    finally:
        offsets_log.close()


def test_a_keyless_record_is_refused_and_nothing_of_its_batch_is_written(log: EmbeddedOffsetLog) -> None:
    with pytest.raises(InvalidRecord, match="null key"):
        log.append([(b'["c",{"a":1}]', b"{}"), (None, b"{}")])
    with pytest.raises(InvalidRecord, match="key must be bytes"):
        log.append([("text", b"{}")])  # type: ignore[list-item]
    sink = Collector()
    log.start_reading(sink)
    until(lambda: log.progress().caught_up, "the replay to catch up")
    assert sink.snapshot() == []
    assert log.progress().end_offsets == dict.fromkeys(range(5), 0)


def test_a_foreign_keyless_row_is_replayed_with_a_null_key_not_dropped(data_dir: Path) -> None:
    offsets_log = EmbeddedOffsetLog(data_dir, partitions=3)
    offsets_log.open()
    offsets_log.close()
    with sqlite3.connect(data_dir / "connect-offsets.sqlite3") as db:  # as a foreign tool might write
        db.execute("INSERT INTO records VALUES (1, 0, NULL, X'7B7D', 5)")
        db.execute("UPDATE partitions SET next_offset = 1 WHERE partition = 1")
    assert replay_all(data_dir, 3) == [LogRecord(None, b"{}", 1, 0, 5)]


# ---------------------------------------------------------------------------- progress and tailing


def test_progress_compares_positions_with_end_offsets_captured_at_start(log: EmbeddedOffsetLog) -> None:
    positions = log.append([(connect_key("progress", i), b"v%d" % i) for i in range(120)])
    expected_ends = dict.fromkeys(range(5), 0)
    for p in positions:
        expected_ends[p.partition] = max(expected_ends[p.partition], p.offset + 1)

    release = threading.Event()
    sink = Collector()

    def gated_sink(batch: Sequence[LogRecord]) -> None:
        release.wait(10)
        sink(batch)

    log.start_reading(gated_sink)
    before = log.progress()
    assert before.end_offsets == expected_ends
    assert not before.caught_up
    assert before.records_read == 0
    log.append([(connect_key("progress", 999), b"late")])  # written after start: not part of the end
    assert log.progress().end_offsets == expected_ends

    release.set()
    until(lambda: log.progress().caught_up, "the replay to catch up")
    after = log.progress()
    assert after.partitions_done == 5
    assert all(after.positions[p] >= end for p, end in expected_ends.items())
    until(lambda: log.progress().records_read == 121, "the late record to be tailed")


def test_every_batch_of_a_replay_is_a_look_so_the_last_poll_time_keeps_up_with_deliveries(
    log: EmbeddedOffsetLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stale-reader alert watches the last look (``time() - last_poll > 120``). A replay of many
    batches is many looks: it once set that time only before reading every partition to its end, so a
    long replay froze it while records kept arriving (QA: 4 s, then 9 s old, records 0.2 s old)."""
    log.append([(connect_key("looks", i), b"v%d" % i) for i in range(150)])
    monkeypatch.setattr(embedded_reader, "REPLAY_BATCH", 5)  # 30+ batches of 5 records
    seen: list[tuple[float, float | None, float | None]] = []

    def slow_sink(batch: Sequence[LogRecord]) -> None:
        progress = log.progress()
        seen.append((time.time(), progress.last_poll_at, progress.last_records_at))
        time.sleep(0.03)

    log.start_reading(slow_sink)
    until(lambda: log.progress().caught_up, "the replay to catch up")
    assert len(seen) >= 30
    for when, last_poll, last_records in seen[1:]:
        assert last_poll is not None and last_records is not None
        assert last_poll >= last_records, "the last look was older than the last delivery"
        assert when - last_poll < 0.03 * 5, "the last look stood still while the replay delivered"
    done = log.progress()
    assert done.last_poll_at is not None and done.last_records_at is not None
    assert done.last_poll_at >= done.last_records_at


def test_an_empty_log_is_caught_up_at_once(log: EmbeddedOffsetLog) -> None:
    log.start_reading(Collector())
    progress = log.progress()
    assert progress.caught_up
    assert progress.end_offsets == dict.fromkeys(range(5), 0)


def test_own_appends_reach_the_reader_at_its_next_look_or_at_once_when_asked(
    log: EmbeddedOffsetLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends do not wake a busy reader: the view has them already (write-through), and one wake-up
    per commit cost a thread switch each. Whatever needs the reader's delivery of this process's
    writes (the history archive) asks for it and gets it without waiting for a poll."""
    sink = Collector()
    log.start_reading(sink)
    until(lambda: log.progress().caught_up, "the replay to catch up")
    (first,) = log.append([(connect_key("tail", -1), b"polled")])
    until(reader_passed(log, first), "the next poll to deliver an append", timeout_s=5, poll_s=0.005)

    monkeypatch.setattr(embedded_reader, "TAIL_POLL_S", 30.0)  # from the next look on, only a wake-up delivers in time
    time.sleep(0.2)
    for i in range(20):
        (pos,) = log.append([(connect_key("tail", i), b"%d" % i)])
        assert log.read_own_writes(5), f"record {i} was not delivered when asked"
        assert reader_passed(log, pos)(), "read_own_writes returned before the reader passed the write"
    assert [r.value for r in sink.snapshot()] == [b"polled"] + [b"%d" % i for i in range(20)]


def looks_during(offsets_log: EmbeddedOffsetLog, seconds: float) -> int:
    """How many times the reader looked at the file in the next ``seconds`` (its last-poll time changed)."""
    looks, last = 0, offsets_log.progress().last_poll_at
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)
        now = offsets_log.progress().last_poll_at
        looks, last = looks + (now != last), now
    return looks


@pytest.mark.slow
def test_an_idle_reader_rests_and_an_own_append_wakes_it(
    log: EmbeddedOffsetLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle daemon looked at its file 20 times a second (~1 % of a core here); it now doubles its
    pause while it finds nothing, and this process's next append wakes it rather than waiting it out."""
    monkeypatch.setattr(embedded_reader, "IDLE_POLL_MAX_S", 30.0)
    sink = Collector()
    log.start_reading(sink)
    until(lambda: log.progress().caught_up, "the replay to catch up")
    time.sleep(0.4)  # pauses of 0.1 and 0.2 s, then 0.4, 0.8 and 1.6 s
    assert looks_during(log, 1.2) <= 3, "an idle reader kept looking every TAIL_POLL_S"
    time.sleep(0.3)  # into a pause of 1.6 s or longer
    (pos,) = log.append([(connect_key("idle", 1), b"woken")])
    appended = time.monotonic()
    until(reader_passed(log, pos), "the resting reader to deliver an own append", timeout_s=5, poll_s=0.005)
    assert time.monotonic() - appended < 0.5, "the append waited out the reader's pause instead of waking it"
    assert [r.value for r in sink.snapshot()] == [b"woken"]


@pytest.mark.slow
def test_an_idle_reader_finds_another_processs_append_within_its_longest_pause(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded_reader, "IDLE_POLL_MAX_S", 0.4)  # the bound under test, reached sooner
    first, second = (EmbeddedOffsetLog(data_dir, partitions=25, synchronous="NORMAL") for _ in range(2))
    first.open()
    second.open()
    try:
        first.start_reading(Collector())
        until(lambda: first.progress().caught_up, "the replay to catch up")
        time.sleep(0.8)  # pauses of 0.1, 0.2, then 0.4 s: resting at the longest
        assert looks_during(first, 1.2) <= 4, "an idle reader kept looking every TAIL_POLL_S"
        (pos,) = second.append([(connect_key("other", 1), b"x")])  # nudges the second's reader, not the first's
        appended = time.monotonic()
        until(reader_passed(first, pos), "the other process's append to be found", timeout_s=5, poll_s=0.005)
        assert time.monotonic() - appended < 0.4 + 0.5, "found later than the longest pause allows"
    finally:
        second.close()
        first.close()


def test_read_to_end_returns_only_once_an_append_made_before_it_is_applied(log: EmbeddedOffsetLog) -> None:
    """Connect's ``readToEnd``: the view has every record acknowledged before the call, not just the reader."""
    applied: list[bytes | None] = []
    gate = threading.Event()
    gate.set()

    def gated(batch: Sequence[LogRecord]) -> None:
        assert gate.wait(10), "the test never opened the gate"
        applied.extend(r.value for r in batch)

    log.start_reading(gated)
    log.read_to_end(10)  # an empty log: at once
    gate.clear()
    log.append([(connect_key("rte", 1), b"written")])
    returned = threading.Event()
    waiter = threading.Thread(target=lambda: (log.read_to_end(10), returned.set()))
    waiter.start()
    assert not returned.wait(0.5), "read_to_end returned before the record was applied"
    gate.set()
    waiter.join(10)
    assert returned.is_set()
    assert applied == [b"written"]


def test_read_to_end_times_out_with_a_clear_error_and_needs_a_reader(log: EmbeddedOffsetLog) -> None:
    with pytest.raises(LogUnavailable, match="is not being read; call start_reading"):
        log.read_to_end(10)
    gate = threading.Event()

    def stuck(_batch: Sequence[LogRecord]) -> None:
        assert gate.wait(10), "the test never opened the gate"

    log.start_reading(stuck)
    log.append([(connect_key("stuck", 1), b"never applied in time")])
    started = time.monotonic()
    with pytest.raises(LogUnavailable, match=r"was not read to its end within 0\.3 s") as timed_out:
        log.read_to_end(0.3)
    assert 0.3 <= time.monotonic() - started < 5
    assert timed_out.value.message.startswith(log.description)
    gate.set()
    log.read_to_end(10)


def run_writer(data_dir: Path, partitions: int, start: int, count: int | None = None) -> subprocess.Popen[str]:
    args = [sys.executable, str(WRITER), str(data_dir), str(partitions), str(start)]
    if count is not None:
        args.append(str(count))
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if first != "ready\n":
        proc.kill()
        raise AssertionError(f"writer did not start: {first!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc


def test_another_process_shares_the_log_safely_and_its_appends_are_tailed(log: EmbeddedOffsetLog) -> None:
    sink = Collector()
    log.start_reading(sink)
    proc = run_writer(log.path.parent, 5, start=0, count=400)
    ours: list[Position] = []
    while proc.poll() is None and len(ours) < 400:  # write concurrently with the other process
        ours.extend(log.append([(b'["ours",{"n":%d}]' % len(ours), b"mine")]))
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()  # the wrapper, not communicate(): readline() may have buffered lines
    err = proc.stderr.read()
    proc.wait(timeout=30)
    assert proc.returncode == 0, err
    theirs = [Position(int(p), int(o)) for _, p, o in (line.split() for line in out.splitlines())]
    assert len(theirs) == 400

    until(lambda: log.progress().records_read == 400 + len(ours), "the other process's records")
    delivered = {(r.partition, r.offset): r for r in sink.snapshot()}
    assert len(delivered) == 400 + len(ours), "two processes handed out the same offset"
    for i, pos in enumerate(theirs):
        assert (
            delivered[(pos.partition, pos.offset)].key,
            delivered[(pos.partition, pos.offset)].value,
        ) == record(i)
    for part, recs in sink.by_partition().items():
        assert [r.offset for r in recs] == list(range(len(recs))), f"gap or duplicate in partition {part}"


# ---------------------------------------------------------------------------- writing


@pytest.mark.slow
def test_a_write_waits_for_another_processs_write_lock_only_until_its_deadline(log: EmbeddedOffsetLog) -> None:
    """The wait for another writer's lock follows each write's own deadline, short or long, one after
    the other on the same connection (the busy timeout is set per write, not once at open)."""
    log.append([(connect_key("early", 0), b"1")], timeout_s=30.0)  # a long deadline first
    other = sqlite3.connect(log.path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's write in progress
        for timeout_s in (0.3, 1.2):
            started = time.monotonic()
            with pytest.raises(
                LogTimeout, match=r"write timed out waiting for another process's write .*; nothing was written"
            ):
                log.append([(connect_key("blocked", 0), b"1")], timeout_s=timeout_s)
            waited = time.monotonic() - started
            assert timeout_s * 0.85 <= waited <= timeout_s + 0.5, f"waited {waited:.2f} s for a {timeout_s} s deadline"
        release = threading.Timer(0.3, other.execute, ("COMMIT",))
        release.start()
        started = time.monotonic()
        [landed] = log.append([(connect_key("after", 0), b"1")], timeout_s=30.0)
        release.join()
        assert 0.2 <= time.monotonic() - started < 5.0, "the write did not wait for the other writer"
    finally:
        other.close()
    assert [(r.key, r.value) for r in replay_all(log.path.parent, 5) if r.partition == landed.partition][-1] == (
        connect_key("after", 0),
        b"1",
    )
    assert not [r for r in replay_all(log.path.parent, 5) if r.key == connect_key("blocked", 0)]


@pytest.mark.slow
def test_each_transaction_is_timed_with_its_records_and_one_held_past_a_second_is_logged(
    log: EmbeddedOffsetLog, caplog: pytest.LogCaptureFixture
) -> None:
    """The log times what only it sees (the lock, the commit, the fsync), one observation per
    transaction; a write another process held up for over a second says so in the daemon's log."""
    before = log.write_timings.snapshot()
    log.append([(connect_key("timed", p), b"1") for p in range(3)], timeout_s=30.0)  # one transaction
    log.append([(connect_key("timed", 9), b"2")], timeout_s=30.0)
    after = log.write_timings.snapshot()
    assert (after.count - before.count, after.records - before.records) == (2, 4)
    assert after.sum_s > before.sum_s

    other = sqlite3.connect(log.path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process writing to the same log
        with pytest.raises(LogTimeout):  # a write that timed out is not a duration of the log's
            log.append([(connect_key("timed", 0), b"x")], timeout_s=0.2)
        assert log.write_timings.snapshot().count == after.count
        release = threading.Timer(1.2, other.execute, ("COMMIT",))
        release.start()
        with caplog.at_level(logging.WARNING, logger="emulator.logs.write_timings"):
            log.append([(connect_key("timed", 0), b"3")], timeout_s=30.0)
        release.join()
    finally:
        other.close()
    held = log.write_timings.snapshot()
    assert held.count - after.count == 1
    assert dict(held.cumulative)[1.0] == dict(after.cumulative)[1.0], "a 1.2 s write counted within 1 s"
    assert held.slow - after.slow == 1 and held.last_slow_s is not None and held.last_slow_s >= 1.0
    assert held.last_slow_at is not None and abs(time.time() - held.last_slow_at) < 10
    [warning] = [r.getMessage() for r in caplog.records if r.name == "emulator.logs.write_timings"]
    # The write was held 1.2 s by the other connection; on a loaded machine it takes longer still.
    assert warning.startswith(f"{log.description}: a write took {held.last_slow_s:.2f} s to become durable")
    assert "another process writing to this log" in warning


def test_a_failing_sink_call_is_logged_and_counted_and_reading_goes_on(
    log: EmbeddedOffsetLog, caplog: pytest.LogCaptureFixture
) -> None:
    log.append([(connect_key("sink", 1), b"first")])
    sink = Collector()
    failed = threading.Event()

    def flaky_sink(batch: Sequence[LogRecord]) -> None:
        if not failed.is_set():
            failed.set()
            raise ValueError("view bug")
        sink(batch)

    with caplog.at_level(logging.ERROR, logger="emulator.logs.embedded.reader"):
        log.start_reading(flaky_sink)
        until(lambda: log.progress().caught_up, "the replay to catch up")
        log.append([(connect_key("sink", 2), b"second")])
        until(lambda: len(sink.snapshot()) == 1, "the next record after the failure")
    assert [r.value for r in sink.snapshot()] == [b"second"]
    assert log.sink_failures == 1
    assert "sink failed on" in caplog.text and "1 records were skipped" in caplog.text


def test_concurrent_appends_keep_per_key_order_and_unique_contiguous_offsets(log: EmbeddedOffsetLog) -> None:
    threads, per_thread = 8, 60

    def worker(t: int) -> list[Position]:
        out = []
        for seq in range(per_thread):
            batch = [(b'["thread-%d",{"k":%d}]' % (t, k), b"%d" % seq) for k in range(3)]
            out.extend(log.append(batch))
        return out

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(worker, range(threads)))
    all_positions = [p for r in results for p in r]
    assert len(set(all_positions)) == len(all_positions) == threads * per_thread * 3

    sink = Collector()
    log.start_reading(sink)
    until(lambda: log.progress().caught_up, "the replay to catch up")
    seen: dict[bytes | None, list[int]] = defaultdict(list)
    for rec in sink.snapshot():
        assert rec.value is not None
        seen[rec.key].append(int(rec.value))
    assert len(seen) == threads * 3
    assert all(seqs == list(range(per_thread)) for seqs in seen.values())
    for part, recs in sink.by_partition().items():
        assert [r.offset for r in recs] == list(range(len(recs))), f"gap or duplicate in partition {part}"


def test_a_restart_restores_every_record(data_dir: Path) -> None:
    first = EmbeddedOffsetLog(data_dir, partitions=7)
    first.open()
    written = [(connect_key("restart", i % 40), None if i % 9 == 0 else b"%d" % i) for i in range(500)]
    positions = first.append(written)
    first.close()

    restored = {(r.partition, r.offset): (r.key, r.value) for r in replay_all(data_dir, 7)}
    assert restored == {(p.partition, p.offset): kv for p, kv in zip(positions, written, strict=True)}

    again = EmbeddedOffsetLog(data_dir, partitions=7)
    again.open()
    try:  # offsets continue where they stopped
        (pos,) = again.append([written[1]])
        assert pos.offset == sum(1 for p in positions if p.partition == pos.partition)
    finally:
        again.close()


def test_an_existing_log_keeps_its_partition_count_and_warns(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = EmbeddedOffsetLog(data_dir, partitions=5)
    first.open()
    first.close()
    with caplog.at_level(logging.WARNING, logger="emulator.logs.embedded.storage"):
        second = EmbeddedOffsetLog(data_dir, partitions=25)
        second.open()
    try:
        assert second.partition_count == 5
        key = connect_key("repartition", 1)
        (pos,) = second.append([(key, b"{}")])
        assert pos.partition == partition_for(key, 5)
        assert "has 5 partitions and keeps them: the count for a new log (25) does not change" in caplog.text
    finally:
        second.close()


def test_writes_after_close_are_refused(data_dir: Path) -> None:
    offsets_log = EmbeddedOffsetLog(data_dir)
    offsets_log.open()
    offsets_log.close()
    offsets_log.close()  # idempotent
    with pytest.raises(LogWriteError, match="not open"):
        offsets_log.append([(b"k", b"v")])


# ---------------------------------------------------------------------------- durability


@pytest.mark.slow
def test_kill_9_in_the_middle_of_a_stream_of_writes_loses_no_acknowledged_record(data_dir: Path) -> None:
    rng = random.Random(875)
    total = 0  # records in the log after the previous round (each round resumes from there)
    for round_no in range(3):
        proc = run_writer(data_dir, 5, start=total)
        assert proc.stdout is not None
        acked: list[tuple[int, Position]] = []
        kill_after = rng.randint(200, 1500)
        while len(acked) < kill_after:
            line = proc.stdout.readline()
            assert line, f"writer died on its own: {proc.stderr.read() if proc.stderr else ''}"
            i, p, o = map(int, line.split())
            acked.append((i, Position(p, o)))
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: the writer never pauses between appends
        # Read the rest through the same text wrapper: readline() may already hold acknowledged
        # lines in its buffer, which communicate() (reading the raw pipe) would never see.
        rest = proc.stdout.read()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        for line in rest.splitlines(keepends=True):  # flushed before the kill: acknowledged too
            if line.endswith("\n"):
                i, p, o = map(int, line.split())
                acked.append((i, Position(p, o)))

        with sqlite3.connect(data_dir / "connect-offsets.sqlite3") as db:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        survived = {(r.partition, r.offset): r for r in replay_all(data_dir, 5)}
        for i, pos in acked:
            rec = survived.get((pos.partition, pos.offset))
            assert rec is not None, f"round {round_no}: acknowledged record {i} at {pos} is gone"
            assert (rec.key, rec.value) == record(i), f"round {round_no}: record {i} has other bytes"
        # Nothing but the stream is there: records 0..n-1, where only the one append in flight at
        # the kill may have committed without being reported.
        n = len(survived)
        last_acked = acked[-1][0] + 1
        assert n in (last_acked, last_acked + 1), (n, last_acked)
        next_offset: dict[int, int] = defaultdict(int)
        for i in range(n):
            key, value = record(i)
            part = partition_for(key, 5)
            rec = survived[(part, next_offset[part])]
            assert (rec.key, rec.value) == (key, value), f"record {i} damaged"
            next_offset[part] += 1
        total = n


# ---------------------------------------------------------------------------- compaction


def test_compaction_keeps_the_latest_record_per_key_with_its_offset_even_while_a_reader_runs(
    log: EmbeddedOffsetLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = [(connect_key("compact", i % 25), None if i % 50 == 49 else b"%d" % i) for i in range(2000)]
    positions = log.append(entries)
    latest: dict[bytes, tuple[Position, bytes | None]] = {}
    for (key, value), pos in zip(entries, positions, strict=True):
        latest[key] = (pos, value)

    monkeypatch.setattr(embedded_reader, "REPLAY_BATCH", 50)  # so the reader stops inside a partition
    compacted = threading.Event()
    sink = Collector()

    def held_sink(batch: Sequence[LogRecord]) -> None:
        sink(batch)
        compacted.wait(10)  # the first batch is delivered from the uncompacted log

    log.start_reading(held_sink)
    until(lambda: sink.calls == 1, "the sink's first call")
    outside = EmbeddedOffsetLog(log.path.parent, partitions=5)  # a compaction by hand, from outside
    outside.open()
    try:
        report = outside.compact()  # the reader is now mid-replay, held inside its first batch
    finally:
        outside.close()
    compacted.set()
    assert (report.records_before, report.records_after, report.removed) == (2000, 25, 1975)
    until(lambda: log.progress().caught_up, "the replay to catch up")

    state: dict[bytes | None, bytes | None] = {}
    for rec in sink.snapshot():
        state[rec.key] = rec.value
    assert state == {key: value for key, (_, value) in latest.items()}

    remaining = {(r.partition, r.offset): r.value for r in replay_all(log.path.parent, 5)}
    assert remaining == {(pos.partition, pos.offset): value for pos, value in latest.values()}

    (pos,) = log.append([(connect_key("compact", 0), b"after")])  # offsets never reused
    assert pos.offset > max(o for p, o in remaining if p == pos.partition)


def test_a_reading_log_compacts_only_what_its_reader_has_read(log: EmbeddedOffsetLog) -> None:
    """As Kafka's cleaner never touches the active segment: a record superseded before the reader got
    to it still reaches the reader (and so the history archive)."""
    entries = [(connect_key("unread", i % 5), b"%d" % i) for i in range(100)]
    log.append(entries)
    release = threading.Event()
    sink = Collector()

    def held_sink(batch: Sequence[LogRecord]) -> None:
        release.wait(10)  # nothing has been read while the compaction runs
        sink(batch)

    log.start_reading(held_sink)
    report = log.compact()
    release.set()
    assert (report.records_before, report.removed) == (100, 0), "removed records the reader had not read"
    until(lambda: log.progress().caught_up, "the replay to catch up")
    assert len(sink.snapshot()) == 100, "every record reached the reader"
    assert log.compact().removed == 95, "once read, the superseded records go"


def test_records_a_read_back_starts_to_need_during_a_compaction_are_kept(log: EmbeddedOffsetLog) -> None:
    """The history archive may let records go (its disk full) while a compaction runs: the records it
    will read back are asked for after the compaction chose what to remove, so each step asks again."""
    log.append([(connect_key("busy", i % 10), b"%d" % i) for i in range(10_000)])
    log.start_reading(Collector())
    until(lambda: log.progress().caught_up, "the replay to catch up")
    asked: set[int] = set()

    def floor(partition: int) -> int | None:
        """Nothing to keep when the compaction looks at a partition; from then on, offset 0 on."""
        first = partition not in asked
        asked.add(partition)
        return None if first else 0

    log.keep_records(floor)
    report = log.compact()
    assert report.records_before == 10_000 and report.removed == 0, report
    assert len(asked) == 5, "every partition was asked"


# ---------------------------------------------------------------------------- damaged storage


def test_a_file_that_is_not_a_database_is_a_clear_config_error(data_dir: Path) -> None:
    data_dir.mkdir()
    (data_dir / "connect-offsets.sqlite3").write_bytes(b"this is not sqlite\n" * 500)
    with pytest.raises(LogConfigError, match="corrupt or not a SQLite database"):
        EmbeddedOffsetLog(data_dir).open()


def test_damaged_pages_are_a_clear_config_error(data_dir: Path) -> None:
    offsets_log = EmbeddedOffsetLog(data_dir)
    offsets_log.open()
    offsets_log.append([(connect_key("damage", i), b"x" * 200) for i in range(3000)])
    offsets_log.close()
    path = data_dir / "connect-offsets.sqlite3"
    raw = bytearray(path.read_bytes())
    assert len(raw) > 40 * 4096
    raw[20 * 4096 : 30 * 4096] = random.Random(1).randbytes(10 * 4096)  # past the header and schema
    path.write_bytes(bytes(raw))
    with pytest.raises(LogConfigError, match="corrupt") as refused:
        EmbeddedOffsetLog(data_dir).open()
    assert "\n" not in str(refused.value), "a start-up refusal is one line (SQLite's check answers in several)"


@pytest.mark.slow
def test_a_log_file_this_process_may_not_write_stops_the_start_naming_owner_and_mode(data_dir: Path) -> None:
    """SQLite opens a file it may not write read-only without a word: the daemon answered ready and
    only its first write met "attempt to write a readonly database". The start is refused instead,
    in one line that says whose the file is and what to do. As root the test drops the capability
    that lets root write any file (``setpriv``), as a daemon run by another user is."""
    offsets_log = EmbeddedOffsetLog(data_dir)
    offsets_log.open()
    offsets_log.append([(connect_key("owned", 0), b"{}")])
    offsets_log.close()
    path = data_dir / "connect-offsets.sqlite3"
    prefix: list[str] = []
    if os.geteuid() == 0:
        os.chown(path, 4242, 4242)
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]
    path.chmod(0o644 if prefix else 0o444)
    started = subprocess.run(
        [*prefix, sys.executable, "-m", "emulator.cli", "serve", "--data-dir", str(data_dir), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert started.returncode == 2, started.stderr
    *_, line = started.stderr.strip().splitlines()  # before it: the warning that others may read the directory
    assert line.startswith("error: the embedded offsets log cannot be opened for writing: "), line
    assert f"{path} cannot be written by this process (uid {os.geteuid()}; the file is owned by uid" in line, line
    assert "mode 0644" in line if prefix else "mode 0444" in line, line
    assert "run the daemon as the data directory's owner" in line, line


def test_a_truncated_file_is_a_clear_config_error(data_dir: Path) -> None:
    offsets_log = EmbeddedOffsetLog(data_dir)
    offsets_log.open()
    offsets_log.append([(connect_key("truncate", i), b"y" * 300) for i in range(3000)])
    offsets_log.close()
    path = data_dir / "connect-offsets.sqlite3"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(LogConfigError, match="corrupt"):
        EmbeddedOffsetLog(data_dir).open()


def test_someone_elses_sqlite_database_is_refused_untouched(data_dir: Path) -> None:
    data_dir.mkdir()
    with sqlite3.connect(data_dir / "connect-offsets.sqlite3") as db:
        db.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(LogConfigError, match="not an embedded offsets log"):
        EmbeddedOffsetLog(data_dir).open()
    with sqlite3.connect(data_dir / "connect-offsets.sqlite3") as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_schema")] == ["invoices"]


def test_damage_found_while_reading_stops_the_reader_and_progress_reports_it(data_dir: Path) -> None:
    offsets_log = EmbeddedOffsetLog(data_dir)
    offsets_log.open()  # intact at open time: quick_check passes
    try:
        offsets_log.append([(connect_key("late-damage", i), b"z" * 200) for i in range(3000)])
        damage_records(data_dir / "connect-offsets.sqlite3")  # behind the open log's back
        offsets_log.start_reading(Collector())

        until(lambda: offsets_log.progress().error is not None, "the reader to report the damage")
        progress = offsets_log.progress()
        assert progress.error is not None and "became unreadable while reading: it is corrupt" in progress.error
        assert not progress.caught_up, "a log that stopped on damage never reports ready"
        assert not offsets_log.serving()
        checks = ConnectorChecks(offsets_log, OffsetView(), NoConnectCluster(), 1.0)
        with pytest.raises(NotReady, match=r"The offsets log cannot be read: .*became unreadable while reading") as e:
            checks.ensure_ready()
        assert type(e.value) is NotReady, "not NotReadyYet: waiting would not mend it (no Retry-After)"
    finally:
        offsets_log.close()


def test_requests_are_answered_only_once_the_replay_reached_the_end(data_dir: Path) -> None:
    """Connect's startup rule, asked before every request through ``serving()``, the cheap form of
    ``progress()``'s verdict: refused with the replay's progress before, answered after."""
    offsets_log = EmbeddedOffsetLog(data_dir, partitions=3)
    offsets_log.open()
    try:
        offsets_log.append([(connect_key("startup", i), b"{}") for i in range(50)])
        checks = ConnectorChecks(offsets_log, OffsetView(), NoConnectCluster(), 1.0)
        assert not offsets_log.serving()
        with pytest.raises(NotReadyYet, match=r"has not been read to the end yet \(0 records read;"):
            checks.ensure_ready()  # passes by itself: answered with Retry-After
        offsets_log.start_reading(Collector())
        until(lambda: offsets_log.progress().caught_up, "the replay to reach the end")
        assert offsets_log.serving()
        checks.ensure_ready()
    finally:
        offsets_log.close()


def test_an_unusable_data_directory_is_a_clear_config_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(LogConfigError, match="data directory"):
        EmbeddedOffsetLog(not_a_dir / "sub").open()
    with pytest.raises(LogConfigError, match="legal Kafka topic name"):
        EmbeddedOffsetLog(tmp_path, name="../escape")
