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
    one's connections sit in TIME_WAIT. ``TCP_NODELAY``, inherited by every accepted connection:
    without it each answer on a kept-alive connection waited for the client's delayed ACK (Nagle),
    44 ms at p50 for a GET of one connector's offsets, 1.8 ms with it (docs/operations.md).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
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
