"""The hand-over between the view's reader thread and the archiver thread: a queue bounded by records.

The view calls the archive's listener on the log's reader thread; ``put`` only appends the batch
and returns. When the queue holds ``capacity`` records the reader *waits* (backpressure) instead of
dropping: the reader is slowed, never robbed, and a record the view applied is a record the
archive gets. Sequence numbers let ``wait_done`` (the archive's ``sync``) wait for exactly the
batches handed over so far, which makes history read-your-writes.

While the archiver cannot write (``stall``: a full disk, a file it cannot open) it retries, and
the queue keeps taking batches, but the reader never waits for a stalled archiver: a batch that
would overfill the queue then ends archiving for good instead. So a short outage of the archive's
disk loses nothing, and a long one costs the archive, never the log's readers.

Once archiving has failed for good, nothing is queued any more; every record refused is counted
(``records_not_archived``), because the next start archives them from the log and an operator
must be able to see how many that will be.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
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


class Signal(enum.Enum):
    """What ``take`` returns besides a batch."""

    IDLE = "idle"
    """Nothing arrived within the tick: time for fsync, rotation and retention."""
    STOP = "stop"
    """``close`` was called and every batch before it was taken."""


class ArchiveQueue:
    """Batches in arrival order, bounded by their record count; one consumer thread."""

    def __init__(self, stats: ArchiveStats, capacity: int = DEFAULT_QUEUE_RECORDS) -> None:
        self._stats = stats
        self._capacity = capacity
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
                and self._queued_records > 0
                and self._queued_records + len(records) > self._capacity
            ):
                if self._stalled is not None:
                    self._fail_locked(
                        f"{self._stalled}; the archive could not be written for "
                        f"{time.monotonic() - self._stalled_at:.0f} s and its queue of {self._capacity} records is full"
                    )
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
            self._enqueued_seq += 1
            self._items.append(Batch(records, received_ms, self._enqueued_seq, time.monotonic()))
            self._queued_records += len(records)
            self._cond.notify_all()

    def wait_done(self, timeout_s: float) -> bool:
        """Wait until every batch put so far is done; False on timeout or failure."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            target = self._enqueued_seq
            self._syncing += 1
            try:
                while self._done_seq < target and self._failed is None and self._stalled is None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                return self._failed is None and self._done_seq >= target
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
            self._done_seq = batch.seq
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
        """The batch in hand was written after a stall; False when archiving failed for good while
        it was retried (the queue overflowed): then the archiver stops all the same."""
        with self._cond:
            if self._failed is not None:
                return False
            if self._stalled is not None:
                log.warning(
                    "history archiver writes again after %.0f s; nothing was lost",
                    time.monotonic() - self._stalled_at,
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

    # ------------------------------------------------------------------ status (any thread)

    def state(self) -> QueueState:
        """The queue's size and health, read together."""
        with self._cond:
            stalled_s = None if self._stalled is None else time.monotonic() - self._stalled_at
            return QueueState(self._queued_records, self._failed or self._stalled, stalled_s)

    def _fail_locked(self, reason: str) -> None:
        self._stalled = None  # failed for good: no longer retrying
        if self._failed is None:
            self._failed = reason
            self._stats.last_error = reason
            log.error("history archiving stopped: %s", reason)
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
