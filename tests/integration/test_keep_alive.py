"""A kept-alive connection answers at once: no request waits for the client's delayed ACK.

Clients (the Python clients, Spark committers, Connect's backing store over the daemon) keep their
connection open. With Nagle's algorithm on the daemon's side, the second small write of a response
waits for the ACK of the first, which the client delays by ~40 ms: every request after the first
then took 42-45 ms (measured here, GET /healthz, before ``emulator.server.listen`` declared its
socket TCP so that asyncio turns Nagle off); without it, ~1.5 ms.
"""

from __future__ import annotations

import socket
import statistics
import time

from emulator.server.listen import listen
from tests.fixtures.daemon import DaemonProcess, free_port

DELAYED_ACK_S = 0.040
"""Linux's minimum delayed-ACK time: a request stalled by Nagle takes at least this long."""


def test_the_listening_socket_is_tcp_so_asyncio_turns_nagle_off() -> None:
    sock = listen("127.0.0.1", free_port())
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def test_requests_on_a_kept_alive_connection_do_not_wait_for_a_delayed_ack(embedded_daemon: DaemonProcess) -> None:
    durations = []
    with socket.create_connection(("127.0.0.1", embedded_daemon.port), timeout=10) as conn:
        for _ in range(21):
            started = time.monotonic()
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while not answer.endswith(b'{"status":"ok"}'):
                chunk = conn.recv(4096)
                assert chunk, f"connection closed after {answer!r}"
                answer += chunk
            durations.append(time.monotonic() - started)
    assert statistics.median(durations[1:]) < DELAYED_ACK_S / 2, durations
