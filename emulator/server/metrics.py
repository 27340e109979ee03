"""The daemon's Prometheus metrics: one registry per app, served on ``/metrics`` (and ``--metrics-port``).

Two kinds of metric, kept apart on purpose:

- **events**, counted as they happen by the server: HTTP requests by route template and status,
  writes, fenced writes, dropped commit sequences and claims per connector (``Metrics``);
- **state**, read when Prometheus scrapes (``emulator.server.metrics_state``): the reader's
  positions, end offsets and lag, the view's counters, the history archiver, the Connect cluster's
  readers and sink connectors' consumer-group lag. The daemon already keeps those numbers; reading
  them at scrape time adds nothing to the paths that change them.

A scrape may ask the broker (sink lag) and takes locks the reader thread takes, so ``render`` is
blocking: the ``/metrics`` route calls it in a worker thread, never on the event loop.

Label cardinality is bounded by what exists: routes are templates (``/connectors/{connector}/offsets``),
never raw paths; requests that match no route are counted under ``route="unmatched"``, and those
the HTTP server cannot parse in ``connect_offsets_http_invalid_requests_total`` alone
(``emulator.server.invalid_requests``: their method and path are whatever a client sent); a connector
gets its own label values only if it exists (``emulator.server.audit`` decides), and the state
metrics name partitions of the offsets log, topics of the Connect cluster and the topic-partitions
of sink connectors' groups, all finite and owned by the operator.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.registry import Collector

from emulator import __version__
from emulator.server.connections import REASONS
from emulator.server.invalid_requests import InvalidRequestsCollector

UNMATCHED_ROUTE = "unmatched"
"""The route label of requests no route matched (404s of unknown paths): raw paths would let any
client create series at will."""

CONTENT_TYPE = CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Seconds: reads answer in about a millisecond, a write waits for the log's acknowledgement (ms on
Kafka, an fsync on the embedded log), claims and sink calls wait for the broker, and a write times
out after 60 s."""


class Metrics:
    """The registry and the event counters; ``state`` (a collector) is read at every scrape."""

    def __init__(self, state: Collector | None = None) -> None:
        # No ``*_created`` series beside every counter: in the text format they are one more series
        # per label set that no alert or dashboard here uses (a process-wide switch of the library).
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "connect_offsets_http_requests",
            "HTTP requests answered, by method, route template and status",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "connect_offsets_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer, by method, route template and status",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.writes = Counter(
            "connect_offsets_writes",
            "Modifying requests (PATCH, DELETE, rollback, import) per connector, operation and result "
            "(ok, dry_run, or the error kind)",
            ["connector", "operation", "result"],
            registry=r,
        )
        self.fenced = Counter(
            "connect_offsets_fenced_writes",
            "Writes refused because a newer claim fenced the writer",
            ["connector"],
            registry=r,
        )
        self.dropped_sequences = Counter(
            "connect_offsets_dropped_sequences",
            "Partitions whose commit carried a stale sequence and was dropped (reordering detection)",
            ["connector"],
            registry=r,
        )
        self.claims = Counter(
            "connect_offsets_claims",
            "Claim and release requests per connector and result (ok or the error kind)",
            ["connector", "operation", "result"],
            registry=r,
        )
        self.connections_closed = Counter(
            "connect_offsets_http_connections_closed",
            "Connections the daemon closed on its own: reason=limit (--max-connections open; answered 503), "
            "header_timeout (no request headers, or no TLS handshake, within --header-timeout; answered 408), "
            "head_too_large (request line and headers over 64 KiB; answered 431), body_timeout (a request body "
            "that stopped arriving for --header-timeout, or came slower than 16 KiB/s after it), "
            "response_timeout (a client that did not read its answer for --header-timeout) or pipeline_limit "
            "(too many pipelined requests waiting)",
            ["reason"],
            registry=r,
        )
        for reason in REASONS:  # at 0 from the start, so rate() and alerts see them
            self.connections_closed.labels(reason)
        self.connections_open = Gauge(
            "connect_offsets_http_connections", "HTTP connections open now (at most --max-connections)", registry=r
        )
        self.large_writes = Gauge(
            "connect_offsets_large_writes",
            "Large writes (a PATCH or import with a body over 64 KiB, a DELETE of over 1,000 keys or 64 KiB of keys "
            "and values) now: state=running (one at a time) or waiting for their turn (service/bulk_lane.py)",
            ["state"],
            registry=r,
        )
        r.register(InvalidRequestsCollector())  # the process's count: uvicorn answers those before any app
        self._request_children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        info = Gauge("connect_offsets_build_info", "Always 1; the daemon's version as a label", ["version"], registry=r)
        info.labels(__version__).set(1)
        if state is not None:
            r.register(state)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        # The labelled children, kept per (method, route template, status) — a bounded set — rather
        # than looked up through ``labels()`` (validation and a lock) twice on every request.
        children = self._request_children.get((method, route, status))
        if children is None:
            labels = (method, route, str(status))
            children = self.requests.labels(*labels), self.latency.labels(*labels)
            self._request_children[(method, route, status)] = children
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        """The text exposition format. Blocking (see the module's docstring): call it off the event loop."""
        return generate_latest(self.registry)
