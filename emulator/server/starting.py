"""What the daemon answers while its storage opens: the port is up, and says why it is not ready.

Opening the offsets log waits for as long as it takes (or ``--startup-timeout``) when the Kafka
cluster does not answer or the embedded log's disk is full. Before, the daemon bound its port only
after that, so for the whole wait a probe met a refused connection: Kubernetes' liveness probe on
``/healthz`` restarted a daemon that was only waiting for its broker, ``connect-offsets status``
said "unreachable", and ``/readyz`` could not say why — while the docs promised an HTTP server "up
from the first second".

Now ``open_answering`` opens the storage and builds the app over it in a thread, and when that
takes longer than ``GRACE_S`` it binds the port and answers, until the app is built, with a small
ASGI app of its own: ``/healthz`` 200 (the process is alive and serving), ``/readyz`` and
``/status`` 503 with Connect's error body naming the wait, every other route 503 ``not_ready`` with
``Retry-After``. Then that server steps aside and the daemon's app serves on the same socket
(connections waiting in the backlog are kept). Within the grace nothing changes: storage errors
still come before a port in use, and a start that quick runs no second server.

A SIGTERM before the daemon's server runs (which logs its own shutdown) is logged here, with the
step the start was at, before the process ends by it (``logged_sigterm_until_serving``): a
supervisor that stopped a slow start otherwise found a log that ended mid-sentence.

The reason names hosts and files, so, as for ``/readyz`` (``emulator.server.auth.status``), it is
shown only when authentication is off; the starting app authenticates no one.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import uvicorn

from emulator.model.errors import ERROR_HEADER, NotReady
from emulator.server.auth.status import HIDDEN

log = logging.getLogger(__name__)

T = TypeVar("T")

GRACE_S = 0.5
"""How long the start (the storage, then the app over it) may take before the port answers on its
behalf. A healthy embedded log opens in milliseconds and a reachable Kafka cluster well within a
second, but importing and building the app takes ~0.6 s more here and 2-3 s on a loaded machine: with
the port answering only after the app was built, a liveness probe with Kubernetes' default 1 s
timeout could fail a daemon that was only starting. Half a second keeps a start that fails at once
(a damaged log, a refused setting) from binding anything first."""

NOTHING_READ: dict[str, Any] = {
    "ready": False,
    "error": None,
    "records_read": 0,
    "partitions_at_end": 0,
    "partitions": 0,
    "positions": {},
    "end_offsets": {},
}
"""``/readyz``'s progress fields before the log is open, so the answer has the documented shape."""

_ERROR_HEADER = ERROR_HEADER.lower().encode("latin-1")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass
class Startup:
    """What the start-up is doing now and, while it waits, why; written by the opening thread, read by
    the starting app (a reference swap each: no lock needed for a snapshot)."""

    step: str = "preparing"
    waiting: str | None = None
    """The last reason an attempt failed (``on_startup_wait`` of the logs), None when none failed."""
    since: float = field(default_factory=time.monotonic)

    def begin(self, step: str) -> None:
        self.step, self.waiting = step, None

    def wait(self, why: str) -> None:
        self.waiting = why

    def reason(self) -> str:
        elapsed = time.monotonic() - self.since
        if self.waiting is None:
            return f"the daemon is starting: {self.step} ({elapsed:.0f} s so far)"
        return f"the daemon is starting: {self.step}: {self.waiting} (for {elapsed:.0f} s)"


class StartingApp:
    """The ASGI app that answers while the storage opens (module docstring)."""

    def __init__(self, startup: Startup, show_reason: bool) -> None:
        self._startup = startup
        self._show_reason = show_reason
        self.asked_to_retry = 0
        """Requests answered 503 with ``Retry-After`` (the clients that waited; probes not counted)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not served
            return
        path = scope.get("path", "")
        if path == "/healthz":
            await _send(send, 200, {"status": "ok"}, [])
            return
        reason = self._startup.reason() if self._show_reason else f"the daemon is starting (why: {HIDDEN})"
        kind = (_ERROR_HEADER, NotReady.kind.encode())
        if path in ("/readyz", "/status"):  # they report, as the daemon's own do: no Retry-After
            body: dict[str, Any] = {
                "error_code": 503,
                "message": f"Not ready: {reason}",
                **NOTHING_READ,
                "starting": True,
                "unreachable": reason,
            }
            await _send(send, 503, body, [kind])
            return
        body = {"error_code": 503, "message": f"Not ready: {reason}; retry shortly"}
        self.asked_to_retry += 1  # one event loop: no lock
        await _send(send, 503, body, [kind, (b"retry-after", b"1")])


async def _send(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    """Raw ASGI rather than ``emulator.server.errors.error_response``: that module imports FastAPI, which
    ``serve`` imports only once the storage is open (``tests/integration/test_serve_startup.py``)."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": payload})


