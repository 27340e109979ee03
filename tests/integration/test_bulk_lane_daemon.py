"""A real daemon's large writes: a client that leaves while its write waits, and a SIGTERM meanwhile.

Found by the lane QA on a running daemon: a waiting write whose client had gone kept its place and
was written when its turn came (retrying clients queued behind their own earlier tries), and a
write still waiting when SIGTERM came was started after it. Now the first leaves the queue within
half a second, writing nothing, and the second is refused as the shutdown begins.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
import time
import uuid
from typing import Any

import httpx
import pytest

from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.fixtures.waits import until

PARTITIONS = 20_000  # ~1.4 MB: a large write, seconds of work on any machine this suite runs on


def _body(n: int, partitions: int = PARTITIONS) -> bytes:
    offsets = [{"partition": {"file": f"/f{i}"}, "offset": {"position": n}} for i in range(partitions)]
    return json.dumps({"offsets": offsets}).encode()


def _patch_in_thread(
    daemon: DaemonProcess, connector: str, answers: dict[str, Any], partitions: int = PARTITIONS
) -> threading.Thread:
    def send() -> None:
        url = f"{daemon.url}/connectors/{connector}/offsets?create=true"
        headers = {"content-type": "application/json"}
        answers[connector] = httpx.patch(url, content=_body(1, partitions), headers=headers, timeout=120)
        answers[connector + "@"] = time.monotonic()

    thread = threading.Thread(target=send)
    thread.start()
    return thread


def _raw_patch(connector: str, body: bytes) -> bytes:
    """A PATCH as bytes, for a socket the test closes itself."""
    head = (
        f"PATCH /connectors/{connector}/offsets?create=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _lane(daemon: DaemonProcess) -> dict[str, int]:
    return dict(httpx.get(f"{daemon.url}/status", timeout=10).json()["large_writes"])


@pytest.mark.slow
def test_a_write_whose_client_left_while_it_waited_is_not_written(daemon_factory: DaemonFactory) -> None:
    daemon = daemon_factory("--write-timeout", "30s")
    first, left = f"lane-first-{uuid.uuid4().hex[:6]}", f"lane-left-{uuid.uuid4().hex[:6]}"
    answers: dict[str, Any] = {}
    running = _patch_in_thread(daemon, first, answers)
    until(lambda: _lane(daemon)["running"] == 1, "the first large write to have its turn", 30)
    request = _raw_patch(left, _body(2))
    with socket.create_connection(("127.0.0.1", daemon.port)) as sock:
        sock.sendall(request)
        until(lambda: _lane(daemon)["waiting"] == 1, "the second to wait for its turn", 30)
    # Its client is gone: it leaves the queue (it looks every 0.5 s), before the first is done.
    until(lambda: _lane(daemon)["waiting"] == 0, "the abandoned write to leave the queue", 5)
    assert _lane(daemon)["running"] == 1, "the first large write ended before the check: the test is too small"
    running.join(60)
    assert answers[first].status_code == 200, answers[first].text
    assert httpx.get(f"{daemon.url}/connectors/{left}/offsets", timeout=10).status_code == 404
    assert _lane(daemon) == {"running": 0, "waiting": 0}
    audited = re.search(rf"PATCH {left} by anonymous from 127\.0\.0\.1:\d+: (.*)", daemon.log_path.read_text())
    assert audited is not None and audited.group(1).startswith("400 invalid_request, 0 partition(s)"), audited


@pytest.mark.slow
def test_a_write_still_waiting_when_sigterm_comes_is_refused_at_once_not_started(
    daemon_factory: DaemonFactory,
) -> None:
    daemon = daemon_factory("--write-timeout", "30s")
    assert daemon.proc is not None
    first, waiting = f"lane-term-{uuid.uuid4().hex[:6]}", f"lane-wait-{uuid.uuid4().hex[:6]}"
    answers: dict[str, Any] = {}
    threads = [_patch_in_thread(daemon, first, answers)]
    until(lambda: _lane(daemon)["running"] == 1, "the first large write to have its turn", 30)
    threads.append(_patch_in_thread(daemon, waiting, answers))
    until(lambda: _lane(daemon)["waiting"] == 1, "the second to wait for its turn", 30)
    assert _lane(daemon)["running"] == 1, "the first large write ended before the check: the test is too small"
    termed = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(60)
    refused = answers[waiting]
    assert refused.status_code == 503, refused.text
    assert refused.json()["message"] == (
        "the daemon is stopping: this large write was not started; nothing was written"
    )
    assert answers[waiting + "@"] - termed < 2, "refused only after the running write was done"
    assert answers[first].status_code == 200, answers[first].text  # the one running finishes
    assert daemon.proc.wait(30) is not None


@pytest.mark.slow
def test_a_waiting_write_with_a_request_pipelined_behind_it_leaves_when_its_client_does(
    daemon_factory: DaemonFactory,
) -> None:
    daemon = daemon_factory("--write-timeout", "30s")
    first, left = f"lane-pipe-first-{uuid.uuid4().hex[:6]}", f"lane-pipe-left-{uuid.uuid4().hex[:6]}"
    answers: dict[str, Any] = {}
    # The first runs long enough for the close to be noticed behind the pipelined GET: that takes
    # a look of the waiting write's (every 0.5 s), which lets uvicorn read again and see the close.
    running = _patch_in_thread(daemon, first, answers, partitions=3 * PARTITIONS)
    until(lambda: _lane(daemon)["running"] == 1, "the first large write to have its turn", 30)
    request = _raw_patch(left, _body(2))
    pipelined = b"GET /connectors HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", daemon.port)) as sock:
        sock.sendall(request)
        until(lambda: _lane(daemon)["waiting"] == 1, "the second to wait for its turn", 30)
        sock.sendall(pipelined)  # the newest request of the connection is now this GET, not the PATCH
    until(lambda: _lane(daemon)["waiting"] == 0, "the waiting write to leave the queue", 10)
    assert first not in answers, "the first large write ended first: its turn went on, the write did not leave"
    running.join(120)
    assert answers[first].status_code == 200, answers[first].text
    until(lambda: _lane(daemon) == {"running": 0, "waiting": 0}, "the lane to be idle", 30)
    assert httpx.get(f"{daemon.url}/connectors/{left}/offsets", timeout=10).status_code == 404
