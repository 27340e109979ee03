"""Ctrl-C while the synchronous client waits on its socket.

A SIGINT that lands between Python's last look for signals and a blocking ``poll``/``recv`` (or that
the kernel hands to another thread) only flags the handler: the call is not interrupted, and the
command waited to its ``--timeout`` (``emulator.client.http._Interruptible``). That race cannot be
timed from outside without a debugger, so these tests make its outcome directly:
``_thread.interrupt_main`` schedules the SIGINT handler exactly as the signal does, without a signal
to interrupt anything, once a thread of the call is provably blocked in ``poll`` (its
``/proc/self/task/TID/syscall``). The client that waited in the call then ran to its timeout; it now
raises ``KeyboardInterrupt`` within ``CTRL_C_CHECK_S``.
"""

from __future__ import annotations

import _thread
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from emulator.client.http import OffsetsClient

TIMEOUT_S = 20.0
"""The client's timeout: the old code waited this long after the interruption."""
ACTED_ON_S = 2.0
"""Generous for a loaded machine; the wait steps are 0.2 s."""
_POLL = {"7", "271"}  # x86-64 poll, ppoll
_POLL_ARM64 = {"73"}  # arm64 ppoll
_BODY = b'{"offsets":[]}'


def _syscall(tid: int) -> str:
    try:
        return Path(f"/proc/self/task/{tid}/syscall").read_text().split()[0]
    except (OSError, IndexError):  # the thread ended
        return ""


@contextlib.contextmanager
def _running(watcher: threading.Thread) -> Iterator[None]:
    """``watcher`` runs while the block does, and is waited for after it (it gives up by itself)."""
    watcher.start()
    try:
        yield
    finally:
        watcher.join(TIMEOUT_S)


@contextlib.contextmanager
def _interrupt_when_blocked(ready: threading.Event) -> Iterator[list[str]]:
    """Once ``ready`` is set and the main thread, or a thread started after this one, waits in
    ``poll``: schedule the SIGINT handler in the main thread (``interrupt_main``). Yields where it
    says what it did."""
    said: list[str] = []
    before = set(threading.enumerate())

    def watch() -> None:
        deadline = time.monotonic() + TIMEOUT_S / 2
        ready.wait(TIMEOUT_S / 2)
        seen = 0  # checks in a row that found it in poll: not a poll about to return (a send's first look)
        while time.monotonic() < deadline:
            threads = [t.native_id for t in threading.enumerate() if t not in before and t is not watcher]
            tids = [threading.main_thread().native_id, *threads]
            seen = seen + 1 if any(_syscall(tid) in _POLL | _POLL_ARM64 for tid in tids if tid is not None) else 0
            if seen == 5:
                said.append("interrupted")
                _thread.interrupt_main()
                return
            time.sleep(0.02)
        said.append("never blocked in poll")

    watcher = threading.Thread(target=watch, daemon=True)
    with _running(watcher):
        yield said


@contextlib.contextmanager
def _interrupt_when(event: threading.Event) -> Iterator[list[str]]:
    """Schedule the SIGINT handler in the main thread once ``event`` is set."""
    said: list[str] = []

    def watch() -> None:
        if event.wait(TIMEOUT_S / 2):
            time.sleep(0.1)  # the caller, or the request's thread, waits where ``event`` was set
            said.append("interrupted")
            _thread.interrupt_main()

    with _running(threading.Thread(target=watch, daemon=True)):
        yield said


@contextlib.contextmanager
def _daemon(answer: Callable[[socket.socket, threading.Event], None]) -> Iterator[tuple[str, threading.Event]]:
    """A loopback "daemon" whose one connection ``answer`` handles (setting the event once the client
    is where the test wants it); the connection stays open, unanswered, until the test ends."""
    ready, end = threading.Event(), threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:
            connection, _ = listener.accept()
            with connection:
                answer(connection, ready)
                end.wait(TIMEOUT_S * 2)

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}", ready
        finally:
            end.set()
            server.join(TIMEOUT_S)


def _whole_request(connection: socket.socket) -> bytes:
    received = b""
    while not received.endswith(_BODY):
        chunk = connection.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


def _holds_the_answer(connection: socket.socket, ready: threading.Event) -> None:
    _whole_request(connection)
    ready.set()


def _sends_half_a_body(connection: socket.socket, ready: threading.Event) -> None:
    _whole_request(connection)
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    ready.set()


def _never_reads(connection: socket.socket, ready: threading.Event) -> None:
    ready.set()  # the client's large body fills both sides' buffers, and its send waits in poll


def _never_shakes_hands(connection: socket.socket, ready: threading.Event) -> None:
    connection.recv(65536)  # the ClientHello, never answered
    ready.set()


STATES = {
    "awaiting the answer": (_holds_the_answer, "http", 0),
    "reading the answer's body": (_sends_half_a_body, "http", 0),
    "sending the request's body": (_never_reads, "http", 64 * 1024 * 1024),
    "in the TLS handshake": (_never_shakes_hands, "https", 0),
}


@pytest.mark.parametrize("state", list(STATES))
def test_a_ctrl_c_flagged_while_the_client_waits_in_poll_is_acted_on_at_once(state: str) -> None:
    answer, scheme, padding = STATES[state]
    body = {"offsets": [], "padding": "x" * padding} if padding else {"offsets": []}
    with _daemon(answer) as (url, ready), OffsetsClient(url.replace("http", scheme, 1), TIMEOUT_S, retry_for_s=0) as c:
        started = time.monotonic()
        with _interrupt_when_blocked(ready) as said, pytest.raises(KeyboardInterrupt):
            c.alter("orders", body)
        took = time.monotonic() - started
        assert said == ["interrupted"]
        assert took < ACTED_ON_S, f"{state}: KeyboardInterrupt after {took:.1f} s"


def test_a_request_interrupted_while_connecting_sends_nothing_once_connected(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request is left to its thread: once the connection it was making is made, it must not send
    the write the caller was interrupted in (nor print what that thread raises, nor leave its socket
    open). The connection is held back (a slow network) until the caller has been interrupted."""
    create_connection = socket.create_connection
    connecting, connect = threading.Event(), threading.Event()

    def slow(*args: object, **kwargs: object) -> socket.socket:
        connecting.set()
        connect.wait(TIMEOUT_S)
        return create_connection(*args, **kwargs)  # type: ignore[arg-type]

    printed: list[object] = []
    monkeypatch.setattr(threading, "excepthook", printed.append)
    monkeypatch.setattr(socket, "create_connection", slow)
    received: list[bytes] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(TIMEOUT_S)

        def serve() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.settimeout(TIMEOUT_S)
                while chunk := connection.recv(65536):
                    received.append(chunk)
            received.append(b"(closed)")

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        started = time.monotonic()
        with (
            _interrupt_when(connecting) as said,
            OffsetsClient(f"http://127.0.0.1:{listener.getsockname()[1]}", TIMEOUT_S, retry_for_s=0) as client,
            pytest.raises(KeyboardInterrupt),
        ):
            client.alter("orders", {"offsets": []})
        took = time.monotonic() - started
        connect.set()
        server.join(TIMEOUT_S)
    assert said == ["interrupted"]
    assert took < ACTED_ON_S, f"KeyboardInterrupt after {took:.1f} s"
    assert received == [b"(closed)"], "the connection was made, nothing sent on it, and closed"
    assert printed == []
