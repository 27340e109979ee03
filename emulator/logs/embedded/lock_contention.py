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
import threading
import time
from collections.abc import Callable

from emulator.model.times import format_time_ms

log = logging.getLogger(__name__)

PROBE_INTERVAL_S = 1.0
"""How often the lock is tried while a write of ours last timed out on it: at most this late does
readiness come back after the other process lets go."""


class LockContention:
    """Whether the log's write lock is held elsewhere (as a write of ours last found), since when,
    and the probe that notices the end.

    ``probe()`` tries the write lock without waiting and returns whether it got it (then released at
    once); None when it could not try this time (this process is writing itself: its outcome will
    tell). It runs on this class's thread, never on a request's or the event loop's.
    """

    def __init__(
        self, description: str, probe: Callable[[], bool | None], interval_s: float = PROBE_INTERVAL_S
    ) -> None:
        self._description = description
        self._probe = probe
        self._interval_s = interval_s
        self._lock = threading.Lock()  # guards _since, _since_wall and _prober
        self._since: float | None = None  # monotonic time of the first timed-out write, None while free
        self._since_wall = 0.0
        self._prober: threading.Thread | None = None
        self._stop = threading.Event()
        self.probes = 0
        """Probes made (``/status`` shows nothing of it; tests count it to see the probe stays rare)."""

    def timed_out(self) -> None:
        """A write of ours waited out its deadline for the write lock: the log is locked from here
        on, for readiness, until the lock is seen free. The first of a run is logged, once."""
        with self._lock:
            if self._since is not None:
                return
            self._since = time.monotonic()
            self._since_wall = time.time()
            if self._prober is None and not self._stop.is_set():
                self._prober = threading.Thread(
                    target=self._probe_until_free, name="embedded-log-lock-probe", daemon=True
                )
                self._prober.start()
        log.warning(
            "%s is locked by another process: a write timed out waiting for SQLite's write lock. /readyz "
            "answers 503 until the lock is free (tried every %g s)",
            self._description,
            self._interval_s,
        )

    def succeeded(self) -> None:
        """A write of ours (or the probe) got the lock: it is free. One attribute read when it was."""
        if self._since is None:
            return
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            log.warning(
                "%s: SQLite's write lock is free again after %.1f s", self._description, time.monotonic() - since
            )

    def reason(self) -> str | None:
        """``/readyz``'s reason while the lock is held elsewhere, else None. Never blocks."""
        since = self._since
        if since is None:
            return None
        return (
            f"{self._description} is locked by another process since {format_time_ms(int(self._since_wall * 1000))} "
            f"({time.monotonic() - since:.1f} s): writes time out waiting for SQLite's write lock (a second daemon, "
            "`connect-offsets compact` or an import, a tool with a transaction open)"
        )

    def close(self) -> None:
        """Stop probing (the log is closing). Idempotent."""
        self._stop.set()
        prober = self._prober
        if prober is not None and prober is not threading.current_thread():
            prober.join(timeout=10.0)

    def _probe_until_free(self) -> None:
        while not self._stop.wait(self._interval_s):
            with self._lock:
                if self._since is None:  # a write of ours got the lock first
                    self._prober = None
                    return
            self.probes += 1
            try:
                free = self._probe()
            except Exception as e:  # e.g. the log closed under the probe, or a damaged file
                log.warning("%s: the write lock probe failed: %r", self._description, e)
                continue
            if free:
                self.succeeded()
