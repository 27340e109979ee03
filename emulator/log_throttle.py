"""At most one log line per kind of event in a window, with a count of the rest.

A fault that every retry or every request meets (a gone broker, a log that stopped answering) would
otherwise write a line each time: a flood that buries the one line saying what is wrong and fires
every alert on ERROR lines. The first line of each kind is logged at once; the same kind again
within the window is counted, and the count rides on the next line of that kind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable

WINDOW_S = 30.0


class Throttle:
    """Which occurrences of a kind to log (thread-safe: librdkafka calls from its own threads)."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._lock = threading.Lock()
        self._logged_at: dict[Hashable, float] = {}
        self._held: dict[Hashable, int] = {}

    def admit(self, kind: Hashable) -> int | None:
        """None to leave this occurrence out (counted); else how many were left out before it."""
        now = time.monotonic()
        with self._lock:
            last = self._logged_at.get(kind)
            if last is not None and now - last < self.window_s:
                self._held[kind] = self._held.get(kind, 0) + 1
                return None
            self._logged_at[kind] = now
            return self._held.pop(kind, 0)


def held_note(held: int, window_s: float) -> str:
    """The suffix that tells how many lines like this one were left out."""
    return f" ({held} more like it in the {window_s:g} s before, not logged)" if held else ""
