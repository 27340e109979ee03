"""Requests the HTTP server cannot parse: counted, and logged at most once per window.

uvicorn answers a request it cannot parse (a malformed request line or header, a method that is not
one of HTTP's, ``GARBAGE``) with 400 and closes the connection before the app sees anything: no access
line, nothing in ``connect_offsets_http_requests_total``, and one ``WARNING uvicorn.error: Invalid HTTP
request received.`` per request — 200 such requests were 200 lines and no number. Its only trace is
that line, so a filter on uvicorn's logger (installed by ``log_format.configure_logging``) counts each
one for ``connect_offsets_http_invalid_requests_total`` (one series, no label a client could choose)
and lets through the first of each window (``emulator.log_throttle``), the count of the rest logged
when the window ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from emulator.log_throttle import WINDOW_S, Throttle, held_message

UVICORN_LOGGER = "uvicorn.error"
UVICORN_MESSAGE = "Invalid HTTP request received."
"""The line uvicorn's HTTP protocols (httptools, h11) log before answering such a request 400."""

METRIC = "connect_offsets_http_invalid_requests"


class InvalidRequests(logging.Filter):
    """Counts uvicorn's invalid-request lines and throttles them; every other line passes as it is."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        super().__init__()
        self.throttle = Throttle(self._report, window_s)
        self._lock = threading.Lock()
        self._count = 0

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != UVICORN_MESSAGE:
            return True
        with self._lock:
            self._count += 1
        return self.throttle.admit(UVICORN_MESSAGE)

    def _report(self, kind: Hashable, held: int, ends_at: float) -> None:
        what = "invalid HTTP requests (answered 400)"
        logging.getLogger(UVICORN_LOGGER).warning(held_message(held, what, self.throttle.window_s, ends_at))


INVALID_REQUESTS = InvalidRequests()
"""The process's one filter: uvicorn's logger is the process's, and so is the count."""


def install() -> None:
    """Put the filter on uvicorn's logger (once: adding it again changes nothing)."""
    logging.getLogger(UVICORN_LOGGER).addFilter(INVALID_REQUESTS)


class InvalidRequestsCollector(Collector):
    """``connect_offsets_http_invalid_requests_total`` read at each scrape."""

    def __init__(self, source: InvalidRequests = INVALID_REQUESTS) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            METRIC,
            "Requests the HTTP server could not parse (a malformed request line or header, a method that is not "
            "HTTP's), answered 400 and closed before any route: no access line and no "
            "connect_offsets_http_requests_total sample (counted while WARNING lines are logged)",
            value=self._source.count,
        )
