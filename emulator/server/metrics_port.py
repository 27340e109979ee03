"""``--metrics-port``: the metrics on a second port, without authentication, for a Prometheus that
cannot present credentials; served apart from the API's event loop, by threads. It listens on
``--metrics-host`` (loopback unless told otherwise) and checks ``Host`` as the API does
(``emulator.server.auth.hosts``): the metrics name every connector.

prometheus_client's own server (``start_http_server``) gives every connection a thread that waits
for the request without a deadline: 300 connections that sent nothing held 300 threads for good.
Here a connection must send its request within ``header_timeout_s`` (the API's ``--header-timeout``),
and at most ``MAX_CONNECTIONS`` are served at once; one more is answered 503 and closed. A
Prometheus scrapes with one connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Gauge, make_wsgi_app

from emulator.server.auth.hosts import HostRule
from emulator.server.listen import ListenError

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

MAX_CONNECTIONS = 16

BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\nconnection: close\r\n"
    b"content-length: 42\r\n\r\ntoo many connections to the metrics port\r\n"
)


class _Handler(WSGIRequestHandler):
    """``timeout`` (per socket read, set per server): the request must arrive within it."""

    def handle(self) -> None:
        with contextlib.suppress(TimeoutError, ConnectionError):  # no request in time, or the client left: close
            super().handle()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet, as prometheus_client's own handler: a scrape every few seconds is not worth a line."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 64  # listen() backlog (socketserver's 5 left a burst of connections unaccepted)
    slots: threading.BoundedSemaphore  # one per server (serve_metrics): connections served at once

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def host_checked(app: WSGIApplication, rule: HostRule) -> WSGIApplication:
    """``app`` behind the ``Host`` check (400 for a host ``rule`` does not serve): the metrics name
    every connector, and a web page must not read them through DNS rebinding."""

    def checked(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        version = str(environ.get("SERVER_PROTOCOL", "HTTP/1.1")).removeprefix("HTTP/")
        why = rule.refusal(environ.get("HTTP_HOST"), version)
        if why is None:
            return app(environ, start_response)
        body = f"{why}\n".encode()
        start_response(
            "400 Bad Request", [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
        )
        return [body]

    return checked


def serve_metrics(
    registry: CollectorRegistry,
    host: str,
    port: int,
    header_timeout_s: float = 10.0,
    hosts: HostRule | None = None,
) -> Callable[[], None]:
    """Serve ``registry`` (the daemon's ``Metrics.registry``, or ``starting_registry()``) on
    ``host:port`` until the returned function is called; ``hosts``: the ``Host`` headers served
    (None: any).

    Raises ``ListenError`` when the port cannot be bound, as the API's own port does."""
    app = make_wsgi_app(registry)
    if hosts is not None:
        app = host_checked(app, hosts)
    handler = type("MetricsHandler", (_Handler,), {"timeout": header_timeout_s})
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_class = type(
        "MetricsServer",
        (_Server,),
        {"address_family": family, "slots": threading.BoundedSemaphore(MAX_CONNECTIONS)},
    )
    try:
        server: WSGIServer = make_server(host, port, app, server_class, handler)
    except OSError as exc:
        raise ListenError(f"cannot serve metrics on {host}:{port} (--metrics-port): {exc.strerror or exc}") from exc
    thread = threading.Thread(target=server.serve_forever, name="metrics-port", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5.0)

    return stop


def starting_registry() -> CollectorRegistry:
    """What the metrics port says while the storage opens (``emulator.server.starting``): not ready.
    A refused scrape would read as a daemon that is down; this one is up and says it cannot serve."""
    registry = CollectorRegistry()
    Gauge(
        "connect_offsets_ready",
        "1 when /readyz answers 200; 0 while the daemon starts: its offsets log cannot be opened yet",
        registry=registry,
    ).set(0)
    return registry
