"""Limits on the HTTP connections themselves, below the app: connections that never become requests,
and request bodies that stop arriving.

uvicorn keeps every accepted connection until its client closes it: one that never sends a request
(or sends its headers a byte at a time) stays open for good, and each holds a file descriptor. A
few thousand such connections — a leaking client pool, a port scanner, a slow-headers attack —
took the last descriptor of a daemon at ``ulimit -n 256``: new clients were cut off, and the history
archiver, failing to open its next file, stopped (it never continues with a hole; docs/history.md).
Two limits close that:

- **at most ``--max-connections`` open at once**: one more is answered 503 ``too_many_connections``
  with ``Retry-After`` and closed at once, so descriptors stay for the log, the history and the
  broker clients (the soft ``RLIMIT_NOFILE`` is raised at start to fit, ``fit_descriptor_limit``);
- **a request's head (request line and headers) must arrive within ``--header-timeout``** of the
  connection opening, or of its first byte on a kept-alive connection: otherwise 408
  ``request_timeout``, then closed. Idle time between requests is uvicorn's keep-alive (5 s);
- **a body that stops arriving for ``--header-timeout``** (no byte while the connection is read)
  is closed without an answer: the route reading it sees the client gone, nothing is written.

The head timeout costs each arrival of data two attribute checks; a sweep once a second does the
rest (no timer per request on the event loop).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from emulator.model.errors import InvalidRequest, OffsetsError, RequestHeadTimeout, TooManyConnections

log = logging.getLogger(__name__)

DESCRIPTOR_RESERVE = 512
"""File descriptors kept for everything but client connections: the embedded log's SQLite files,
history files, and librdkafka's sockets and wake-up pipes (a few per client and broker)."""

P = TypeVar("P", HttpToolsProtocol, H11Protocol)

SWEEP_S = 1.0
_LOG_EVERY_S = 10.0


