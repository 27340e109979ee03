"""Limits on the HTTP connections themselves, below the app: connections that never become requests,
requests that never finish arriving, and answers that are never read.

uvicorn keeps every accepted connection until its client closes it: one that never sends a request
(or sends its headers a byte at a time) stays open for good, and each holds a file descriptor. A
few thousand such connections — a leaking client pool, a port scanner, a slow-headers attack —
took the last descriptor of a daemon at ``ulimit -n 256``: new clients were cut off, and the history
archiver, failing to open its next file, stopped (it never continues with a hole; docs/history.md).
These limits close that (every closure is counted with its reason, ``on_closed``, and logged):

- **at most ``--max-connections`` open at once**: one more is answered 503 ``too_many_connections``
  with ``Retry-After`` and closed at once (``limit``), so descriptors stay for the log, the history
  and the broker clients (the soft ``RLIMIT_NOFILE`` is raised at start to fit, ``fit_descriptor_limit``).
  Over TLS a connection counts from its TCP accept, during the handshake too (``tls_accepting``: asyncio
  makes the app's protocol only once the handshake is done, so connections that never start one
  escaped the count and the head timeout, and held descriptors for asyncio's 60 s each); up to
  ``TLS_SPARE`` more may complete a handshake to read the 503, and beyond those one is closed at once;
- **a request's head (request line and headers) must arrive within ``--header-timeout``** of the
  connection opening (TLS handshake included), or of its first byte on a kept-alive connection:
  otherwise 408 ``request_timeout``, then closed (``header_timeout``). Idle time between requests is
  uvicorn's keep-alive (5 s);
- **a request's head is at most ``MAX_HEAD_BYTES`` (64 KiB)**: past it, 431 ``request_head_too_large``,
  then closed (``head_too_large``; httptools has no limit of its own, h11's is set to the same);
- **a body that stops arriving for ``--header-timeout``** (no byte while the connection is read), **or
  that arrives slower than ``MIN_BODY_RATE`` on average** (16 KiB/s: the body may take
  ``--header-timeout`` plus one second per 16 KiB of body received, its head not counted, time the
  daemon did not read excluded) is
  closed without an answer (``body_timeout``): the route reading it sees the client gone, nothing is
  written. A rate, not a fixed total: a 32 MiB body (``--max-body-bytes``' default) from an honest
  client at 1 MB/s takes 33 s, while a byte every few seconds is cut off after ``--header-timeout``;
- **an answer must be read**: a connection whose unsent data stays above the transport's high-water
  mark (64 KiB) for ``--header-timeout`` (the client read less than the 48 KiB down to the low-water
  mark: 4.8 KB/s at the default), or that is being closed with data unsent for that long, is aborted
  (``response_timeout``). Before, a client that never read kept its connection (and the route's task,
  waiting to write) for good; 1,000 of them filled ``--max-connections``;
- **at most ``MAX_PIPELINED`` requests waiting behind the one being answered** (httptools parses every
  pipelined request a read brings, and each answered request lets one more read in): past it the
  connection is aborted (``pipeline_limit``), the requests waiting unanswered.

Per arrival of data the limits cost a few attribute updates; the write limit costs nothing until the
transport pauses the writer; a sweep once a second does the rest (no timer per request on the event loop).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from emulator.model.errors import (
    InvalidRequest,
    OffsetsError,
    RequestHeadTimeout,
    RequestHeadTooLarge,
    TooManyConnections,
)

log = logging.getLogger(__name__)

DESCRIPTOR_RESERVE = 512
"""File descriptors kept for everything but client connections: the embedded log's SQLite files,
history files, and librdkafka's sockets and wake-up pipes (a few per client and broker)."""

MAX_HEAD_BYTES = 64 * 1024
"""The longest request head (request line and headers) accepted, as common servers allow (nginx's
``large_client_header_buffers`` 4 x 8k .. Apache's 8 KiB per line x 100): Basic, bearer tokens and
cookies fit many times over. Before, httptools accepted any: 100 MB of one header held in memory."""

MIN_BODY_RATE = 16 * 1024
"""Bytes per second a request body must average, after ``--header-timeout`` of grace (Apache's
``mod_reqtimeout`` ``body=…,MinRate=…`` rule): 128 kbit/s, below any LAN or honest WAN client."""

MAX_PIPELINED = 64
"""Requests a connection may have waiting behind the one being answered (httptools' pipeline)."""

TLS_SPARE = 16
"""Connections over ``--max-connections`` that may complete a TLS handshake to read the 503."""

