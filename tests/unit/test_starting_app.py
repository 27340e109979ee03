"""What the port answers while the storage opens (``emulator.server.starting``): alive, not ready, why.

The whole path — a daemon waiting for an unreachable broker, then serving once it comes — is in
``tests/integration/test_broker_faults.py``; here, the answers themselves, and that the reason
(which names hosts and files) stays hidden when authentication is on.
"""

from __future__ import annotations

import socket
import time

import httpx
import pytest
import uvicorn
from starlette.testclient import TestClient

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


def test_the_grace_counts_from_the_ports_binding_not_from_the_open() -> None:
    """The command line binds the port, then imports the daemon (~0.5 s here, seconds under load):
    that time is part of what a client waiting in the backlog has waited, so it uses up the grace."""
    bound: list[socket.socket] = []

    def listen() -> socket.socket:
        bound.append(_listen())
        return bound[0]

    def open_() -> str:
        time.sleep(0.3)
        return "opened"

    bound_long_ago = Startup(since=time.monotonic() - 10)
    result, sock = open_answering(open_, listen, _config, bound_long_ago, True, grace_s=5)
    try:
        assert (result, sock) == ("opened", bound[0]), "the port answered at once: the grace was used up"
    finally:
        for each in bound:
            each.close()


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
