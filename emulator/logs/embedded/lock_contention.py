"""Another process holding the embedded log's write lock, learnt from a write of ours that waited it out.

A write in progress flips readiness by itself (``STALLED_COMMIT_S``), but once that write has timed
out (503 ``log_timeout``) nothing is in progress any more, and ``/readyz`` answered 200 while every
next write would wait out its deadline the same way: a load balancer kept sending writes to a daemon
that could only time out. The holder is another process (a second daemon, ``connect-offsets
compact`` or an import, a tool with a transaction open), and nothing tells this process when it
lets go.

So a write that timed out on the lock is remembered here, and readiness says 503 naming it, until
either a write of ours gets the lock again or a probe does: while the lock is held, a thread of this
class's own tries once every ``PROBE_INTERVAL_S`` to take it without waiting (``BEGIN IMMEDIATE``
with ``busy_timeout`` 0, rolled back at once). ``/readyz`` itself only reads two attributes: it never
touches SQLite, never waits, and never takes the write lock, however often it is probed; and while
nothing timed out there is no probe at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from emulator.logs.embedded.probed_condition import ProbedCondition
from emulator.model.times import format_time_ms

log = logging.getLogger(__name__)

PROBE_INTERVAL_S = 1.0
"""How often the lock is tried while a write of ours last timed out on it: at most this late does
readiness come back after the other process lets go."""


class LockContention(ProbedCondition):
    """Whether the log's write lock is held elsewhere (as a write of ours last found), since when,
    and the probe that notices the end.

    ``probe()`` tries the write lock without waiting and returns whether it got it (then released at
    once); None when it could not try this time (this process is writing itself: its outcome will
    tell). It runs on this class's thread, never on a request's or the event loop's.
    """

    _PROBE_THREAD = "embedded-log-lock-probe"
    _log = log

    def __init__(
        self, description: str, probe: Callable[[], bool | None], interval_s: float = PROBE_INTERVAL_S
    ) -> None:
        super().__init__(description, interval_s)
        self._probe = probe
        self._since_wall = 0.0
        self.probes = 0
        """Probes made (``/status`` shows nothing of it; tests count it to see the probe stays rare)."""

    def timed_out(self) -> None:
        """A write of ours waited out its deadline for the write lock: the log is locked from here
        on, for readiness, until the lock is seen free. The first of a run is logged, once."""
        with self._lock:
            if self._since is not None:
                return
            self._since_wall = time.time()  # before _since: readiness reads the two without the lock
            self._begin()
        log.warning(
            "%s is locked by another process: a write timed out waiting for SQLite's write lock. /readyz "
            "answers 503 until the lock is free (tried every %g s)",
            self._description,
            self._interval_s,
        )

    def reason(self) -> str | None:
        """``/readyz``'s reason while the lock is held elsewhere, else None. Never blocks."""
        held = self._held_for()
        if held is None:
            return None
        return (
            f"{self._description} is locked by another process since {format_time_ms(int(self._since_wall * 1000))} "
            f"({held:.1f} s): writes time out waiting for SQLite's write lock (a second daemon, "
            "`connect-offsets compact` or an import, a tool with a transaction open)"
        )

    def _ended(self, seconds: float) -> str:
        return f"{self._description}: SQLite's write lock is free again after {seconds:.1f} s"

    def _probe_once(self) -> bool | None:
        self.probes += 1
        try:
            return self._probe() is True
        except Exception as e:  # e.g. the log closed under the probe, or a damaged file
            log.warning("%s: the write lock probe failed: %r", self._description, e)
            return False
