"""At most one log line per kind of Kafka client error in a window, with a count of the rest.

A broker that is gone is retried by librdkafka every few hundred milliseconds, by every client
(the log's producer and readers, the admin client, the claims and Connect topic readers), and each
attempt reaches the log twice: librdkafka's own ``FAIL`` line and its ``error_cb``. A dead broker
made ~45 lines a second, half of them ERROR, and a client polled rarely delivered its queued
errors in one burst of thousands — burying the one line that says what is wrong and firing every
alert on ERROR lines. The first line of each kind is logged at once; the same kind again within
``WINDOW_S`` is counted, and the count rides on the next line of that kind.
"""

from __future__ import annotations

import logging
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


class LibrdkafkaFilter(logging.Filter):
    """Throttles librdkafka's own lines per client and facility (confluent-kafka logs them as
    ``"%s [%s] %s"`` with the facility, the client's name and the text)."""

    def __init__(self, throttle: Throttle | None = None) -> None:
        super().__init__()
        self.throttle = throttle or Throttle()

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.levelno < logging.WARNING or not isinstance(args, tuple) or len(args) < 3:
            return True  # debug output someone asked for, or a line of another shape: as it is
        held = self.throttle.admit((args[0], args[1]))
        if held is None:
            return False
        if held:
            record.msg = f"{record.msg}%s"
            record.args = (*args, held_note(held, self.throttle.window_s))
        return True