if TYPE_CHECKING:  # h11 is imported only by a daemon asking for client certificates (auth.peer_certificate)
    from uvicorn.protocols.http.h11_impl import H11Protocol

P = TypeVar("P", HttpToolsProtocol, "H11Protocol")

SWEEP_S = 1.0
_LOG_EVERY_S = 10.0

REASONS = ("limit", "header_timeout", "head_too_large", "body_timeout", "response_timeout", "pipeline_limit")
"""Why the guard closed connections (``on_closed``; the metric's ``reason`` label)."""


@dataclass
class ConnectionGuard:
    """One daemon's limits, and what they refused (for ``/metrics`` and the log)."""

    max_connections: int
    header_timeout_s: float
    answer: Callable[[OffsetsError], bytes]
    """The whole HTTP response for an error (``emulator.server.errors.raw_error_response``)."""
    on_closed: Callable[[str], None] = lambda reason: None
    """Called with the reason (one of ``REASONS``) of every connection closed."""
    open_connections: set[Any] = field(default_factory=set)
    """uvicorn's set of open connections (bound by the first one)."""
    handshaking: set[Any] = field(default_factory=set)
    """TLS connections accepted whose handshake is not done (``tls_accepting``)."""
    _sweeping: bool = False
    _unlogged: dict[str, tuple[int, str, tuple[str, int] | None]] = field(default_factory=dict)
    _logged_at: dict[str, float] = field(default_factory=dict)

    def busy(self) -> int:
        """Connections counted against ``max_connections``: open, and in a TLS handshake."""
        return len(self.open_connections) + len(self.handshaking)

    def close(
        self,
        protocol: Any,
        reason: str,
        message: str,
        answer: OffsetsError | None,
        abort: bool = False,
    ) -> None:
        """Close ``protocol``'s connection (after writing ``answer``, if any; at once, data unsent
        dropped, with ``abort``), count it and note it."""
        transport = protocol.transport
        if transport is None or (transport.is_closing() and not abort):
            return
        if abort:
            transport.abort()
            # The answered request's next write must not reach the closed transport (uvloop raises),
            # and one waiting to write goes on.
            _mark_disconnected(protocol.cycle, protocol.serving)
            protocol.flow.resume_writing()
        else:
            if answer is not None:
                transport.write(self.answer(answer))
            transport.close()
        self.counted(reason, message, protocol.client)

    def counted(self, reason: str, message: str, client: tuple[str, int] | None) -> None:
        self.on_closed(reason)
        self._note(reason, message, client)

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
        now = loop.time()
        deadline = now - self.header_timeout_s
        timeout = f"{self.header_timeout_s:g} s (--header-timeout)"
        for acceptor in list(self.handshaking):
            if acceptor.accepted_at < deadline:
                acceptor.give_up(f"the TLS handshake was not done within {timeout}")
        for protocol in list(self.open_connections):
            transport = protocol.transport
            if transport.is_closing():
                # Closing, and its last data not sent yet (connection_lost comes once it is): a client
                # that reads nothing would keep it until the kernel gives up, if ever.
                if protocol.closing_seen is None:
                    protocol.closing_seen = now
                elif protocol.closing_seen < deadline:
                    message = f"the client read none of the answer's last data within {timeout}"
                    self.close(protocol, "response_timeout", message, None, abort=True)
                continue
            paused = protocol.write_paused_at
            if paused is not None and paused < deadline:
                message = f"the client did not read the answer (its unsent part stayed over 64 KiB) within {timeout}"
                self.close(protocol, "response_timeout", message, None, abort=True)
                continue
            since = protocol.head_since
            if since is not None and since < deadline:
                protocol.head_since = None
                late = RequestHeadTimeout(f"The request's headers did not arrive within {timeout}")
                self.close(protocol, "header_timeout", late.message, late)
                continue
            cycle = protocol.cycle
            if cycle is None or cycle.response_complete or not cycle.more_body:
                continue
            if not transport.is_reading():
                # uvicorn pauses reading while the route has not taken what came: not the client's time.
                protocol.request_since += SWEEP_S
                continue
            # The route is reading this body: an answer written here would cross its own. Closed
            # without one, the route sees the client gone and gives up (nothing was written).
            if protocol.data_at < deadline:
                self.close(protocol, "body_timeout", f"no byte of the request's body within {timeout}", None)
            elif now - protocol.request_since > self.header_timeout_s + protocol.body_received / MIN_BODY_RATE:
                message = (
                    f"the request's body arrived slower than {MIN_BODY_RATE // 1024} KiB/s after {timeout} "
                    f"({protocol.body_received} bytes of body in {now - protocol.request_since:.0f} s)"
                )
                self.close(protocol, "body_timeout", message, None)
        self._flush_due(time.monotonic())
        loop.call_later(SWEEP_S, self._sweep, loop)


