"""Connections that never become requests are closed, and there are never more than
``--max-connections`` of them (emulator.server.connections).

Before, a connection that sent nothing (or its headers a byte at a time) was kept for good: a few
hundred of them took the last file descriptor of a daemon at ``ulimit -n 256``, new clients were cut
off and the history archiver stopped for want of a file.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from emulator.client.http import OffsetsClient
from emulator.server.metrics import Metrics
from tests.fixtures.daemon import DaemonProcess, free_port
from tests.integration.scrape import scrape

HEADER_TIMEOUT_S = 1.5
MAX_CONNECTIONS = 6


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    directory = tmp_path_factory.mktemp("limits")
    args = ["--data-dir", str(directory / "data"), "--header-timeout", f"{HEADER_TIMEOUT_S}s"]
    daemon = DaemonProcess([*args, "--max-connections", str(MAX_CONNECTIONS)], free_port(), directory / "daemon.log")
    yield daemon.start()
    daemon.stop()


def connect(daemon: DaemonProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", daemon.port), timeout=10)


def answer_of(sock: socket.socket) -> tuple[str, dict[str, str], dict[str, object]]:
    """The status line, headers and JSON body the daemon sent before closing the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
    return status, headers, json.loads(body)


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


@pytest.mark.slow  # waits out --header-timeout
def test_a_connection_that_sends_no_request_gets_408_and_is_closed(guarded: DaemonProcess) -> None:
    before = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="header_timeout")
    with connect(guarded) as sock:
        opened = time.monotonic()
        status, headers, body = answer_of(sock)
        waited = time.monotonic() - opened
    assert status == "HTTP/1.1 408 Request Timeout"
    assert headers["x-connect-offsets-error"] == "request_timeout" and headers["connection"] == "close"
    assert body == {
        "error_code": 408,
        "message": f"The request's headers did not arrive within {HEADER_TIMEOUT_S:g} s (--header-timeout)",
    }
    assert HEADER_TIMEOUT_S <= waited < HEADER_TIMEOUT_S + 1.5, waited  # swept once a second
    after = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="header_timeout")
    assert after == before + 1
    # the first closure of a kind is logged at once (later ones at most every 10 s, counted)
    assert "connection(s) (header_timeout, the last from 127.0.0.1:" in guarded.log_tail(200)


@pytest.mark.slow  # waits out --header-timeout
def test_headers_sent_a_byte_at_a_time_are_cut_off_too(guarded: DaemonProcess) -> None:
    with connect(guarded) as sock:
        opened = time.monotonic()
        for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 60:
            sock.sendall(bytes([byte]))
            if select.select([sock], [], [], 0.1)[0]:
                break  # the daemon answered
        answered = time.monotonic() - opened
        status, headers, _ = answer_of(sock)
    assert status == "HTTP/1.1 408 Request Timeout" and headers["x-connect-offsets-error"] == "request_timeout"
    assert HEADER_TIMEOUT_S <= answered < HEADER_TIMEOUT_S + 1.5, answered


@pytest.mark.slow  # waits out --header-timeout
def test_a_kept_alive_client_and_a_slow_but_complete_request_are_served(guarded: DaemonProcess) -> None:
    with httpx.Client(base_url=guarded.url, timeout=10) as client:
        for _ in range(3):  # three requests over ~2.6 s on one connection: the head timeout is per request
            assert client.get("/healthz").status_code == 200
            time.sleep(HEADER_TIMEOUT_S * 0.6)
    with connect(guarded) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(HEADER_TIMEOUT_S * 0.5)
        sock.sendall(b"Connection: close\r\n\r\n")
        status, _, body = answer_of(sock)
    assert status == "HTTP/1.1 200 OK" and body["status"] == "ok"


def test_one_connection_more_than_the_limit_gets_503_and_a_later_one_is_served(
    guarded: DaemonProcess, sockets: list[socket.socket]
) -> None:
    before = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="limit")
    sockets.extend(connect(guarded) for _ in range(MAX_CONNECTIONS))
    time.sleep(0.2)  # all accepted
    with connect(guarded) as extra:
        status, headers, body = answer_of(extra)
    assert status == "HTTP/1.1 503 Service Unavailable"
    assert headers["x-connect-offsets-error"] == "too_many_connections" and headers["retry-after"] == "1"
    assert body == {
        "error_code": 503,
        "message": f"The daemon has {MAX_CONNECTIONS} connections open (--max-connections); try again shortly, "
        "or reuse a connection",
    }
    for sock in sockets:
        sock.close()
    deadline = time.monotonic() + 5
    while True:  # the closes reach the daemon's loop
        try:
            samples = scrape(guarded.url)
            break
        except httpx.HTTPError:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert samples.value("connect_offsets_http_connections_closed_total", reason="limit") == before + 1
    assert samples.value("connect_offsets_http_connections") >= 1  # the scrape's own


