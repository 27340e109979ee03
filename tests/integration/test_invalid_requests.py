"""Requests the HTTP server cannot parse are counted, and logged once per 30 s rather than once each.

uvicorn answers them 400 before any route sees them: 200 ``GARBAGE`` requests were 200 WARNING lines
and no number anywhere (no access line, ``connect_offsets_http_requests_total`` unchanged).
"""

from __future__ import annotations

import socket

import pytest

from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.integration.scrape import scrape

INVALID = "connect_offsets_http_invalid_requests_total"
LINE = "Invalid HTTP request received."


def send_raw(daemon: DaemonProcess, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
        sock.sendall(request)
        return sock.recv(300)


def total_requests(daemon: DaemonProcess) -> float:
    return sum(scrape(daemon.url).series("connect_offsets_http_requests_total").values())


@pytest.mark.slow  # a daemon of its own: the count and the one line are the process's
def test_garbage_and_unknown_methods_are_counted_and_logged_once_per_window(daemon_factory: DaemonFactory) -> None:
    daemon = daemon_factory()
    before = scrape(daemon.url)
    assert before.get(INVALID) == 0.0, "the series exists from the start, so rate() and alerts see it"
    requests_before = total_requests(daemon)

    answers = [send_raw(daemon, b"GARBAGE\r\n\r\n") for _ in range(30)]
    answers += [
        send_raw(daemon, f"FROBNICATEX{i} /connectors/x{i}/offsets HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        for i in range(20)
    ]

    assert all(answer.startswith(b"HTTP/1.1 400") for answer in answers), {a[:40] for a in answers}
    assert scrape(daemon.url).value(INVALID) == 50
    # Never in the per-route series: their method and path are whatever a client sent. The two
    # scrapes are the only new requests there.
    assert total_requests(daemon) - requests_before <= 2
    logged = [line for line in daemon.log_tail(400).splitlines() if LINE in line]
    assert len(logged) == 1, "one line per 30 s, the rest counted:\n" + "\n".join(logged[:5])
