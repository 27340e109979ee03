"""The embedded log's reader: one thread that replays the file and then tails it, as Kafka's
``KafkaBasedLog`` work thread does, and the read progress that readiness, read-your-writes and
compaction are answered from.

It reads in short transactions on a connection of its own (no snapshot held across sink calls, so a
slow view never blocks checkpoints or compaction). It looks for new records every ``TAIL_POLL_S``
while records arrive, and at once when someone waits for it (``wait_passed``). Appends do not wake
a busy reader: the view applies this process's own appends when the log acknowledges them, so the
reader takes them in batches at its next look instead of one wake-up per commit; another process's
appends can only be found by looking.

An idle reader looks less often, doubling its pause up to ``IDLE_POLL_MAX_S``: on the 2-core virtual
machines we measure on, each look costs ~0.3 ms of CPU in wake-ups and one query, which made an idle
daemon spend ~1 % of a core looking at a file nobody wrote. Its own process's next append wakes a
resting reader (``nudge``), so only another process's appends wait for the longer pause.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from itertools import starmap

from emulator.logs.base import ReadProgress, RecordSink
from emulator.logs.embedded.claims_seen import ClaimsSeen
from emulator.logs.embedded.storage import LogFile, end_offsets, is_corruption
from emulator.logs.last_error import LastError
from emulator.model.errors import LogConfigError, LogTimeout, LogUnavailable
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)

REPLAY_BATCH = 10_000
"""Records per sink call. Large enough that per-query and per-call overhead vanish during a
million-record restore, small enough that the view gets progress while a partition is still loading."""

TAIL_POLL_S = 0.05
"""How often the reader looks for new records: another process's appends, and this process's own,
which the view has applied already (``wait_passed`` wakes it when someone needs them delivered)."""

IDLE_POLL_MAX_S = 1.0
"""The longest pause between two looks that found nothing: how late, at most, an idle daemon sees
another process's append to a shared file (and a claim it took, for the fail-fast check only)."""

_SELECT_RANGE = (
    "SELECT key, value, partition, offset, timestamp_ms FROM records "
    "WHERE partition = ? AND offset >= ? AND offset < ? ORDER BY offset LIMIT ?"
)
"""Columns in ``LogRecord`` field order, so rows become records with ``starmap`` and no per-row
Python code: that construction is most of the replay cost."""


