"""Connections that never become requests are closed, and there are never more than
``--max-connections`` of them (emulator.server.connections).

Before, a connection that sent nothing (or its headers a byte at a time) was kept for good: a few
hundred of them took the last file descriptor of a daemon at ``ulimit -n 256``, new clients were cut
off and the history archiver stopped for want of a file.
"""

from __future__ import annotations

import contextlib
import json
import re
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
    for reason in ("limit", "header_timeout", "head_too_large", "body_timeout", "response_timeout", "pipeline_limit"):
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
def test_a_body_sent_in_pieces_within_its_time_is_served(guarded: DaemonProcess) -> None:
    """A body may pause (less than --header-timeout at a time) as long as it is whole within
    --header-timeout plus a second per 16 KiB (emulator.server.connections.MIN_BODY_RATE)."""
    connector = f"steady-body-{time.monotonic_ns()}"
    body = json.dumps({"offsets": [{"partition": {"file": "a"}, "offset": {"position": 7}}]}).encode()
    head = (
        f"PATCH /connectors/{connector}/offsets?create=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with connect(guarded) as sock:
        sock.sendall(head.encode())
        pieces = [body[i : i + 30] for i in range(0, len(body), 30)]
        for piece in pieces:  # ~1 s in all
            time.sleep(HEADER_TIMEOUT_S / 6)
            sock.sendall(piece)
        status, _, _ = answer_of(sock)
    assert status == "HTTP/1.1 200 OK"


@pytest.mark.slow  # waits out --header-timeout
def test_a_body_trickled_slower_than_the_minimum_rate_is_cut_off(guarded: DaemonProcess) -> None:
    """A byte every third of --header-timeout never leaves the body silent for long, and used to be
    read for as long as the client liked (1 byte every 4 s: no answer after 46 s)."""
    before = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="body_timeout")
    head = (
        "PATCH /connectors/trickled/offsets?create=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    with connect(guarded) as sock:
        sock.sendall(head.encode())
        started = time.monotonic()
        ended = None
        while time.monotonic() - started < HEADER_TIMEOUT_S + 4:
            try:
                sock.sendall(b" ")
            except OSError:  # reset: the daemon closed it
                ended = time.monotonic() - started
                break
            if select.select([sock], [], [], HEADER_TIMEOUT_S / 3)[0]:
                with contextlib.suppress(ConnectionResetError):
                    assert sock.recv(4096) == b"", "closed without an answer: the route was reading the body"
                ended = time.monotonic() - started
                break
    assert ended is not None, "the trickled body was still being read"
    assert HEADER_TIMEOUT_S <= ended < HEADER_TIMEOUT_S + 1.5, ended
    after = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="body_timeout")
    assert after == before + 1


