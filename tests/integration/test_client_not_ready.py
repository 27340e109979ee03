"""A daemon still reading its log asks clients to come back (``Retry-After``), and they do; a log that
cannot be read does not, and they do not wait for it.

Before this, every ``not_ready`` looked alike: the Python clients (and so the CLI, the Spark sources
and the test kit) failed at once on a daemon that was only replaying its log after a restart, the
same as on one whose log was damaged. The daemon's app is served here over a real embedded log by
uvicorn on a loopback port; its reading starts only when a test says so, so "still reading" lasts
exactly as long as the test needs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from emulator.client.errors import DaemonUnavailable, NotReadyError
from emulator.client.http import AsyncOffsetsClient, OffsetsClient
from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.server.wiring import Runtime, assemble_runtime, close_runtime, make_app, start_reading
from emulator.view.offset_view import OffsetView
from tests.fixtures.asgi import served
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import daemon_starting_later, free_port
from tests.fixtures.disk_faults import damage_records
from tests.fixtures.waits import until

READ_AFTER_S = 1.5
"""How long a test lets the daemon answer "still reading" before its reading starts."""


@dataclass
class Served:
    url: str
    runtime: Runtime
    connector: str


@contextmanager
def daemon_app(data_dir: Path, connector: str, damage: bool = False) -> Iterator[Served]:
    """The daemon's app over an embedded log holding one offset of ``connector``, reading not
    started; ``damage``: the log's records are damaged behind its back (its reader stops for good)."""
    seeded = EmbeddedOffsetLog(data_dir, partitions=2, synchronous="NORMAL")
    seeded.open()
    filler = [(encode_key(f"{connector}-filler", {"n": n}), b"z" * 200) for n in range(3000)] if damage else []
    seeded.append([(encode_key(connector, {"file": "a"}), encode_offset({"position": 7})), *filler])
    seeded.close()
    log = EmbeddedOffsetLog(data_dir, partitions=2, synchronous="NORMAL")
    log.open()  # intact at open time
    if damage:
        damage_records(data_dir / "connect-offsets.sqlite3")
    runtime = assemble_runtime(log, OffsetView(), NoConnectCluster())
    try:
        with served(make_app(runtime, reading_started=True), lifespan="on") as url:
            yield Served(url, runtime, connector)
    finally:
        close_runtime(runtime, None)


def read_later(runtime: Runtime) -> threading.Timer:
    timer = threading.Timer(READ_AFTER_S, start_reading, args=(runtime,))
    timer.start()
    return timer


def wait_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "emulator.client.http" and r.levelno == logging.WARNING]


def test_a_daemon_still_reading_says_when_to_ask_again_and_its_probes_do_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with daemon_app(tmp_path, "reading-answers") as served, httpx.Client(base_url=served.url, timeout=10) as http:
        get = http.get(f"/connectors/{served.connector}/offsets")
        patch = http.patch(
            f"/connectors/{served.connector}/offsets", json={"offsets": [{"partition": {"file": "a"}, "offset": {}}]}
        )
        readyz, status = http.get("/readyz"), http.get("/status")

    for answer in (get, patch):
        assert answer.status_code == 503
        assert (answer.headers["x-connect-offsets-error"], answer.headers.get("retry-after")) == ("not_ready", "1")
        assert answer.json()["message"].startswith("The offsets log has not been read to the end yet")
    assert readyz.status_code == 503 and readyz.headers["x-connect-offsets-error"] == "not_ready"
    assert "retry-after" not in readyz.headers, "a probe reports; it is not asked to come back"
    assert status.status_code == 200 and status.json()["ready"] is False
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], "a replay is the daemon's normal start, not an error (the access log has each answer)"


@pytest.mark.slow
def test_the_client_waits_for_the_replay_and_says_so_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with daemon_app(tmp_path, "reading-sync") as served:
        with OffsetsClient(served.url, retry_for_s=0) as impatient:
            with pytest.raises(NotReadyError) as refused:
                impatient.offsets(served.connector)
            assert refused.value.kind == "not_ready"
        with OffsetsClient(served.url) as client:
            asked = time.monotonic()
            assert client.ready() is False
            assert time.monotonic() - asked < 1, "ready() reports at once; it does not wait"
            timer = read_later(served.runtime)
            started = time.monotonic()
            offsets = client.offsets(served.connector)
            waited = time.monotonic() - started
            timer.join()

    assert offsets == [{"partition": {"file": "a"}, "offset": {"position": 7}}]
    assert READ_AFTER_S - 0.2 <= waited < READ_AFTER_S + 5
    warnings = wait_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"the connect-offsets daemon at {served.url} cannot answer GET /connectors/")
    assert "(not_ready: The offsets log has not been read to the end yet" in warnings[0]
    assert warnings[0].endswith("asking again every 1 s for up to 30 s")


