"""How many requests this process is answering, so that background work can step aside for them.

Background threads of the daemon (the history archiver) are pure Python and hold the interpreter
lock while they work; a request answered meanwhile waits for it. They read ``FOREGROUND`` to tell
whether requests are coming in, and ``wait_for_gap`` blocks until none is being answered
(``emulator.history.pacing`` says what the archiver does with it).

One counter per process, not per app: the interpreter lock it works around is per process too, so
every request served here (of any app) is one a background thread here would slow down. Only the
event loop's thread counts (``emulator.server.access_log.RequestObserver``, the outermost
middleware); other threads read ints, which needs no lock. A waiting thread blocks on a lock of its
own, which the request that leaves the count at zero releases: no polling, so the waiting costs the
requests nothing.
"""

from __future__ import annotations

import threading


class Foreground:
    """Requests being answered now (``active``) and since the start (``served``)."""

    __slots__ = ("_gaps", "_gaps_lock", "active", "served")

    def __init__(self) -> None:
        self.active = 0
        self.served = 0
        self._gaps: list[threading.Lock] = []  # one held lock per waiting thread
        self._gaps_lock = threading.Lock()

    def started(self) -> None:
        self.active += 1
        self.served += 1

    def finished(self) -> None:
        self.active -= 1
        if self._gaps and not self.active:
            with self._gaps_lock:
                gaps, self._gaps = self._gaps, []
            for gap in gaps:
                gap.release()

    def wait_for_gap(self, timeout_s: float) -> None:
        """Block until no request is being answered, at most ``timeout_s``."""
        if timeout_s <= 0 or not self.active:
            return
        gap = threading.Lock()
        gap.acquire()
        with self._gaps_lock:
            self._gaps.append(gap)
        if self.active:  # counted after joining: a request that ended before saw no one to wake
            gap.acquire(timeout=timeout_s)
        with self._gaps_lock:
            if gap in self._gaps:
                self._gaps.remove(gap)


FOREGROUND = Foreground()