class LogReader:
    """The reader thread and its progress; ``start`` once, ``stop`` then ``join`` to end it."""

    def __init__(self, file: LogFile, claims_seen: ClaimsSeen, name: str, errors: LastError) -> None:
        """``errors``: the log's last error, which the reader's errors go to with the log's other
        ones (a stalled commit, refused writes), for ``progress``."""
        self._file = file
        self._errors = errors
        self._claims_seen = claims_seen  # refreshed on the reader's connection, between two looks
        self._name = name
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._resting = False  # pausing longer than TAIL_POLL_S: the next own append wakes it (nudge)
        self._appended = False  # an own append since the look began (see _pause)
        # Guards the read progress below; notified whenever it changes, for the waits.
        self._progress_cond = threading.Condition()
        self._positions: dict[int, int] = {}
        self._initial_ends: dict[int, int] = {}
        self._records_read = 0
        self._caught_up = False
        self._error: LogConfigError | None = None
        self._sink_failures = 0
        self._records_dropped = 0
        self._latest_ends: dict[int, int] = {}
        self._last_poll_at: float | None = None
        self._last_records_at: float | None = None

    @property
    def description(self) -> str:
        return self._file.description

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def sink_failures(self) -> int:
        with self._progress_cond:
            return self._sink_failures

    def start(self, ends: dict[int, int], sink: RecordSink) -> None:
        """Replay up to ``ends`` (the end offsets captured by the caller), then tail."""
        if self._thread is not None:
            raise RuntimeError(f"{self.description}: start_reading() was already called")
        with self._progress_cond:
            self._initial_ends = ends
            self._positions = dict.fromkeys(ends, 0)
            self._caught_up = all(end == 0 for end in ends.values())
        thread = threading.Thread(
            target=self._read_forever, args=(sink,), name=f"embedded-log-reader-{self._name}", daemon=True
        )
        self._thread = thread
        thread.start()

    def stop(self) -> None:
        """Ask the thread to stop; a wait for progress now fails at once."""
        self._stop.set()
        self._wake.set()
        with self._progress_cond:
            self._progress_cond.notify_all()

    def join(self, timeout_s: float = 10.0) -> None:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout_s)
            if thread.is_alive():
                log.warning(
                    "reader thread of %s did not stop within %g s (sink still busy?)", self.description, timeout_s
                )

    def nudge(self) -> None:
        """This process appended: wake the reader if it is resting, so an idle daemon's first write
        reaches history and metrics at once; a busy reader is not woken (it looks within
        ``TAIL_POLL_S`` anyway, and a wake-up per commit cost a thread switch each)."""
        self._appended = True
        if self._resting:
            self._wake.set()

    def serving(self) -> bool:
        return self._caught_up and self._error is None  # two reads, each atomic; see progress()

    def position(self, partition: int) -> int:
        with self._progress_cond:
            return self._positions.get(partition, 0)

    def progress(self) -> ReadProgress:
        """Snapshot of the replay. Carries the ``LogConfigError`` that stopped the reader, if any,
        so a damaged log surfaces as an error instead of a view that never becomes ready.

        End offsets are those captured at start until the replay reached them, then the ones the
        reader saw on its last look (every ``TAIL_POLL_S``), so ``end - position`` is its lag.
        """
        thread = self._thread
        alive = thread is not None and thread.is_alive()
        last_error, last_error_at = self._errors.last()
        with self._progress_cond:
            ends = self._initial_ends
            if self._caught_up:
                ends = {**ends, **{p: max(e, self._positions.get(p, 0)) for p, e in self._latest_ends.items()}}
            return ReadProgress(
                positions=dict(self._positions),
                end_offsets=dict(ends),
                records_read=self._records_read,
                caught_up=self._caught_up and self._error is None,
                error=None if self._error is None else self._error.message,
                records_dropped=self._records_dropped,
                alive=alive,
                last_poll_at=self._last_poll_at,
                last_records_at=self._last_records_at,
                last_error=last_error,
                last_error_at=last_error_at,
            )

    def wait_passed(self, ends: Mapping[int, int], timeout_s: float) -> bool:
        """Wake the thread and wait until its positions reach ``ends``; False when they did not
        within ``timeout_s`` (or the reader stopped)."""
        self._wake.set()
        with self._progress_cond:
            return self._progress_cond.wait_for(
                lambda: self._passed(ends) or self._error is not None or self._stop.is_set(), timeout_s
            ) and self._passed(ends)

    def read_to(self, ends: Mapping[int, int], wait_s: float, timeout_s: float) -> None:
        """``wait_passed`` for ``wait_s``, raising why not: the reader's error, a stop, or a timeout
        (of the caller's ``timeout_s``) naming the partitions still behind."""
        if self.wait_passed(ends, wait_s):
            return
        with self._progress_cond:
            if self._passed(ends):
                return
            error = self._error
            behind = {p: (self._positions.get(p, 0), end) for p, end in ends.items() if self._positions.get(p, 0) < end}
        if error is not None:
            raise LogUnavailable(f"{self.description} cannot be read to its end: {error.message}")
        if self._stop.is_set():
            raise LogUnavailable(f"{self.description} was closed before it was read to its end")
        raise LogTimeout(
            f"{self.description} was not read to its end within {timeout_s:g} s "
            f"(partition: (position, end offset) still behind: {behind})"
        )

    def _passed(self, ends: Mapping[int, int]) -> bool:
        """The positions reached ``ends``. The caller holds ``_progress_cond``."""
        return all(self._positions.get(p, 0) >= end for p, end in ends.items())

    def _read_forever(self, sink: RecordSink) -> None:
        started = time.monotonic()
        backoff = TAIL_POLL_S
        pause = TAIL_POLL_S
        conn: sqlite3.Connection | None = None
        try:
            while not self._stop.is_set():
                self._wake.clear()  # before looking, so a wake-up during the look is not lost
                self._appended = False
                try:
                    if conn is None:
                        conn = self._file.connect(timeout_s=5.0)
                    found = self._deliver_available(conn, sink, started)
                    if self._claims_seen.due():
                        self._claims_seen.refresh(conn)
                    backoff = TAIL_POLL_S
                except sqlite3.Error as e:
                    if is_corruption(e):
                        err = self._file.config_error("became unreadable while reading", e)
                        log.error("%s; reader stopped", err.message)
                        self._errors.remember(err.message)
                        with self._progress_cond:
                            self._error = err
                            self._progress_cond.notify_all()
                        return
                    log.warning("reading %s failed (%s); retrying in %.2f s", self.description, e, backoff)
                    self._errors.remember(f"reading failed: {e}")
                    if conn is not None:
                        conn.close()
                        conn = None
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                pause = self._pause(pause, found)
                self._wake.wait(pause)
                self._resting = False
        finally:
            if conn is not None:
                conn.close()

    def _pause(self, last: float, found: bool) -> float:
        """How long to wait before the next look: ``TAIL_POLL_S`` after a look that found records,
        twice the last pause (up to ``IDLE_POLL_MAX_S``) after one that found none. Resting is set
        before ``_appended`` is read, so an append either is seen here or sees ``_resting`` and wakes
        the thread: none waits out a long pause unnoticed."""
        pause = TAIL_POLL_S if found else max(TAIL_POLL_S, min(last * 2, IDLE_POLL_MAX_S))
        self._resting = pause > TAIL_POLL_S
        if self._resting and self._appended:
            self._resting = False
            return TAIL_POLL_S
        return pause

    def _deliver_available(self, conn: sqlite3.Connection, sink: RecordSink, started: float) -> bool:
        """Deliver every record below the current end offsets, partition by partition in offset order;
        whether there were any.

        Rows are fetched with ``offset < end`` in short read transactions (no snapshot held across
        sink calls, so checkpoints and compaction are never blocked by a slow view). A batch shorter
        than the limit means the partition has nothing more below ``end`` — compaction gaps
        included — so the position jumps to ``end``.

        Every batch counts as a look (``last_poll_at``), before and after its sink call, so a replay
        of minutes keeps the reader's last look as fresh as its last records: the stale-reader alert
        watches that time.
        """
        ends = end_offsets(conn)
        with self._progress_cond:
            self._latest_ends = ends
            self._last_poll_at = time.time()
        found = False
        for p in sorted(ends):
            end = ends[p]
            with self._progress_cond:
                pos = self._positions.get(p, 0)
            while pos < end and not self._stop.is_set():
                rows = conn.execute(_SELECT_RANGE, (p, pos, end, REPLAY_BATCH)).fetchall()
                with self._progress_cond:  # every batch is a look: a long replay's last look stays fresh
                    self._last_poll_at = time.time()
                new_pos = end if len(rows) < REPLAY_BATCH else rows[-1][3] + 1
                if rows:
                    found = True
                    self._hand_over(sink, rows)
                pos = new_pos
                with self._progress_cond:
                    self._positions[p] = pos
                    self._records_read += len(rows)
                    # As the Kafka reader: the turn that delivered ends at this time, never before its records.
                    self._last_poll_at = time.time()
                    if rows:
                        self._last_records_at = self._last_poll_at
                    self._progress_cond.notify_all()
                    if not self._caught_up and all(
                        self._positions.get(q, 0) >= e for q, e in self._initial_ends.items()
                    ):
                        self._caught_up = True
                        log.info(
                            "%s: read to end, %d records in %.2f s",
                            self.description,
                            self._records_read,
                            time.monotonic() - started,
                        )
        return found

    def _hand_over(self, sink: RecordSink, rows: list[tuple[bytes, bytes | None, int, int, int]]) -> None:
        """One sink call. A sink that raises loses those records, logged and counted, as
        ``KafkaBasedLog.poll`` skips a batch whose callback throws; the reader goes on."""
        try:
            sink(list(starmap(LogRecord, rows)))
        except Exception as e:
            log.exception(
                "sink failed on %s partition %d offsets %d..%d; those %d records were skipped",
                self.description,
                rows[0][2],
                rows[0][3],
                rows[-1][3],
                len(rows),
            )
            self._errors.remember(f"sink failed; skipped {len(rows)} records: {e!r}")
            with self._progress_cond:
                self._sink_failures += 1
                self._records_dropped += len(rows)


def reread(file: LogFile, ranges: Mapping[int, tuple[int, int]], timeout_s: float) -> Iterator[list[LogRecord]]:
    """The records of ``ranges`` (per partition ``[start, stop)``) once more, for the history archive's
    read back: short read transactions on a connection of its own, as the reader's."""
    try:
        conn = file.connect(timeout_s=timeout_s)
    except sqlite3.Error as e:
        raise LogUnavailable(f"{file.description} cannot be read again: {e}") from e
    try:
        for p, (start, stop) in sorted(ranges.items()):
            position = start
            while position < stop:
                try:
                    rows = conn.execute(_SELECT_RANGE, (p, position, stop, REPLAY_BATCH)).fetchall()
                except sqlite3.Error as e:
                    raise LogUnavailable(f"{file.description} cannot be read again: {e}") from e
                if not rows:
                    break
                yield list(starmap(LogRecord, rows))
                position = rows[-1][3] + 1
    finally:
        conn.close()