def test_the_open_files_limit_is_raised_to_fit_or_the_connection_limit_lowered(tmp_path: Path) -> None:
    """In a child process: lowering the hard limit cannot be undone."""
    import subprocess
    import sys

    script = (
        "import logging, resource, sys\n"
        "logging.basicConfig(level=logging.WARNING, format='%(message)s', stream=sys.stdout)\n"
        "from emulator.server.connections import fit_descriptor_limit\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, int(sys.argv[1])))\n"
        "print(fit_descriptor_limit(1000), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    roomy = subprocess.run([sys.executable, "-c", script, "4096"], capture_output=True, text=True, check=True)
    assert roomy.stdout.split() == ["1000", "1512"], roomy.stdout
    tight = subprocess.run([sys.executable, "-c", script, "1024"], capture_output=True, text=True, check=True)
    lines = tight.stdout.strip().splitlines()
    assert lines[-1].split() == ["512", "1024"], tight.stdout
    assert lines[0] == (
        "--max-connections 1000 needs 1512 open files, and the limit is 1024 (ulimit -n; hard limit 1024): "
        "accepting at most 512 connections"
    )


@pytest.mark.slow  # waits out --header-timeout
def test_a_client_over_the_limit_reads_the_503_and_the_python_client_retries_it(
    guarded: DaemonProcess, sockets: list[socket.socket]
) -> None:
    """httpx sends its request as soon as it connects, and still reads the answer of a connection
    closed with the request unread. ``OffsetsClient`` retries ``too_many_connections`` like
    ``log_timeout``: nothing was read, so sending again cannot apply anything twice."""
    sockets.extend(connect(guarded) for _ in range(MAX_CONNECTIONS))
    time.sleep(0.2)
    refused = httpx.get(f"{guarded.url}/healthz", timeout=10)
    assert refused.status_code == 503 and refused.headers["X-Connect-Offsets-Error"] == "too_many_connections"
    started = time.monotonic()
    with OffsetsClient(guarded.url, retry_for_s=15) as client:
        listed = client.connectors()  # the idle sockets are closed by the head timeout meanwhile
    assert isinstance(listed, list)
    assert time.monotonic() - started >= 1.0, "answered at the first attempt: the limit was not reached"


@pytest.mark.slow  # waits out --header-timeout
def test_the_metrics_port_closes_idle_connections_and_serves_a_bounded_number(tmp_path: Path) -> None:
    """prometheus_client's own server gave each connection a thread waiting without a deadline (300
    idle connections: 300 threads for good); the metrics port now has the API's head timeout and
    serves MAX_CONNECTIONS at once, answering one more 503."""
    from emulator.server.metrics_port import MAX_CONNECTIONS as METRICS_CONNECTIONS

    metrics_port = free_port()
    args = ["--data-dir", str(tmp_path / "data"), "--metrics-port", str(metrics_port), "--header-timeout", "1s"]
    daemon = DaemonProcess(args, free_port(), tmp_path / "daemon.log").start()
    idle: list[socket.socket] = []
    try:
        idle.extend(
            socket.create_connection(("127.0.0.1", metrics_port), timeout=10) for _ in range(METRICS_CONNECTIONS)
        )
        time.sleep(0.3)
        with socket.create_connection(("127.0.0.1", metrics_port), timeout=10) as extra:
            extra.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert extra.recv(4096).startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        started = time.monotonic()
        assert all(sock.recv(1) == b"" for sock in idle), "the idle connections are closed"
        assert time.monotonic() - started < 1 + 1.0
        scraped = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
        assert scraped.status_code == 200 and "connect_offsets_http_connections " in scraped.text
        assert "Traceback" not in daemon.log_tail(200), "a timed-out connection is not an error"
    finally:
        for sock in idle:
            sock.close()
        daemon.stop()


def test_both_closure_counters_exist_at_zero_before_any_closure() -> None:
    """For ``rate()`` and alerts from the first scrape, not from the first closure."""
    samples = {
        (sample.name, sample.labels.get("reason")): sample.value
        for family in text_string_to_metric_families(Metrics().render().decode())
        for sample in family.samples
    }
    for reason in ("limit", "header_timeout", "body_timeout"):
        assert samples[("connect_offsets_http_connections_closed_total", reason)] == 0.0


@pytest.mark.slow  # waits out --header-timeout
def test_a_body_that_stops_arriving_is_cut_off_and_nothing_is_written(guarded: DaemonProcess) -> None:
    connector = f"stalled-body-{time.monotonic_ns()}"
    before = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="body_timeout")
    head = (
        f"PATCH /connectors/{connector}/offsets?create=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    with connect(guarded) as sock:
        sock.sendall(head.encode() + b'{"offsets":')
        started = time.monotonic()
        assert sock.recv(4096) == b"", "closed without an answer: the route was reading the body"
        waited = time.monotonic() - started
    assert HEADER_TIMEOUT_S <= waited < HEADER_TIMEOUT_S + 1.5, waited
    after = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="body_timeout")
    assert after == before + 1
    assert httpx.get(f"{guarded.url}/connectors/{connector}/offsets", timeout=10).status_code == 404
    log = guarded.log_tail(400)
    assert "PATCH /connectors/{connector}/offsets 400 invalid_request" in log
    assert "Traceback" not in log and "unexpected error" not in log


@pytest.mark.slow  # waits out --header-timeout
def test_a_slow_but_steady_body_is_served(guarded: DaemonProcess) -> None:
    """The body rule is about silence, not speed: a byte every half head-timeout keeps it going."""
    connector = f"steady-body-{time.monotonic_ns()}"
    body = json.dumps({"offsets": [{"partition": {"file": "a"}, "offset": {"position": 7}}]}).encode()
    head = (
        f"PATCH /connectors/{connector}/offsets?create=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with connect(guarded) as sock:
        sock.sendall(head.encode())
        pieces = [body[i : i + 12] for i in range(0, len(body), 12)]
        for piece in pieces:  # ~2.7 s in all, longer than the head timeout
            time.sleep(HEADER_TIMEOUT_S / 2)
            sock.sendall(piece)
        status, _, _ = answer_of(sock)
    assert len(pieces) * HEADER_TIMEOUT_S / 2 > HEADER_TIMEOUT_S * 1.5
    assert status == "HTTP/1.1 200 OK"