@pytest.mark.slow
def test_the_async_client_waits_for_the_replay_too(tmp_path: Path) -> None:
    async def alter(url: str) -> dict[str, object]:
        async with AsyncOffsetsClient(url) as client:
            body = {"offsets": [{"partition": {"file": "a"}, "offset": {"position": 9}}]}
            result: dict[str, object] = await client.alter("reading-async", body)
            return result

    with daemon_app(tmp_path, "reading-async") as served:
        timer = read_later(served.runtime)
        started = time.monotonic()
        answer = asyncio.run(alter(served.url))
        waited = time.monotonic() - started
        timer.join()
        with OffsetsClient(served.url) as client:
            offsets = client.offsets(served.connector)

    assert "message" in answer and waited >= READ_AFTER_S - 0.2
    assert offsets == [{"partition": {"file": "a"}, "offset": {"position": 9}}], "written once the log was read"


@pytest.mark.slow
def test_the_cli_says_it_is_waiting_then_answers(tmp_path: Path) -> None:
    with daemon_app(tmp_path, "reading-cli") as served:
        timer = read_later(served.runtime)
        result = run_cli("get", served.connector, "--url", served.url, "--json")
        timer.join()

    assert result.returncode == 0, result.stderr
    assert '"position": 7' in result.stdout
    assert f"the connect-offsets daemon at {served.url} cannot answer GET /connectors/reading-cli/offsets now" in (
        result.stderr
    )
    assert "asking again every 1 s for up to 30 s" in result.stderr


def test_a_log_that_cannot_be_read_is_not_waited_for(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with daemon_app(tmp_path, "damaged", damage=True) as served:
        start_reading(served.runtime)
        until(lambda: served.runtime.log.progress().error is not None, "the reader to stop on the damage", 20)
        answer = httpx.get(f"{served.url}/connectors/{served.connector}/offsets", timeout=10)
        with OffsetsClient(served.url) as client:
            started = time.monotonic()
            with pytest.raises(NotReadyError, match="The offsets log cannot be read") as refused:
                client.offsets(served.connector)
            refused_after = time.monotonic() - started

    assert answer.status_code == 503 and answer.headers["x-connect-offsets-error"] == "not_ready"
    assert "retry-after" not in answer.headers, "waiting would not mend a damaged log"
    assert refused.value.kind == "not_ready" and refused_after < 1
    assert wait_warnings(caplog) == []


@pytest.mark.slow
def test_the_cli_waits_as_long_as_retry_for_says(tmp_path: Path) -> None:
    with daemon_app(tmp_path, "reading-cli-window") as served:
        started = time.monotonic()
        at_once = run_cli("get", served.connector, "--url", served.url, "--retry-for", "0")
        at_once_s = time.monotonic() - started
        started = time.monotonic()
        briefly = run_cli(
            "get", served.connector, "--url", served.url, env={**os.environ, "CONNECT_OFFSETS_RETRY_FOR": "2s"}
        )
        briefly_s = time.monotonic() - started

    assert at_once.returncode == 1, at_once.stderr
    assert at_once.stderr.startswith("error: The offsets log has not been read to the end yet"), at_once.stderr
    assert "asking again" not in at_once.stderr
    assert briefly.returncode == 1, briefly.stderr
    assert "asking again every 1 s for up to 2 s" in briefly.stderr
    assert briefly_s >= 1.0 and at_once_s < briefly_s


# --- a port nobody listens on yet ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_chosen_window_rides_out_a_daemon_that_is_not_listening_yet(tmp_path: Path) -> None:
    """Nothing listens while a daemon restarts; a client given a window connects once it does."""
    with daemon_starting_later(tmp_path, after_s=1.0) as url:
        started = time.monotonic()
        with OffsetsClient(url, retry_for_s=30) as client:
            assert client.connectors() == []
    assert 1.0 <= time.monotonic() - started < 20


@pytest.mark.slow
def test_the_async_client_rides_out_a_daemon_that_is_not_listening_yet_too(tmp_path: Path) -> None:
    """It gave up at once: it looked for "refused" in the text of asyncio's transport, which says "All
    connection attempts failed" and leaves the refusal to the exception's causes."""

    async def connectors(url: str) -> list[str]:
        async with AsyncOffsetsClient(url, retry_for_s=30) as client:
            return await client.connectors()

    with daemon_starting_later(tmp_path, after_s=1.5) as url:
        started = time.monotonic()
        assert asyncio.run(connectors(url)) == []
    assert 1.5 <= time.monotonic() - started < 20


def test_without_a_chosen_window_a_refused_connection_is_reported_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped URL is refused too: the 30 s default does not make a command wait for it."""
    monkeypatch.delenv("CONNECT_OFFSETS_RETRY_FOR", raising=False)
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with OffsetsClient(url) as client, pytest.raises(DaemonUnavailable, match="Connection refused"):
        client.connectors()
    with OffsetsClient(url, retry_for_s=30) as client, pytest.raises(DaemonUnavailable):
        client.status()  # a probe's answer is that nothing listens, even with a window

    async def connectors() -> None:
        async with AsyncOffsetsClient(url) as client:
            await client.connectors()

    with pytest.raises(DaemonUnavailable, match=r"All connection attempts failed: \[Errno 111\] Connection refused"):
        asyncio.run(connectors())  # the asyncio transport's text alone does not say why
    assert time.monotonic() - started < 5
