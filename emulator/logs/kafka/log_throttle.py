"""At most one log line per kind of Kafka client error in a window, with a count of the rest.

A broker that is gone is retried by librdkafka every few hundred milliseconds, by every client
(the log's producer and readers, the admin client, the claims and Connect topic readers), and each
attempt reaches the log twice: librdkafka's own ``FAIL`` line and its ``error_cb``. A dead broker
made ~45 lines a second, half of them ERROR, and a client polled rarely delivered its queued
errors in one burst of thousands — burying the one line that says what is wrong and firing every
alert on ERROR lines. The first line of each kind is logged at once; the same kind again within
``emulator.log_throttle.WINDOW_S`` is counted, and the count is logged when the window ends (at the
level and on the logger of the last line left out).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

from emulator.log_throttle import Throttle, held_message

LIBRDKAFKA_LOGGER = "emulator.logs.kafka.librdkafka"


class LibrdkafkaFilter(logging.Filter):
    """Throttles librdkafka's own lines per client and facility (confluent-kafka logs them as
    ``"%s [%s] %s"`` with the facility, the client's name and the text)."""

    def __init__(self, window_s: float | None = None) -> None:
        super().__init__()
        self.throttle = Throttle(self._report) if window_s is None else Throttle(self._report, window_s)
        self._last: dict[Hashable, tuple[str, int]] = {}  # per kind: the logger and level of the last left out

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.levelno < logging.WARNING or not isinstance(args, tuple) or len(args) < 3:
            return True  # debug output someone asked for, a line of another shape, or a count: as it is
        kind = (args[0], args[1])
        if self.throttle.admit(kind):
            return True
        self._last[kind] = (record.name, record.levelno)
        return False

    def _report(self, kind: Hashable, held: int, ends_at: float) -> None:
        name, level = self._last.get(kind, (LIBRDKAFKA_LOGGER, logging.WARNING))
        facility, client = kind if isinstance(kind, tuple) else (kind, "")
        what = f"{facility} [{client}] lines"
        # Already formatted, without arguments: the filter lets a line of that shape through.
        logging.getLogger(name).log(level, held_message(held, what, self.throttle.window_s, ends_at))
