"""At most one log line per kind of event in a window, with a count of the rest.

A fault that every retry or every request meets (a gone broker, a log that stopped answering) would
otherwise write a line each time: a flood that buries the one line saying what is wrong and fires
every alert on ERROR lines. The first line of each kind is logged at once and opens a window of
``window_s``; the same kind again within the window is counted, not logged. When the window ends,
the count is reported in a line of its own (``held_message``: ``N more … like the last in the 30 s
before HH:MM:SS, not logged``), whether or not the fault goes on: the end of an incident is never
lost, and a count is never attached to a later line as if it were recent. The next occurrence after
a window opens the next one.

The end of a window is watched by a timer (a daemon thread) started only when a window holds its
first occurrence: nothing is done per occurrence beyond a lock and a counter, and a quiet throttle
has no thread at all. ``close`` reports what is held at once and stops the timers.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass

WINDOW_S = 30.0

Report = Callable[[Hashable, int, float], None]
"""Called when a window that held occurrences ends: the kind, how many were held, and the window's end
(wall clock, ``time.time()``). It logs one line; it is called without the throttle's lock held."""


@dataclass(slots=True)
class _Window:
    ends: float
    """``time.monotonic()`` at which the window ends."""
    ends_at: float
    """The same moment on the wall clock, for the report."""
    held: int = 0
    timer: threading.Timer | None = None


class Throttle:
    """Which occurrences of a kind to log, and the count of the others when their window ends
    (thread-safe: librdkafka calls from its own threads)."""

    def __init__(self, report: Report, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._report = report
        self._lock = threading.Lock()
        self._windows: dict[Hashable, _Window] = {}
        _LIVE.add(self)

    def admit(self, kind: Hashable) -> bool:
        """True to log this occurrence (it opens a window); False to leave it out (counted). A window
        that ended with occurrences held whose timer has not reported them yet is reported first."""
        now = time.monotonic()
        ended: tuple[int, float] | None = None
        with self._lock:
            window = self._windows.get(kind)
            if window is not None and now < window.ends:
                window.held += 1
                first_held = window.held == 1
            else:
                if window is not None and window.held:
                    ended = window.held, window.ends_at
                    window.held = 0  # its timer finds nothing left to report
                self._windows[kind] = _Window(now + self.window_s, time.time() + self.window_s)
                window = None
        if window is None:
            if ended is not None:
                self._report(kind, *ended)
            return True
        if first_held:
            self._watch(kind, window, window.ends - now)
        return False

    def _watch(self, kind: Hashable, window: _Window, delay: float) -> None:
        """Report ``window``'s count when it ends (once a window holds something: one timer per window)."""
        timer = threading.Timer(max(0.0, delay), self._window_ended, (kind, window))
        timer.daemon = True  # idle until the window ends; never keeps the process alive
        with self._lock:
            if window.held:  # not reported meanwhile by close() or a later admit()
                window.timer = timer
                timer.start()

    def _window_ended(self, kind: Hashable, window: _Window) -> None:
        with self._lock:
            held, window.held, window.timer = window.held, 0, None
        if held:
            self._report(kind, held, window.ends_at)

    def close(self) -> None:
        """Report every count held now (its window ending now, or when it ended) and stop the timers."""
        now = time.time()
        with self._lock:
            pending = [(kind, w.held, min(w.ends_at, now), w.timer) for kind, w in self._windows.items() if w.held]
            for window in self._windows.values():
                window.held, window.timer = 0, None
        for kind, held, ends_at, timer in pending:
            if timer is not None:
                timer.cancel()
                if timer is not threading.current_thread():
                    timer.join()  # a cancelled timer ends at once
            self._report(kind, held, ends_at)


def held_message(held: int, what: str, window_s: float, ends_at: float) -> str:
    """The line that reports how many occurrences of ``what`` a window left out."""
    end = time.strftime("%H:%M:%S", time.localtime(ends_at))
    return f"{held} more {what} like the last in the {window_s:g} s before {end}, not logged"


_LIVE: weakref.WeakSet[Throttle] = weakref.WeakSet()
"""Every throttle in the process, for ``report_all_held`` (weak: a closed log's goes with it)."""


def report_all_held() -> None:
    """Report what every throttle holds now: a daemon that stops ends its windows early, and their
    timers are daemon threads that would die with the process and take the counts with them."""
    for throttle in list(_LIVE):
        throttle.close()
