"""When the archiver steps aside for requests being answered, and for how long.

Encoding rows is Python holding the interpreter lock (~10 µs a record, ~0.5 ms for the ~40 records
an embedded reader's poll delivers under one writer), and a request that arrives meanwhile waits for
the lock at every hand-over between the event loop and its worker threads: with history on, one
writer's embedded commit had a p99 of 1.6–2.1 ms against 1.1–1.4 ms without (benchmarks/RESULTS.md,
round 14). The loop cannot even say that it is waiting: the holder gives the lock up unasked only
after ``sys.getswitchinterval()`` (5 ms), and counting a request in (``emulator.model.foreground``)
needs the lock first. So while requests are coming in, the archiver works in slices of
``SLICE_RECORDS`` records (~40 µs) with a short sleep after each, which lets a request that arrived
meanwhile take the lock; and while one is being answered, it waits for the answer
(``FOREGROUND.wait_for_gap``), up to ``yield_s`` after the batch arrived.

Bounds, so that archiving never falls behind for it: no pausing once more batches are queued behind
the one in hand, while a history query waits for the archive (``sync``) or while closing; no waiting
for a gap beyond ``yield_s``; and no slices at all once no request came in for ``QUIET_S`` (a replay
at startup, an idle daemon).
"""

from __future__ import annotations

import time

from emulator.history.batch_queue import ArchiveQueue, Batch
from emulator.history.stats import ArchiveStats
from emulator.model.foreground import FOREGROUND

DEFAULT_YIELD_S = 0.05
"""How long after its arrival a batch may wait for a gap between requests: the embedded log's
reader polls as often. History queries do not see it (``sync`` ends the waiting)."""
SLICE_RECORDS = 4
STEP_S = 0.00005
"""The pause after a slice: long enough for a thread waiting for the interpreter lock to take it (a
release alone is not: the releasing thread usually takes the lock back first); ~0.1 ms with the
kernel's timer slack."""
_RECHECK_S = 0.005
"""While waiting for a gap, how often to ask whether the archiver is wanted after all."""
QUIET_S = 0.1
"""No request for this long: the archiver works without slices."""


class Pacer:
    """The archiver thread's pacing (one per archiver; it reads ``FOREGROUND``'s counts, plain ints,
    without its lock: a moment-old count only shortens or lengthens one pause)."""

    def __init__(self, queue: ArchiveQueue, stats: ArchiveStats, yield_s: float = DEFAULT_YIELD_S) -> None:
        self._queue = queue
        self._stats = stats
        self._yield_s = yield_s
        self._served_seen = FOREGROUND.served
        self._request_seen_at = float("-inf")
        self._until = 0.0
        self._left = 0
        self._pausing = False

    def begin(self, batch: Batch) -> None:
        """A batch is about to be encoded: its first record is a slice boundary."""
        self._until = batch.arrived + self._yield_s
        self._left = 0
        self._pausing = self._yield_s > 0

    def tick(self) -> None:
        """Before each record: at a slice boundary, pause if requests are coming in."""
        if self._left:
            self._left -= 1
            return
        self._left = SLICE_RECORDS - 1
        if self._pausing:
            self._pausing = self._boundary()

    def _boundary(self) -> bool:
        """Pause (or not) at a slice boundary; False: no more pauses in this batch."""
        foreground = FOREGROUND
        now = time.monotonic()
        if foreground.active or foreground.served != self._served_seen:
            self._served_seen = foreground.served
            self._request_seen_at = now
        elif now - self._request_seen_at > QUIET_S:
            return True  # no request lately: carry on, and look again at the next boundary
        queue = self._queue
        if queue.pressing():
            return False
        started = now
        time.sleep(STEP_S)  # the interpreter lock is free: a request that came in takes it
        now = time.monotonic()
        while foreground.active and now < self._until and not queue.pressing():
            foreground.wait_for_gap(min(self._until - now, _RECHECK_S))
            now = time.monotonic()
        self._stats.yielded_s += now - started
        return True