@pytest.mark.slow  # a daemon of its own (its first body_timeout is logged at once), and waits out --header-timeout
def test_a_trickled_body_cut_off_is_logged_with_the_bytes_of_its_body_alone(tmp_path: Path) -> None:
    """The warning once counted the request's head as body (QA: ~11 body bytes sent, "120 bytes in
    11 s"), which made a client that sent almost nothing look like one that sent a little, slowly."""
    args = ["--data-dir", str(tmp_path / "data"), "--header-timeout", f"{HEADER_TIMEOUT_S}s"]
    daemon = DaemonProcess(args, 48062, tmp_path / "daemon.log").start()
    head = (
        "PATCH /connectors/trickled/offsets?create=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    sent = 0
    try:
        with connect(daemon) as sock:
            sock.sendall(head.encode())
            started = time.monotonic()
            while time.monotonic() - started < HEADER_TIMEOUT_S + 4:
                try:
                    sock.sendall(b" ")
                except OSError:  # reset: the daemon closed it
                    break
                sent += 1
                if select.select([sock], [], [], HEADER_TIMEOUT_S / 3)[0]:
                    break  # closed
        warning = ""
        deadline = time.monotonic() + 5
        while "(body_timeout" not in warning and time.monotonic() < deadline:
            warning = next((line for line in daemon.log_tail(200).splitlines() if "(body_timeout" in line), "")
            time.sleep(0.1)
    finally:
        daemon.stop()
    assert "the request's body arrived slower than 16 KiB/s" in warning, daemon.log_tail(40)
    counted = re.search(r"\((\d+) bytes(?: of body)? in \d+ s\)", warning)
    assert counted is not None, warning
    assert sent - 1 <= int(counted[1]) <= sent, (sent, warning)  # the last byte may cross the close
    assert f"({counted[1]} bytes of body in " in warning


def non_reader(daemon: DaemonProcess, requests: bytes) -> socket.socket:
    """A client that sends ``requests`` and never reads, with a small receive buffer."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", daemon.port))
    sock.sendall(requests)
    return sock


def drained(sock: socket.socket) -> int:
    """Every byte the daemon still sends, until it closes the connection (reset counts as closed)."""
    sock.settimeout(10)
    total = 0
    try:
        while chunk := sock.recv(1 << 20):
            total += len(chunk)
    except ConnectionResetError:
        pass
    return total


@pytest.mark.slow  # waits out --header-timeout
def test_clients_that_never_read_their_answers_are_cut_off_and_free_their_places(
    guarded: DaemonProcess, sockets: list[socket.socket]
) -> None:
    """Before, a client that sent requests for a large public file and read nothing kept its
    connection for good (uvicorn waits for the transport to drain without a deadline): 1,000 of them
    filled --max-connections, and every new client got 503 too_many_connections."""
    from emulator.server.ui.pages import d3_dir

    size = (d3_dir() / "d3.js").stat().st_size
    before = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="response_timeout")
    requests = b"GET /ui/vendor/d3.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 50
    sockets.extend(non_reader(guarded, requests) for _ in range(MAX_CONNECTIONS))
    time.sleep(HEADER_TIMEOUT_S + 2.5)  # the answers stop at the high-water mark; the sweep's deadline passes
    assert httpx.get(f"{guarded.url}/healthz", timeout=10).status_code == 200, "their places were freed"
    for sock in sockets:
        assert drained(sock) < 50 * size, "cut off before all the answers were sent"
    after = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="response_timeout")
    assert after == before + MAX_CONNECTIONS
    log = guarded.log_tail(400)
    assert "(response_timeout, the last from 127.0.0.1:" in log
    assert "Traceback" not in log and "unexpected error" not in log


def test_more_than_64_pipelined_requests_waiting_close_the_connection(guarded: DaemonProcess) -> None:
    """httptools parses every request a read brings and uvicorn queues them all behind the one being
    answered; each answer lets one more read in, so a client that pipelines faster than it is
    answered made the queue (and the memory) grow without bound."""
    before = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="pipeline_limit")
    with connect(guarded) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 200)
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
        answered = data.count(b"HTTP/1.1 200 OK")
    assert answered < 200
    after = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="pipeline_limit")
    assert after == before + 1
    with httpx.Client(base_url=guarded.url, timeout=10) as client:  # a few requests in a row are fine
        assert all(client.get("/healthz").status_code == 200 for _ in range(5))


def head_answer(daemon: DaemonProcess, head: bytes) -> tuple[str, dict[str, str], dict[str, object]]:
    with connect(daemon) as sock:
        # answered and closed before the rest was sent: the answer is still there to read
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(head)
        return answer_of(sock)


def test_a_request_head_over_64_kib_gets_431_and_is_closed(guarded: DaemonProcess) -> None:
    """Before, httptools read any head: 100 MB of one header value within the head timeout, 20,000
    headers and a 200 KB Authorization header were all accepted."""
    before = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="head_too_large")
    start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    heads = [
        start + b"Authorization: Basic " + b"a" * 200_000 + b"\r\n\r\n",  # whole, in one write
        start + b"".join(b"X-H%d: y\r\n" % i for i in range(20_000)) + b"\r\n",
    ]
    for head in heads:
        status, headers, body = head_answer(guarded, head)
        assert status == "HTTP/1.1 431 Request Header Fields Too Large"
        assert headers["x-connect-offsets-error"] == "request_head_too_large" and headers["connection"] == "close"
        assert body["error_code"] == 431
        assert str(body["message"]).startswith("The request's line and headers are longer than 64 KiB (")
    with connect(guarded) as sock:  # one header value that never ends: answered once past 64 KiB
        sock.sendall(start + b"X-Endless: ")
        sent = 0
        while not select.select([sock], [], [], 0.05)[0]:
            sock.sendall(b"v" * 16384)
            sent += 16384
            assert sent < 2_000_000, "still reading the header"
        status, _, _ = answer_of(sock)
    assert status == "HTTP/1.1 431 Request Header Fields Too Large"
    assert sent <= 64 * 1024 + 5 * 16384, sent
    after = scrape(guarded.url).value("connect_offsets_http_connections_closed_total", reason="head_too_large")
    assert after == before + 3
    cookie = b"Cookie: c=" + b"x" * 50_000 + b"\r\nConnection: close\r\n\r\n"
    status, _, _ = head_answer(guarded, start + cookie)  # a long head under the limit is served
    assert status == "HTTP/1.1 200 OK"
