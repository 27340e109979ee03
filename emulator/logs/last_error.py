"""The last error a log met, kept after recovery so that health endpoints can show it.

Both backends keep one per log, read by ``/status`` ``reader.last_error`` and
``connect_offsets_reader_last_error_timestamp_seconds``: an error that the log recovers from by
itself leaves no other trace than a log line, and an operator looking afterwards needs to learn
what happened and when.

On Kafka, librdkafka retries connection losses by itself and the reader threads back off and go on;
the clients of one log share its ``LastError``. A part of the log with a description of its own (the
claims topic's reader and admin client) keeps its errors in a ``LastError`` of its own that passes
each one on (``also``) to the log's, which alone ``/status`` reads: it showed nothing of a claims
reader that failed through a whole broker outage.

On the embedded log the reader's errors, a stalled commit and the storage refusing writes are kept
in the log's one ``LastError`` (``emulator.logs.embedded``): ``/readyz`` says so only while they
last, and a commit stalled for a minute, or a disk that was full for one, left nothing in ``/status``
once it was over.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from emulator.log_throttle import Throttle, held_message

if TYPE_CHECKING:  # the embedded log keeps its errors here too, and never imports librdkafka
    from confluent_kafka import KafkaError

log = logging.getLogger(__name__)


class LastError:
    """Logs an error with its source's description and remembers it; thread-safe."""

    def __init__(self, description: str, logger: logging.Logger = log, *, also: LastError | None = None) -> None:
        """``also``: the log's own ``LastError``, which remembers every error of this one too (prefixed
        with this description, which says where it happened), without logging it a second time."""
        self.description = description
        self._log = logger
        self._also = also
        self._lock = threading.Lock()
        self._message: str | None = None
        self._at: float | None = None
        self._client_message: str | None = None
        self._client_at: float | None = None
        self._throttle = Throttle(self._report_held)

    def record(self, message: str, level: int = logging.WARNING) -> None:
        self._log.log(level, "%s: %s", self.description, message)
        self.remember(message)

    def remember(self, message: str) -> None:
        """Keep ``message`` as the last error, now, without a log line: for a caller that logs the
        failure itself, with its own throttling (the broker watch logs the first failed probe of an
        outage, and every one is remembered, so the time is the outage's last failure)."""
        with self._lock:
            self._message = message
            self._at = time.time()
        if self._also is not None:
            self._also.remember(f"{self.description}: {message}")

    def client_error(self, role: str, err: KafkaError) -> None:
        """For librdkafka's ``error_cb`` (connection loss and the like): clients retry by themselves,
        so each kind of error is logged at most once per ``log_throttle.WINDOW_S`` (always remembered)."""
        message = f"Kafka {role} error: {err}"
        if err.name() != "_ALL_BROKERS_DOWN":  # follows a cause it does not name
            with self._lock:
                self._client_message = message
                self._client_at = time.monotonic()
        self.remember(message)
        if self._throttle.admit((role, err.code())):
            self._log.warning("%s: %s", self.description, message)

    def client_error_since(self, since: float) -> str | None:
        """The last librdkafka client error reported at or after ``since`` (``time.monotonic()``), but
        "all brokers are down", which says nothing of why.

        A failed metadata request often says only "Broker transport failure"; the clients' own last
        error says why ("Connection refused", a TLS failure). The broker watch's failure, which is
        remembered after it and so is what ``/status`` shows, quotes it."""
        with self._lock:
            if self._client_at is None or self._client_at < since:
                return None
            return self._client_message

    def _report_held(self, kind: object, held: int, ends_at: float) -> None:
        role, code = kind if isinstance(kind, tuple) else (kind, "?")
        what = f"Kafka {role} errors (code {code})"
        self._log.warning("%s: %s", self.description, held_message(held, what, self._throttle.window_s, ends_at))

    @property
    def message(self) -> str | None:
        with self._lock:
            return self._message

    @property
    def at(self) -> float | None:
        """Wall-clock time (``time.time()``) of ``message``."""
        with self._lock:
            return self._at

    def last(self) -> tuple[str | None, float | None]:
        """``message`` and ``at`` read together: a snapshot never pairs one error with another's time."""
        with self._lock:
            return self._message, self._at
