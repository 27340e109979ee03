"""Large request bodies take turns (``emulator.server.body_budget``): at most ``--max-body-bytes`` of
them are handled at once, so that many large requests together cannot take the host's memory (one
30 MB PATCH peaked at ~840 MB of RSS, four at once at 2.3 GB). Small requests never wait for them.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from emulator.client import OffsetsClient
from tests.fixtures.daemon import DaemonProcess, free_port
from tests.fixtures.waits import until

BUDGET = 3_000_000
LARGE = 2_000_000


def large_body(connector_file: str) -> bytes:
    """A valid PATCH body of about ``LARGE`` bytes: one partition with a long file name."""
    return json.dumps(
        {"offsets": [{"partition": {"file": connector_file + "x" * (LARGE - 100)}, "offset": {"position": 1}}]}
    ).encode()


def large_dry_run(daemon: DaemonProcess, connector: str, file: str) -> httpx.Response:
    return httpx.patch(
        f"{daemon.url}/connectors/{connector}/offsets",
        params={"dry_run": "true", "create": "true"},
        content=large_body(file),
        headers={"content-type": "application/json"},
        timeout=30,
    )


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    logs = tmp_path_factory.mktemp("large-bodies")
    args = ["--max-body-bytes", str(BUDGET), "--write-timeout", "2", "--data-dir", str(logs / "data")]
    started = DaemonProcess(args, free_port(), logs / "daemon.log").start()
    yield started
    started.stop()


@pytest.fixture
def holder(daemon: DaemonProcess) -> Iterator[socket.socket]:
    """A large PATCH whose body stops after its first bytes: it holds its share until closed."""
    url = urlsplit(daemon.url)
    sock = socket.create_connection((url.hostname, url.port))
    body = large_body("/held")
    head = (
        f"PATCH /connectors/held-{uuid.uuid4().hex[:6]}/offsets?dry_run=true&create=true HTTP/1.1\r\n"
        f"Host: {url.hostname}:{url.port}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body[:100])
    time.sleep(0.5)  # the daemon has read the head: the request holds its share
    yield sock
    sock.close()


@pytest.mark.slow
def test_a_large_body_waits_its_turn_and_is_answered_503_busy_when_none_comes(
    daemon: DaemonProcess, holder: socket.socket
) -> None:
    name = f"large-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    busy = large_dry_run(daemon, name, "/a")
    waited = time.monotonic() - started
    assert busy.status_code == 503, busy.text[:300]
    assert (busy.headers["x-connect-offsets-error"], busy.headers["retry-after"]) == ("busy", "5")
    assert "waited 2 s for its turn; nothing was written" in busy.json()["message"]
    assert 1.8 < waited < 10, waited
    # The access line is written once the answer has gone: the client can read the answer first.
    until(
        lambda: "PATCH /connectors/{connector}/offsets 503 busy" in daemon.log_tail(40),
        "the refusal logged under its route",
        10,
    )

    small = httpx.patch(
        f"{daemon.url}/connectors/{name}/offsets",
        params={"create": "true"},
        json={"offsets": [{"partition": {"file": "/small"}, "offset": {"position": 1}}]},
        timeout=5,
    )
    assert small.status_code == 200, "a small write never waits for large ones"


@pytest.mark.slow
def test_a_large_body_gets_its_turn_once_the_one_before_is_answered(daemon: DaemonProcess) -> None:
    name = f"turn-{uuid.uuid4().hex[:8]}"
    for _ in range(3):  # one after the other: each gives its share back
        answer = large_dry_run(daemon, name, "/b")
        assert answer.status_code == 200, answer.text[:300]


@pytest.mark.slow  # waits out one refusal and its Retry-After (about 7 s)
def test_the_python_client_sends_a_busy_body_again_once_its_turn_can_come(
    daemon: DaemonProcess, holder: socket.socket
) -> None:
    """``busy`` read nothing of the request, so the clients send it again after ``Retry-After``."""
    threading.Timer(3.0, holder.close).start()  # the large request before it goes away
    body = json.loads(large_body("/c"))
    with OffsetsClient(daemon.url, retry_for_s=30) as client:
        answer = client.alter(f"retried-{uuid.uuid4().hex[:8]}", body, dry_run=True, create=True)
    assert "1 record(s) would be written" in answer["message"]
