"""The hand-over between the view's reader thread and the archiver thread: a queue bounded by records.

The view calls the archive's listener on the log's reader thread; ``put`` only appends the batch
and returns. When the queue holds ``capacity`` records the reader *waits* (backpressure) instead of
dropping: the reader is slowed, never robbed, and a record the view applied is a record the
archive gets. Sequence numbers let ``wait_done`` (the archive's ``sync``) wait for exactly the
batches handed over so far, which makes history read-your-writes.

While the archiver cannot write (``stall``: a full disk, a file it cannot open) it retries, and
the queue keeps taking batches, but the reader never waits for a stalled archiver. A batch that
would overfill the queue then opens a *gap* (when the log can be read again, ``rereadable``): the
queued batches are let go, and so is every batch after them, each only widening the offsets the
gap spans per partition. Once the archive can be written again, the archiver reads the gap back
from the log (``OffsetLog.reread``) and closes it; the queue takes batches again from the moment it
closes, under the same lock as ``put``, so every record is either in the gap or queued, never both
and never neither. A short outage of the archive's disk therefore loses nothing, a long one costs
the archive a read of the log, and neither ever makes the log's readers wait.

Archiving fails for good only when the daemon stops during a stall (or the archiver dies, or the
log cannot be read again): nothing is queued any more, and every record left out is counted
(``records_not_archived``), because the next start archives them from the log and an operator
must be able to see how many that will be. Records the log no longer held when the gap was read
back (a compaction removed them meanwhile) are counted there too.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from emulator.history.stats import ArchiveStats
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)

DEFAULT_QUEUE_RECORDS = 100_000
_BACKPRESSURE_WARN_S = 5.0


@dataclass
class Batch:
    """Records of one view batch, stamped on arrival (the archive time of records without one)."""

    records: Sequence[LogRecord]
    received_ms: int
    seq: int
    arrived: float = 0.0
    """``time.monotonic()`` at ``put``: the pacing (``pacing.py``) waits for requests only so long after it."""


@dataclass(frozen=True)
class QueueState:
    queued_records: int
    failure: str | None
    """Why archiving failed for good or, while ``stalled_s`` is set, why the archiver is retrying."""
    stalled_s: float | None
    """Seconds since the archiver last could write, while it is retrying; None otherwise."""
    gap_offsets: int
    """Offsets spanned by the records let go while stalled, still to be read back from the log."""


class Signal(enum.Enum):
    """What ``take`` returns besides a batch."""

    IDLE = "idle"
    """Nothing arrived within the tick: time for fsync, rotation and retention."""
    STOP = "stop"
    """``close`` was called and every batch before it was taken."""


class ArchiveQueue:
    """Batches in arrival order, bounded by their record count; one consumer thread."""

    def __init__(self, stats: ArchiveStats, capacity: int = DEFAULT_QUEUE_RECORDS, *, rereadable: bool = False) -> None:
        self._stats = stats
        self._capacity = capacity
        self._rereadable = rereadable
        self._gap: dict[int, tuple[int, int]] | None = None
        """Per partition, ``[first, last + 1)`` of the offsets let go; None while nothing is."""
        self._gap_pending = 0  # records let go and not read back yet
        self._cond = threading.Condition()  # guards everything below
        self._items: deque[Batch | Signal] = deque()
        self._queued_records = 0
        self._enqueued_seq = 0
        self._done_seq = 0
        self._failed: str | None = None
        self._stalled: str | None = None
        self._stalled_at = 0.0
        self._closing = False
        self._syncing = 0  # callers in ``wait_done``
        self.consumer: threading.Thread | None = None
        """The archiver thread: a producer waiting for room gives up once it died."""

    # ------------------------------------------------------------------ producer (reader thread)

    def put(self, records: Sequence[LogRecord]) -> None:
        """Enqueue one batch, waiting while the queue is full."""
        received_ms = time.time_ns() // 1_000_000
        waited_from: float | None = None
        warned = False
        with self._cond:
            while (
                self._failed is None
                and not self._closing
                and self._gap is None
                and self._queued_records > 0
                and self._queued_records + len(records) > self._capacity
            ):
                if self._stalled is not None:
                    why = (
                        f"the archive could not be written for {time.monotonic() - self._stalled_at:.0f} s "
                        f"and its queue of {self._capacity} records is full"
                    )
                    if self._rereadable:
                        self._open_gap_locked(why)
                    else:
                        self._fail_locked(f"{self._stalled}; {why}")
                    break
                now = time.monotonic()
                if waited_from is None:
                    waited_from = now
                    self._stats.backpressure_waits += 1
                elif not warned and now - waited_from > _BACKPRESSURE_WARN_S:
                    warned = True
                    log.warning(
                        "history archiver is %d records behind; the log reader waits for it (backpressure)",
                        self._queued_records,
                    )
                if self.consumer is not None and not self.consumer.is_alive():
                    self._fail_locked("the archiver thread died")
                    break
                self._cond.wait(1.0)
            if waited_from is not None:
                self._stats.backpressure_s += time.monotonic() - waited_from
            if self._failed is not None or self._closing:
                self._count_not_archived_locked(len(records))
                return
            if self._gap is not None:
                self._widen_gap_locked(records)
                return
            self._enqueued_seq += 1
            self._items.append(Batch(records, received_ms, self._enqueued_seq, time.monotonic()))
            self._queued_records += len(records)
            self._cond.notify_all()

    def wait_done(self, timeout_s: float) -> bool:
        """Wait until every batch put so far is done; False on timeout or failure, and at once while
        stalled or reading a gap back (a query then answers with a warning instead of waiting)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            target = self._enqueued_seq
            self._syncing += 1
            try:
                while self._done_seq < target and self._failed is None and self._stalled is None and self._gap is None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                return self._failed is None and self._gap is None and self._done_seq >= target
            finally:
                self._syncing -= 1

    def stop(self) -> bool:
        """Queue the stop signal after what is queued; False when already stopping (idempotence)."""
        with self._cond:
            if self._closing:
                return False
            self._closing = True
            self._items.append(Signal.STOP)
            self._cond.notify_all()
            return True

    @property
    def stopping(self) -> bool:
        """``stop`` was called (read without the lock: a moment late only delays one batch)."""
        return self._closing

    # ------------------------------------------------------------------ consumer (archiver thread)

    def take(self, tick_s: float) -> Batch | Signal:
        """The next batch or signal; ``IDLE`` when nothing arrived within ``tick_s``."""
        with self._cond:
            if not self._items:
                self._cond.wait(tick_s)
            if not self._items:
                return Signal.IDLE
            return self._items.popleft()

    def done(self, batch: Batch) -> None:
        """The batch is written and flushed: release its room and wake ``wait_done``."""
        with self._cond:
            self._queued_records -= len(batch.records)
            self._done_seq = max(self._done_seq, batch.seq)  # batches let go after it counted as done
            self._cond.notify_all()

    def empty(self) -> bool:
        with self._cond:
            return not self._items

    def pressing(self) -> bool:
        """Whether someone needs the archiver now: a caller in ``wait_done``, more batches behind
        the one in hand, or ``stop``: the archiver stops pausing for requests (``pacing.py``). Read
        without the lock: a moment-old answer only shortens or lengthens one pause."""
        return bool(self._syncing or self._items or self._closing)

    def stall(self, reason: str) -> None:
        """The archiver cannot write the batch in hand and retries it: from now on a batch that
        would overfill the queue fails archiving instead of making the reader wait, and
        ``wait_done`` answers False at once."""
        with self._cond:
            if self._failed is not None:
                return
            if self._stalled is None:
                self._stalled_at = time.monotonic()
                log.error("history archiver cannot write (%s); retrying, records are queued meanwhile", reason)
            self._stalled = reason
            self._cond.notify_all()

    def resume(self) -> bool:
        """The batch in hand was written after a stall (or the log read back); False when archiving
        failed for good while it was retried (the queue overflowed without a log to read back from):
        then the archiver stops all the same."""
        with self._cond:
            if self._failed is not None:
                return False
            if self._stalled is not None:
                log.warning(
                    "history archiver writes again after %.0f s; %s",
                    time.monotonic() - self._stalled_at,
                    "nothing was lost" if self._gap is None else "it reads back from the log what it let go",
                )
            self._stalled = None
            self._cond.notify_all()
            return True

    def retry_wait(self, delay_s: float) -> bool:
        """While stalled, wait ``delay_s`` before the next attempt; False (at once) when archiving
        failed for good meanwhile or the daemon is stopping: then the archiver gives up."""
        deadline = time.monotonic() + delay_s
        with self._cond:
            while self._failed is None and not self._closing:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return True
                self._cond.wait(remaining)
            return False

    def fail(self, reason: str, lost: int = 0) -> None:
        """Archiving stopped for good: drop and count what is queued, plus ``lost`` records in hand."""
        with self._cond:
            self._fail_locked(reason)
            if lost:
                self._count_not_archived_locked(lost)

    def defer(self, reason: str) -> None:
        """The archive could not be opened (its disk refuses writes): from the start, every batch
        is let go as a gap to read back once it opens, and the queue reports ``reason`` as a stall."""
        with self._cond:
            self._gap = {}
            self._stalled = reason
            self._stalled_at = time.monotonic()
            self._cond.notify_all()

    def catch_up(self) -> None:
        """The archive was read-only and is taken over: from now on every batch widens a gap (no
        stall: the archive can be written), which ``widen_gap`` extends to what was dropped before."""
        with self._cond:
            if self._gap is None:
                self._gap = {}
            self._cond.notify_all()

    def widen_gap(self, ranges: Mapping[int, tuple[int, int]]) -> None:
        """Add ``[start, stop)`` per partition to the gap opened by ``catch_up``, to read back from the log."""
        with self._cond:
            gap = self._gap
            if gap is None:
                return
            for p, (start, stop) in ranges.items():
                if stop <= start:
                    continue
                span = gap.get(p)
                gap[p] = (start, stop) if span is None else (min(start, span[0]), max(stop, span[1]))
            self._cond.notify_all()

    def gap(self) -> dict[int, tuple[int, int]] | None:
        """The offsets to read back from the log, per partition ``[start, stop)``; None without a gap."""
        with self._cond:
            return None if self._gap is None else dict(self._gap)

    def reread(self, records: int) -> None:
        """``records`` of the gap were read back from the log and are being archived."""
        with self._cond:
            self._gap_pending = max(0, self._gap_pending - records)

    def close_gap(self, read: Mapping[int, tuple[int, int]]) -> bool:
        """The ranges of ``read`` (a ``gap()`` snapshot) were read back. True when that was the whole
        gap: batches are queued again from now on. False when batches let go meanwhile widened it:
        what remains is the gap, to read next."""
        with self._cond:
            if self._gap is None:
                return True
            remaining = {}
            for p, (start, stop) in self._gap.items():
                done = read.get(p, (start, start))[1]
                if stop > done:
                    remaining[p] = (max(start, done), stop)
            if remaining:
                self._gap = remaining
                return False
            self._gap = None
            if self._gap_pending:
                log.error(
                    "history: %d records let go while the archive could not be written were no longer in the "
                    "log when it was read back (compacted meanwhile); they are not archived",
                    self._gap_pending,
                )
                self._count_not_archived_locked(self._gap_pending)
                self._gap_pending = 0
            log.warning("history archiver caught up with the log; batches are queued again")
            self._cond.notify_all()
            return True

    def abandon_gap(self, *, count: bool = True) -> None:
        """Stop reading the gap back (the daemon stops): what it still held is counted, and logged, as
        not archived, and the archiver goes on to the stop signal, which closes its file as usual.
        ``count=False`` where those records cannot be told from archived ones (an archive never
        opened: the gap then spans the whole replay, most of it archived by an earlier run)."""
        with self._cond:
            if self._gap is None:
                return
            self._gap = None
            pending, self._gap_pending = self._gap_pending, 0
            if pending and count:
                self._count_not_archived_locked(pending)
            self._cond.notify_all()

    def kept_from(self, partition: int) -> int | None:
        """The first offset of ``partition`` still to be read back (``OffsetLog.keep_records``)."""
        with self._cond:
            gap = self._gap
            return None if gap is None or partition not in gap else gap[partition][0]

    # ------------------------------------------------------------------ status (any thread)

    def state(self) -> QueueState:
        """The queue's size and health, read together."""
        with self._cond:
            stalled_s = None if self._stalled is None else time.monotonic() - self._stalled_at
            gap_offsets = 0 if self._gap is None else sum(stop - start for start, stop in self._gap.values())
            return QueueState(self._queued_records, self._failed or self._stalled, stalled_s, gap_offsets)

    def _open_gap_locked(self, why: str) -> None:
        """Let the queued batches go, to be read back from the log once the archive can be written."""
        self._gap = {}
        dropped = [b for b in self._items if isinstance(b, Batch)]
        self._items = deque(b for b in self._items if not isinstance(b, Batch))
        for batch in dropped:
            self._widen_gap_locked(batch.records)
            self._queued_records -= len(batch.records)
        self._done_seq = self._enqueued_seq  # the gap answers for them now (``wait_done``)
        log.error(
            "history: %s; %d queued records are let go, and the records after them until it can be written: "
            "the archiver reads them back from the log then",
            why,
            sum(len(b.records) for b in dropped),
        )
        self._cond.notify_all()

    def _widen_gap_locked(self, records: Sequence[LogRecord]) -> None:
        gap = self._gap
        assert gap is not None
        for record in records:
            p, o = record.partition, record.offset
            span = gap.get(p)
            if span is None:
                gap[p] = (o, o + 1)
            elif o >= span[1]:
                gap[p] = (span[0], o + 1)
        self._gap_pending += len(records)
        self._stats.records_let_go += len(records)

    def _fail_locked(self, reason: str) -> None:
        self._stalled = None  # failed for good: no longer retrying
        if self._failed is None:
            self._failed = reason
            self._stats.last_error = reason
            log.error("history archiving stopped: %s", reason)
        if self._gap is not None:
            self._gap = None
            if self._gap_pending:
                self._count_not_archived_locked(self._gap_pending)
            self._gap_pending = 0
        dropped = sum(len(b.records) for b in self._items if isinstance(b, Batch))
        self._items.clear()
        self._queued_records = 0
        if dropped:
            self._count_not_archived_locked(dropped)
        self._cond.notify_all()

    def _count_not_archived_locked(self, n: int) -> None:
        before = self._stats.records_not_archived
        self._stats.records_not_archived += n
        if before == 0 or before // 100_000 != self._stats.records_not_archived // 100_000:
            log.error(
                "history archiving stopped (%s): %d records not archived so far; they are archived from the "
                "log at the next start if the log still holds them",
                self._failed or "closing",
                self._stats.records_not_archived,
            )
