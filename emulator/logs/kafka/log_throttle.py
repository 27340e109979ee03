"""At most one log line per kind of Kafka client error in a window, with a count of the rest.

A broker that is gone is retried by librdkafka every few hundred milliseconds, by every client
(the log's producer and readers, the admin client, the claims and Connect topic readers), and each
attempt reaches the log twice: librdkafka's own ``FAIL`` line and its ``error_cb``. A dead broker
made ~45 lines a second, half of them ERROR, and a client polled rarely delivered its queued
errors in one burst of thousands — burying the one line that says what is wrong and firing every
alert on ERROR lines. The first line of each kind is logged at once; the same kind again within
``emulator.log_throttle.WINDOW_S`` is counted, and the count rides on the next line of that kind.
"""

from __future__ import annotations

import logging

from emulator.log_throttle import Throttle, held_note


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