def _mark_disconnected(*cycles: Any) -> None:
    """What uvicorn's ``connection_lost`` does for the newest request parsed (``cycle``), for each of
    ``cycles``: with requests pipelined, the one being answered (``serving``) is an older one, and
    without this it would never learn that its client left (``Request.is_disconnected``)."""
    for cycle in cycles:
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()


def _tail_after_last_head(data: bytes) -> int:
    """Bytes of ``data`` that can belong to a head begun in it and not finished (one holds no blank
    line, so it lies after the last one)."""
    end = data.rfind(b"\r\n\r\n")
    return len(data) if end < 0 else len(data) - end - 4


def _too_large(size: str) -> RequestHeadTooLarge:
    return RequestHeadTooLarge(
        f"The request's line and headers are longer than {MAX_HEAD_BYTES // 1024} KiB ({size}); nothing was done"
    )


class _Refused(Exception):
    """Raised in a parser callback to stop parsing; ``send_400_response`` then answers the refusal."""


def guarded_protocol(guard: ConnectionGuard, base: type[P]) -> type[P]:
    """``base`` (uvicorn's httptools protocol, or its h11 one with client certificates) with
    ``guard``'s limits, for ``uvicorn.Config(http=...)`` (with ``h11_max_incomplete_event_size=MAX_HEAD_BYTES``)."""
    httptools = issubclass(base, HttpToolsProtocol)

    class Guarded(base):  # type: ignore[valid-type,misc]
        head_since: float | None = None
        """When the request head now awaited began (the connection, or the first byte after an
        answer); None while a request is being served or its body read."""
        request_since: float = 0.0
        """When the request now served began to arrive (less the sweeps that found reading paused)."""
        body_received: int = 0
        """Bytes of request bodies received since ``request_since`` (as the parser hands them over: no
        head, no chunk framing): the body's pace, and what a ``body_timeout`` says arrived."""
        data_at: float = 0.0
        """When bytes last arrived (a body that stops arriving is cut off by the sweep too)."""
        head_bytes: int = 0
        """httptools: bytes of the head being parsed, before the last read (an upper bound)."""
        read_size: int = 0
        write_paused_at: float | None = None
        """Since when the transport holds more unsent data than its high-water mark."""
        closing_seen: float | None = None
        """When the sweep first saw the connection closing with data unsent."""
        lingering: bool = False
        """Answered 431 and half-closed: what still arrives is dropped."""
        serving: Any = None
        """httptools: the request being answered (``self.cycle`` is the newest one parsed)."""
        refusal: tuple[str, str, OffsetsError | None] | None = None
        """Why a parser callback stopped parsing (``_Refused``): reason, message, answer."""

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            guard.open_connections = self.connections
            if len(self.connections) + len(guard.handshaking) > guard.max_connections:
                full = TooManyConnections(
                    f"The daemon has {guard.max_connections} connections open (--max-connections); "
                    "try again shortly, or reuse a connection"
                )
                guard.close(self, "limit", full.message, full)
                return
            self.head_since = self.request_since = self.loop.time()
            guard.start_sweeping(self.loop)
            if not httptools:
                self._check_complete_heads()

        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            # A large write waiting for its turn (emulator.service.bulk_lane) looks at its client every
            # half second; behind a pipelined request it would be written for a client long gone.
            _mark_disconnected(self.serving)

        def data_received(self, data: bytes) -> None:
            if self.lingering:
                return  # refused: the parser is done with this connection
            self.data_at = now = self.loop.time()
            idle = self.cycle is None or self.cycle.response_complete
            if idle and self.head_since is None:
                self.head_since = self.request_since = now
                self.body_received = 0
            if not httptools:
                super().data_received(data)
                if self.cycle is not None and not self.cycle.response_complete:
                    self.head_since = None  # a request's head arrived: it is being served
                return
            head_open = self._head_open()
            self.read_size = len(data)
            super().data_received(data)
            if self.cycle is not None and not self.cycle.response_complete:
                self.head_since = None
            if self._head_open():  # a head not finished yet: httptools would keep all of it
                self.head_bytes = self.head_bytes + len(data) if head_open else _tail_after_last_head(data)
                if self.head_bytes > MAX_HEAD_BYTES:
                    self._refuse_head(_too_large(f"{self.head_bytes} bytes so far"))

        def _head_open(self) -> bool:
            """httptools has begun a request (``on_message_begin``) whose head is not complete."""
            return self.scope is not None and "method" not in self.scope

        def on_headers_complete(self) -> None:  # httptools only
            if self.read_size + self.head_bytes > MAX_HEAD_BYTES:  # can be longer: measure it
                size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
                if size > MAX_HEAD_BYTES:
                    self.refusal = ("head_too_large", "", _too_large(f"{size} bytes"))
                    raise _Refused
            self.head_bytes = 0
            if len(self.pipeline) >= MAX_PIPELINED:
                message = f"more than {MAX_PIPELINED} requests pipelined behind the one being answered"
                self.refusal = ("pipeline_limit", message, None)
                raise _Refused
            super().on_headers_complete()

        def on_body(self, body: bytes) -> None:  # httptools only
            self.body_received += len(body)
            super().on_body(body)

        def _start_asgi_task(self, cycle: Any, app: Any) -> None:  # httptools only
            self.serving = cycle
            super()._start_asgi_task(cycle, app)

        def _check_complete_heads(self) -> None:
            """h11 refuses a head longer than its limit only while incomplete; one whole in a read is
            measured here, before uvicorn serves it. A body's bytes are counted here too."""
            import h11  # loaded with the h11 protocol already

            next_event = self.conn.next_event

            def checked() -> Any:
                event = next_event()
                if type(event) is h11.Data:
                    self.body_received += len(event.data)
                elif type(event) is h11.Request:
                    size = len(event.target) + sum(len(name) + len(value) + 4 for name, value in event.headers)
                    if size > MAX_HEAD_BYTES:
                        self.refusal = ("head_too_large", "", _too_large(f"{size} bytes"))
                        raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
                return event

            self.conn.next_event = checked

        def _refuse_head(self, refused: OffsetsError) -> None:
            transport = self.transport
            self.head_since = None
            if self.cycle is not None and not self.cycle.response_complete:
                # a request before it is being answered: a 431 would cross that answer
                guard.close(self, "head_too_large", refused.message, None, abort=True)
                return
            if not transport.can_write_eof():
                # TLS: the close sends the answer, then close_notify; the TLS layer drops what still comes
                guard.close(self, "head_too_large", refused.message, refused)
                return
            # The answer, then a half-close; what the client still sends is read and dropped until
            # the close. Closed at once with the rest of its head unread, the kernel would reset the
            # connection, and the client could lose the answer with it.
            transport.write(guard.answer(refused))
            transport.write_eof()
            self.lingering = True
            self.loop.call_later(SWEEP_S, transport.close)
            guard.counted("head_too_large", refused.message, self.client)

        def pause_writing(self) -> None:
            self.write_paused_at = self.loop.time()
            super().pause_writing()

        def resume_writing(self) -> None:
            self.write_paused_at = None
            super().resume_writing()

        def send_400_response(self, msg: str) -> None:
            """uvicorn answers a request it cannot parse (a request line or a header beyond its
            parser's limits, bytes that are not HTTP/1.1) in plain text; every error of the daemon's
            has Connect's body (docs/api.md). The connection is closed, as uvicorn does. A refusal
            of the guard's own (``_Refused``) is answered and counted as such."""
            transport = self.transport
            if transport is None or transport.is_closing():
                return
            refusal, self.refusal = self.refusal, None
            if refusal is None and not httptools and len(self.conn.trailing_data[0]) > MAX_HEAD_BYTES:
                refusal = ("head_too_large", "", _too_large("more than that received"))
            if refusal is not None:
                reason, message, answer = refusal
                if answer is not None:
                    self._refuse_head(answer)
                else:
                    guard.close(self, reason, message, None, abort=True)
                return
            refused = InvalidRequest(
                f"{msg.rstrip('.')}: the request could not be parsed (a request line or a header too long, or "
                "not HTTP/1.1); nothing was done"
            )
            transport.write(guard.answer(refused))
            transport.close()

    if not httptools:  # h11 parses a pipelined request only once the one before is answered
        del Guarded.on_headers_complete, Guarded._start_asgi_task, Guarded.on_body
    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


