"""What the port answers while the storage opens (``emulator.server.starting``): alive, not ready, why.

The whole path — a daemon waiting for an unreachable broker, then serving once it comes — is in
``tests/integration/test_broker_faults.py``; here, the answers themselves, and that the reason
(which names hosts and files) stays hidden when authentication is on.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.testclient import TestClient

from emulator.client.http import NotReadyError, OffsetsClient
from emulator.server.auth.status import HIDDEN
from emulator.server.openapi_bodies import NotReadyBody
from emulator.server.starting import StartingApp, Startup, open_answering
from tests.fixtures.waits import until

WAIT = "cannot reach the Kafka cluster at 10.0.0.9:9092 (--bootstrap-servers): timed out"


def _startup() -> Startup:
    startup = Startup()
    startup.begin("opening the offsets log kafka://10.0.0.9:9092/connect-offsets")
    startup.wait(WAIT)
    return startup


def test_healthz_is_alive_and_readyz_says_why_not_ready() -> None:
    client = TestClient(StartingApp(_startup(), show_reason=True))
    assert (client.get("/healthz").status_code, client.get("/healthz").json()) == (200, {"status": "ok"})
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.headers["x-connect-offsets-error"] == "not_ready"
    body = ready.json()
    assert body["error_code"] == 503 and body["ready"] is False and body["starting"] is True
    assert body["unreachable"].startswith("the daemon is starting: opening the offsets log kafka://10.0.0.9:9092/")
    assert body["unreachable"].endswith(f"{WAIT} (for 0 s)")
    assert body["message"] == f"Not ready: {body['unreachable']}"
    required = {key for key, kind in NotReadyBody.__annotations__.items() if "NotRequired" not in str(kind)}
    assert required <= set(body), f"the documented shape of /readyz's 503 lacks {required - set(body)}"
    assert (body["records_read"], body["partitions"], body["positions"]) == (0, 0, {})
    assert client.get("/status").json() == body
    for path in ("/readyz", "/status"):
        assert "retry-after" not in client.get(path).headers, f"{path} reports; it never asks to come back"


def test_every_other_route_is_connects_503_with_retry_after() -> None:
    client = TestClient(StartingApp(_startup(), show_reason=True))
    for method, path in [
        ("GET", "/connectors"),
        ("PATCH", "/connectors/a/offsets"),
        ("DELETE", "/connectors/a/offsets"),
    ]:
        answer = client.request(method, path, json={"offsets": []})
        assert answer.status_code == 503
        assert (answer.headers["x-connect-offsets-error"], answer.headers["retry-after"]) == ("not_ready", "1")
        assert set(answer.json()) == {"error_code", "message"}
        assert answer.json()["message"].endswith("; retry shortly") and WAIT in answer.json()["message"]


def test_with_authentication_on_the_reason_is_hidden() -> None:
    client = TestClient(StartingApp(_startup(), show_reason=False))
    for path in ("/readyz", "/status", "/connectors"):
        text = client.get(path).text
        assert "10.0.0.9" not in text and HIDDEN in text, text


def test_before_any_attempt_failed_the_reason_is_the_step_and_its_time() -> None:
    startup = Startup(since=time.monotonic() - 3.2)
    startup.begin("opening the offsets log embedded:///srv/data/connect-offsets.sqlite3")
    assert startup.reason() == (
        "the daemon is starting: opening the offsets log embedded:///srv/data/connect-offsets.sqlite3 (3 s so far)"
    )


def _listen() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def _config(app: StartingApp) -> uvicorn.Config:
    return uvicorn.Config(app, lifespan="off", log_config=None, log_level="warning")


def test_an_open_within_the_grace_binds_nothing() -> None:
    """The common start: the caller binds the port after the storage, as before."""
    assert open_answering(lambda: "opened", _listen, _config, Startup(), True, grace_s=5) == ("opened", None)


def test_an_error_of_the_open_is_raised_after_the_port_answered_meanwhile() -> None:
    def slow_failure() -> str:
        time.sleep(0.5)
        raise ValueError("the storage cannot be used")

    started = time.monotonic()
    with pytest.raises(ValueError, match="the storage cannot be used"):
        open_answering(slow_failure, _listen, _config, Startup(), True, grace_s=0.05)
    assert time.monotonic() - started < 5, "the starting server stepped aside once the open had ended"


def test_a_slow_open_is_answered_for_on_the_port_it_then_hands_over() -> None:
    bound: list[socket.socket] = []
    seen: list[int] = []

    def listen() -> socket.socket:
        bound.append(_listen())
        return bound[0]

    def slow_open() -> str:
        until(lambda: bool(bound), "the port was bound once the grace ran out", 5)
        url = f"http://127.0.0.1:{bound[0].getsockname()[1]}"
        until(lambda: _status(f"{url}/readyz") == 503, "/readyz answered 503 while opening", 5)
        seen.append(_status(f"{url}/healthz") or 0)
        return "opened"

    result, sock = open_answering(slow_open, listen, _config, Startup(), True, grace_s=0.05)
    try:
        assert (result, sock, seen) == ("opened", bound[0], [200])
        assert sock.fileno() >= 0, "the socket stays open for the daemon's app"
    finally:
        bound[0].close()


def _status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.TransportError:
        return None


@contextmanager
def _served(app: Any) -> Iterator[str]:
    sock = _listen()
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_config=None, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        until(lambda: server.started, "uvicorn to start", 10)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _seconds(call: Callable[[], object]) -> float:
    started = time.monotonic()
    with contextlib.suppress(NotReadyError):
        call()
    return time.monotonic() - started


def test_the_client_reports_a_starting_daemon_at_once_and_waits_on_its_other_routes() -> None:
    with _served(StartingApp(_startup(), show_reason=True)) as url, OffsetsClient(url, retry_for_s=2.5) as client:
        assert _seconds(client.ready) < 1 and client.ready() is False
        assert _seconds(client.status) < 1
        with pytest.raises(NotReadyError, match="the daemon is starting"):
            client.status()
        assert _seconds(client.connectors) >= 2, "Retry-After 1: asked again until retry_for_s ran out"


async def _earlier_starting_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """What a daemon of an earlier version answered on every route but /healthz while its storage
    opened: Retry-After on /readyz and /status too."""
    headers = [
        (b"x-connect-offsets-error", b"not_ready"),
        (b"retry-after", b"1"),
        (b"content-type", b"application/json"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": b'{"error_code":503,"message":"Not ready: starting"}'})


def test_the_client_never_waits_on_readyz_or_status_whatever_the_daemon_says() -> None:
    with _served(_earlier_starting_app) as url, OffsetsClient(url, retry_for_s=5) as client:
        assert _seconds(client.ready) < 1
        assert _seconds(client.status) < 1
