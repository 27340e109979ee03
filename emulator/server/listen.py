"""The daemon's listening socket, bound before the HTTP server starts.

Left to uvicorn, a port that cannot be bound is a log record followed by an exit, and that
record goes wherever logging goes (a file, when the daemon runs in the background). Binding here
turns the failure into a :class:`ListenError` the command line prints as one line on stderr, and
the bound socket is handed to the server, so nothing else can take the port in between.
"""

from __future__ import annotations

import errno
import socket


class ListenError(Exception):
    """The daemon cannot listen where its settings say; the message names the fix."""


_REASONS = {
    errno.EADDRINUSE: "the address is already in use (another daemon? choose another --port)",
    errno.EACCES: "permission denied (ports below 1024 need privileges; choose another --port)",
    errno.EADDRNOTAVAIL: "this machine has no such address (check --host)",
}


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not yet listening: the server calls ``listen()``).

    ``SO_REUSEADDR`` as uvicorn sets it, so a restarted daemon is not refused while the previous
    one's connections sit in TIME_WAIT. ``IPPROTO_TCP`` stated, not left 0: asyncio turns Nagle off
    (``TCP_NODELAY``) only on connections whose socket says TCP, and with Nagle on, every request
    after the first on a kept-alive connection waited for the client's delayed ACK (~40 ms).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if isinstance(exc, socket.gaierror):
            reason = f"cannot resolve the host ({exc.strerror}; check --host)"
        else:
            reason = _REASONS.get(exc.errno or 0, exc.strerror or str(exc))
        raise ListenError(f"cannot listen on {host}:{port}: {reason}") from exc
    return sock


BACKLOG = 2048
"""uvicorn's default; the server sets its own again when it starts serving on the socket."""


def listen_early(host: str, port: int) -> socket.socket | ListenError:
    """The socket bound and listening now, or why it cannot be (raised later, where it was).

    ``serve`` calls this first, before the storage opens and the HTTP stack is imported (most of a
    healthy start's second): the kernel then completes a client's connection and keeps its request
    in the backlog until the server answers it, where before the client met a refused connection,
    which clients rightly do not retry (a wrong URL is refused too). The error is handed back, not
    raised, so that a storage error still comes before a port in use.
    """
    try:
        sock = listen(host, port)
    except ListenError as exc:
        return exc
    sock.listen(BACKLOG)
    return sock


_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}


def url_of(sock: socket.socket, scheme: str = "http") -> str:
    """The URL a client on this machine uses to reach the bound socket.

    The port comes from the socket, not the settings, so ``--port 0`` reports the port the system
    picked. A wildcard address (``0.0.0.0``, ``::``) is not an address to connect to: the loopback
    address of the same family stands in for it.
    """
    address, port = sock.getsockname()[:2]
    host = _WILDCARDS.get(address, address)
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def listening_on(sock: socket.socket, scheme: str = "http") -> str:
    """Where the socket listens, for the log: a wildcard address is named as such (every interface),
    with the URL a client on this machine uses beside it; an operator reading "127.0.0.1" for a
    daemon bound to 0.0.0.0 would believe it unreachable from other machines."""
    address, port = sock.getsockname()[:2]
    if address not in _WILDCARDS:
        return url_of(sock, scheme)
    shown = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    return f"{shown}, every interface ({url_of(sock, scheme)} from this machine)"