class _TlsAcceptor(asyncio.Protocol):
    """A TCP connection to the TLS port: counted from its accept, its handshake done with
    ``loop.start_tls`` (bounded by the guard's sweep), then handed to the HTTP protocol."""

    guard: ConnectionGuard
    context: ssl.SSLContext
    make: Callable[[], Any]

    def __init__(self, **factory: Any) -> None:
        self.factory = factory  # uvicorn's arguments for the HTTP protocol
        self.loop: asyncio.AbstractEventLoop = factory.get("_loop") or asyncio.get_event_loop()
        self.raw: asyncio.Transport | None = None
        self.app: Any = None
        self.accepted_at = 0.0
        self.client: tuple[str, int] | None = None
        self.early = b""
        self.started = False
        self.pending: list[bytes] = []
        self.eof = False
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport
        self.accepted_at = self.loop.time()
        peer = transport.get_extra_info("peername")
        self.client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        guard = self.guard
        if guard.busy() >= guard.max_connections + TLS_SPARE:
            transport.abort()
            message = (
                f"{guard.max_connections} connections open (--max-connections) and {TLS_SPARE} more in a TLS "
                "handshake to be told so: closed at once"
            )
            guard.counted("limit", message, self.client)
            return
        guard.handshaking.add(self)
        guard.start_sweeping(self.loop)
        self.loop.create_task(self._handshake())

    async def _handshake(self) -> None:
        assert self.raw is not None
        if self.early:  # fed to the TLS layer start_tls installs, before its handshake starts
            self.loop.call_soon(self._feed_tls, self.early)
            self.early = b""
        self.started = True
        try:
            tls = await self.loop.start_tls(
                self.raw,
                self,
                self.context,
                server_side=True,
                ssl_handshake_timeout=self.guard.header_timeout_s + 2 * SWEEP_S,  # the sweep's comes first
            )
        except asyncio.CancelledError:
            self.raw.abort()
            raise
        except Exception:  # refused certificate, not TLS, closed: nothing to answer
            self.raw.abort()
            return
        finally:
            self.guard.handshaking.discard(self)
        if self.lost or tls is None or self.raw.is_closing():
            # uvloop's start_tls returns, not raises, when the connection is lost in the handshake
            self.raw.abort()
            return
        self.app = app = self.make(**self.factory)
        tls.set_protocol(app)
        app.connection_made(tls)
        if app.head_since is not None:
            app.head_since = app.request_since = self.accepted_at  # the handshake's time counts
        for data in self.pending:
            app.data_received(data)
        if self.eof:
            app.eof_received()
        self.pending = []

    def _feed_tls(self, data: bytes) -> None:
        """What the raw connection read before ``start_tls`` took it (uvloop starts reading right
        after ``connection_made``, so a quick client's ClientHello comes first to this protocol),
        handed to the TLS protocol as the transport would (``BufferedProtocol``)."""
        assert self.raw is not None
        tls_layer = cast(asyncio.BufferedProtocol, self.raw.get_protocol())
        view = memoryview(data)
        while view and not self.raw.is_closing():
            buffer = memoryview(tls_layer.get_buffer(len(view)))
            size = min(len(buffer), len(view))
            buffer[:size] = view[:size]
            tls_layer.buffer_updated(size)
            view = view[size:]

    def give_up(self, message: str) -> None:
        """Called by the sweep past ``--header-timeout``."""
        if self.raw is not None and self in self.guard.handshaking:
            self.guard.handshaking.discard(self)
            self.raw.abort()
            self.guard.counted("header_timeout", message, self.client)

    # Before start_tls, the raw bytes (kept for it, reading paused); then until the HTTP protocol
    # takes over, what the TLS layer delivers, kept for that protocol.
    def data_received(self, data: bytes) -> None:
        if self.app is not None:
            self.app.data_received(data)
        elif not self.started:
            assert self.raw is not None
            self.raw.pause_reading()
            self.early += data
        else:
            self.pending.append(data)

    def eof_received(self) -> bool | None:
        if self.app is not None:
            return self.app.eof_received()  # type: ignore[no-any-return]
        if not self.started:
            return None  # closed before its handshake began
        self.eof = True
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.guard.handshaking.discard(self)
        if self.app is not None:
            self.app.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.app is not None:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        if self.app is not None:
            self.app.resume_writing()


def tls_accepting(guard: ConnectionGuard, protocol: type[Any], context: ssl.SSLContext) -> type[asyncio.Protocol]:
    """The protocol class for ``uvicorn.Config(http=...)`` serving TLS with ``context`` (``Config``
    given no ``ssl_*``: the server accepts plain TCP), each connection handed to ``protocol``
    (``guarded_protocol``'s) once its handshake is done."""
    return type(
        "TlsAccepting",
        (_TlsAcceptor,),
        {"guard": guard, "context": context, "make": staticmethod(protocol)},
    )


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
