"""How many requests this process is answering, so that background work can step aside for them.

Background threads of the daemon (the history archiver) are pure Python and hold the interpreter
lock while they work; a request answered meanwhile waits for it. They read ``FOREGROUND`` to tell
whether requests are coming in, and ``wait_for_gap`` blocks until none is being answered
(``emulator.history.pacing`` says what the archiver does with it).

One counter per process, not per app: the interpreter lock it works around is per process too, so
every request served here (of any app, on any event loop) is one a background thread here would
slow down. The outermost middleware counts (``emulator.server.access_log.RequestObserver``) under a
lock of its own: an in-process app (tests, the test kit) may run its event loop beside another's,
and that ``+=`` on an attribute is not interrupted is a detail of this interpreter, not a promise.
Readers read ints. A waiting thread blocks on a lock of its own, which the request that leaves the
count at zero releases: no polling, so the waiting costs the requests nothing.
"""

from __future__ import annotations

import threading


class Foreground:
    """Requests being answered now (``active``) and since the start (``served``)."""

    __slots__ = ("_gaps", "_lock", "active", "served")

    def __init__(self) -> None:
        self.active = 0
        self.served = 0
        self._gaps: list[threading.Lock] = []  # one held lock per waiting thread
        self._lock = threading.Lock()  # guards the counts and the waiters

    def started(self) -> None:
        with self._lock:
            self.active += 1
            self.served += 1

    def finished(self) -> None:
        with self._lock:
            self.active -= 1
            if self.active or not self._gaps:
                return
            gaps, self._gaps = self._gaps, []
        for gap in gaps:
            gap.release()

    def wait_for_gap(self, timeout_s: float) -> None:
        """Block until no request is being answered, at most ``timeout_s``."""
        if timeout_s <= 0 or not self.active:
            return
        gap = threading.Lock()
        gap.acquire()
        with self._lock:
            if not self.active:
                return
            self._gaps.append(gap)  # released by the request that leaves the count at zero
        gap.acquire(timeout=timeout_s)
        with self._lock:
            if gap in self._gaps:
                self._gaps.remove(gap)


FOREGROUND = Foreground()