def logged_sigterm_until_serving(startup: Startup) -> Callable[[], None]:
    """Log a SIGTERM that arrives before the daemon's server runs, then end the process by it as the
    default action would (the exit status a supervisor expects: -15). Returns what puts the previous
    handler back, called just before the daemon's server takes the signals: uvicorn restores the
    handler it found when it stops, and re-raises the signal it was stopped by, which must then end
    the process, not be logged as a stop during the start.

    The starting server (``open_answering``) takes SIGTERM too while it runs, and on the way out hands
    it back to this handler the same way. Off the main thread (an embedding application) nothing is
    installed: signals are the application's."""

    def stop(signum: int, _frame: object) -> None:
        log.warning("SIGTERM while the daemon starts (%s): stopping", startup.step)
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        return lambda: None

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)  # None: set outside Python

    return restore


class InterruptedWhileOpening(KeyboardInterrupt):
    """Ctrl-C before the storage opened, while the opening thread still runs (inside the Kafka client's
    metadata wait, or SQLite). The interpreter's finalization stops such a daemon thread wherever it
    stands, and a thread stopped inside a C library is not always stopped cleanly: a fresh-clone CI run
    saw ``serve`` end by SIGABRT there instead of exiting 130 (not reproduced in 415 runs since, with and
    without load). Nothing is open yet that needs closing, so ``emulator.cli.main`` ends the process
    without finalizing when it meets this."""

    end_without_finalizing = True


@dataclass
class _Opening(Generic[T]):
    """The opening thread's outcome."""

    done: threading.Event = field(default_factory=threading.Event)
    result: T | None = None
    error: BaseException | None = None


class _StartingServer(uvicorn.Server):
    """Steps aside as soon as the storage is open (or failed to open)."""

    def __init__(self, config: uvicorn.Config, opening: _Opening[Any]) -> None:
        super().__init__(config)
        self._opening = opening

    async def on_tick(self, counter: int) -> bool:
        if self._opening.done.is_set():
            return True
        return await super().on_tick(counter)


def open_answering(
    open_: Callable[[], T],
    listen: Callable[[], socket.socket],
    starting_config: Callable[[StartingApp], uvicorn.Config],
    startup: Startup,
    show_reason: bool,
    grace_s: float = GRACE_S,
) -> tuple[T, socket.socket | None]:
    """``open_()``'s result, and the bound socket when the port had to answer meanwhile (else None:
    the caller binds it, after the storage, as before). An error of ``open_`` is raised here; so is
    ``listen``'s (a port in use), while the opening thread, a daemon thread, is left to the process's
    exit. A signal during the wait ends the process by that signal, as uvicorn does (SIGINT: as
    ``InterruptedWhileOpening``)."""
    opening: _Opening[T] = _Opening()

    def run() -> None:
        try:
            opening.result = open_()
        except BaseException as exc:  # handed to the main thread, which raises it
            opening.error = exc
        finally:
            opening.done.set()

    threading.Thread(target=run, name="open-storage", daemon=True).start()
    sock: socket.socket | None = None
    app = StartingApp(startup, show_reason)
    if not opening.done.wait(max(0.0, grace_s - (time.monotonic() - startup.since))):  # from the port's binding
        sock = listen()
        # A duplicate of the socket: uvicorn closes what it served on, and the daemon's app serves next on this one.
        served = sock.dup()
        try:
            _StartingServer(starting_config(app), opening).run(sockets=[served])
        except KeyboardInterrupt:
            if not opening.done.is_set():
                raise InterruptedWhileOpening from None
            raise
        finally:
            served.close()
        if not opening.done.is_set():  # the server ended without a signal to re-raise: stop as asked
            raise InterruptedWhileOpening
    if opening.error is not None:
        if sock is not None:
            sock.close()
        raise opening.error
    if sock is not None:
        log.info(
            "started after %.1f s; the daemon's app takes over the port (%d request(s) were answered 503 "
            "with Retry-After meanwhile)",
            time.monotonic() - startup.since,
            app.asked_to_retry,
        )
    return cast(T, opening.result), sock