@dataclass
class ConnectionGuard:
    """One daemon's limits, and what they refused (for ``/metrics`` and the log)."""

    max_connections: int
    header_timeout_s: float
    answer: Callable[[OffsetsError], bytes]
    """The whole HTTP response for an error (``emulator.server.errors.raw_error_response``)."""
    on_closed: Callable[[str], None] = lambda reason: None
    """Called with the reason (``limit``, ``header_timeout``, ``body_timeout``) of every connection closed."""
    open_connections: set[Any] = field(default_factory=set)
    """uvicorn's set of open connections (bound by the first one)."""
    _sweeping: bool = False
    _unlogged: dict[str, tuple[int, str, tuple[str, int] | None]] = field(default_factory=dict)
    _logged_at: dict[str, float] = field(default_factory=dict)

    def close(
        self, protocol: HttpToolsProtocol | H11Protocol, reason: str, message: str, answer: OffsetsError | None
    ) -> None:
        """Close ``protocol``'s connection (after writing ``answer``, if any), count it and note it."""
        transport = protocol.transport
        if transport is None or transport.is_closing():
            return
        if answer is not None:
            transport.write(self.answer(answer))
        transport.close()
        self.on_closed(reason)
        self._note(reason, message, protocol.client)

    def _note(self, reason: str, message: str, client: tuple[str, int] | None) -> None:
        """A warning at the first, then at most one every 10 s with the count since (a flood is a
        line every 10 s, not one per connection; the sweep writes what is left)."""
        count, _, _ = self._unlogged.get(reason, (0, "", None))
        self._unlogged[reason] = (count + 1, message, client)
        self._flush_due(time.monotonic())

    def _flush_due(self, now: float) -> None:
        for reason in [r for r in self._unlogged if now - self._logged_at.get(r, -_LOG_EVERY_S) >= _LOG_EVERY_S]:
            count, message, client = self._unlogged.pop(reason)
            self._logged_at[reason] = now
            peer = "" if client is None else f", the last from {client[0]}:{client[1]}"
            log.warning("closed %d connection(s) (%s%s): %s", count, reason, peer, message)

    def start_sweeping(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._sweeping:
            self._sweeping = True
            loop.call_later(SWEEP_S, self._sweep, loop)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        deadline = loop.time() - self.header_timeout_s
        for protocol in list(self.open_connections):
            since = getattr(protocol, "head_since", None)
            if since is not None and since < deadline:
                protocol.head_since = None
                late = RequestHeadTimeout(
                    f"The request's headers did not arrive within {self.header_timeout_s:g} s (--header-timeout)"
                )
                self.close(protocol, "header_timeout", late.message, late)
            elif _body_stalled(protocol, deadline):
                # The route is reading this body: an answer written here would cross its own. Closed
                # without one, the route sees the client gone and gives up (nothing was written).
                message = f"no byte of the request's body within {self.header_timeout_s:g} s (--header-timeout)"
                self.close(protocol, "body_timeout", message, None)
        self._flush_due(time.monotonic())
        loop.call_later(SWEEP_S, self._sweep, loop)


def _body_stalled(protocol: Any, deadline: float) -> bool:
    """A request whose body is still awaited, and no byte came since ``deadline``, while the
    connection was being read (uvicorn pauses reading while the route has not taken what came)."""
    cycle = protocol.cycle
    return (
        cycle is not None
        and not cycle.response_complete
        and cycle.more_body
        and protocol.data_at < deadline
        and protocol.transport.is_reading()
    )


def guarded_protocol(guard: ConnectionGuard, base: type[P]) -> type[P]:
    """``base`` (uvicorn's httptools protocol, or its h11 one with client certificates) with
    ``guard``'s two limits, for ``uvicorn.Config(http=...)``."""

    class Guarded(base):  # type: ignore[valid-type,misc]
        head_since: float | None = None
        """When the request head now awaited began (the connection, or the first byte after an
        answer); None while a request is being served or its body read."""
        data_at: float = 0.0
        """When bytes last arrived (a body that stops arriving is cut off by the sweep too)."""

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            guard.open_connections = self.connections
            if len(self.connections) > guard.max_connections:
                full = TooManyConnections(
                    f"The daemon has {guard.max_connections} connections open (--max-connections); "
                    "try again shortly, or reuse a connection"
                )
                guard.close(self, "limit", full.message, full)
                return
            self.head_since = self.loop.time()
            guard.start_sweeping(self.loop)

        def data_received(self, data: bytes) -> None:
            self.data_at = now = self.loop.time()
            idle = self.cycle is None or self.cycle.response_complete
            if idle and self.head_since is None:
                self.head_since = now
            super().data_received(data)
            if self.cycle is not None and not self.cycle.response_complete:
                self.head_since = None  # a request's head arrived: it is being served

        def send_400_response(self, msg: str) -> None:
            """uvicorn answers a request it cannot parse (a request line or a header beyond its
            parser's limits, bytes that are not HTTP/1.1) in plain text; every error of the daemon's
            has Connect's body (docs/api.md). The connection is closed, as uvicorn does."""
            transport = self.transport
            if transport is None or transport.is_closing():
                return
            refused = InvalidRequest(
                f"{msg.rstrip('.')}: the request could not be parsed (a request line or a header too long, or "
                "not HTTP/1.1); nothing was done"
            )
            transport.write(guard.answer(refused))
            transport.close()

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


def fit_descriptor_limit(max_connections: int) -> int:
    """Raise the soft ``RLIMIT_NOFILE`` (up to the hard limit) so ``max_connections`` connections and
    ``DESCRIPTOR_RESERVE`` more fit; where the hard limit does not allow that, lower the connection
    limit instead, with a warning. Returns the connection limit to use."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + DESCRIPTOR_RESERVE
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-files limit from %d to %d: %s", soft, target, exc)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return max_connections
    fitted = max(soft - DESCRIPTOR_RESERVE, 16)
    log.warning(
        "--max-connections %d needs %d open files, and the limit is %d (ulimit -n; hard limit %s): "
        "accepting at most %d connections",
        max_connections,
        wanted,
        soft,
        "unlimited" if hard == resource.RLIM_INFINITY else hard,
        fitted,
    )
    return fitted
