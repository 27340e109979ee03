"""The clients' retries against a daemon's answers: when they wait, when they report at once, how fast
they ask again.

Served by uvicorn on a loopback port: the daemon's own app for a starting daemon
(``emulator.server.starting.StartingApp``), and small ASGI apps for what another daemon, or a proxy in
front of one, may answer. The daemon's app over a log still being read is in
``tests/integration/test_client_not_ready.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from emulator.client.errors import ApiError, NotReadyError
from emulator.client.http import AsyncOffsetsClient, OffsetsClient
from emulator.client.retry_window import RetryWindowError, parse_retry_for_s
from emulator.server.starting import StartingApp, Startup
from tests.fixtures.asgi import served


def _startup() -> Startup:
    startup = Startup()
    startup.begin("opening the offsets log kafka://10.0.0.9:9092/connect-offsets")
    startup.wait("cannot reach the Kafka cluster at 10.0.0.9:9092 (--bootstrap-servers): timed out")
    return startup


def _seconds(call: Callable[[], object]) -> float:
    started = time.monotonic()
    with contextlib.suppress(NotReadyError):
        call()
    return time.monotonic() - started


@pytest.mark.slow
def test_the_client_reports_a_starting_daemon_at_once_and_waits_on_its_other_routes() -> None:
    with served(StartingApp(_startup(), show_reason=True)) as url, OffsetsClient(url, retry_for_s=2.5) as client:
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
    with served(_earlier_starting_app) as url, OffsetsClient(url, retry_for_s=5) as client:
        assert _seconds(client.ready) < 1
        assert _seconds(client.status) < 1


@pytest.mark.slow
def test_a_retry_after_of_zero_still_paces_the_retries() -> None:
    """A proxy in front of the daemon may say ``Retry-After: 0``: the client pauses anyway."""
    asked: list[float] = []

    async def answers_zero(scope: dict[str, Any], receive: Any, send: Any) -> None:
        asked.append(time.monotonic())
        headers = [(b"x-connect-offsets-error", b"log_timeout"), (b"retry-after", b"0")]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"error_code":503,"message":"slow log"}'})

    with (
        served(answers_zero) as url,
        OffsetsClient(url, retry_for_s=1.0) as client,
        pytest.raises(NotReadyError, match="slow log"),
    ):
        client.connectors()
    assert 2 <= len(asked) <= 11, f"{len(asked)} tries in 1 s"


@pytest.mark.parametrize(("status", "tries"), [(503, 2), (409, 1)])
def test_a_partly_applied_write_is_sent_again_only_when_the_log_stopped_it(status: int, tries: int) -> None:
    """``write_partly_applied``: part of a write is in effect and sending it again writes the rest. With
    503 (the log's timeout or disk, which pass: it was ``log_timeout`` or ``log_storage_refused`` and
    retried as such) the client sends it again, an import included; with a claim's 409 it does not."""
    asked: list[float] = []

    async def partly_then_done(scope: dict[str, Any], receive: Any, send: Any) -> None:
        asked.append(time.monotonic())
        if len(asked) > 1:
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": b'{"written":1}'})
            return
        headers = [(b"x-connect-offsets-error", b"write_partly_applied"), (b"retry-after", b"0")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"error_code":%d,"message":"the first 1 ..."}' % status})

    with served(partly_then_done) as url, OffsetsClient(url, retry_for_s=5) as client:
        try:
            client.import_records([(b'["c",{"f":"a"}]', b'{"p":1}')])
        except ApiError as exc:
            assert (exc.status, tries) == (409, 1), exc
    assert len(asked) == tries


@pytest.mark.slow
def test_the_window_comes_from_connect_offsets_retry_for_unless_the_client_names_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with served(StartingApp(_startup(), show_reason=True)) as url:
        monkeypatch.setenv("CONNECT_OFFSETS_RETRY_FOR", "0")
        with OffsetsClient(url) as client:
            assert _seconds(client.connectors) < 0.5, "0: the daemon's answer at once"
        monkeypatch.setenv("CONNECT_OFFSETS_RETRY_FOR", "1500ms")
        with OffsetsClient(url) as client:
            assert 1 <= _seconds(client.connectors) < 3
        monkeypatch.setenv("CONNECT_OFFSETS_RETRY_FOR", "10s")
        with OffsetsClient(url, retry_for_s=0) as client:
            assert _seconds(client.connectors) < 0.5, "the client's own window wins"


def test_a_window_that_is_not_a_duration_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONNECT_OFFSETS_RETRY_FOR", "soon")
    with pytest.raises(RetryWindowError) as refused:
        OffsetsClient("http://127.0.0.1:9")
    assert str(refused.value) == (
        "CONNECT_OFFSETS_RETRY_FOR: expected a duration such as 10m, 30s, 500ms, 0 (ask once), or forever (no limit), "
        "got 'soon'"
    )


@pytest.mark.parametrize("word", ["forever", "never", " Forever "])
def test_forever_is_a_window_without_limit(word: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """It meant no retries at all (the duration parser's "keep forever" read as 0), the opposite of
    what every other "or never" duration of the project means."""
    assert parse_retry_for_s(word) == math.inf
    monkeypatch.setenv("CONNECT_OFFSETS_RETRY_FOR", word)
    with OffsetsClient("http://127.0.0.1:9") as client:
        assert (client._retry_for_s, client._refused_for_s) == (math.inf, math.inf)


@pytest.mark.parametrize("word", ["none", "off"])
def test_none_and_off_are_refused_as_ambiguous(word: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Said of retries, "off" reads as "no retries" as readily as "no limit": neither is guessed."""
    monkeypatch.setenv("CONNECT_OFFSETS_RETRY_FOR", word)
    with pytest.raises(
        RetryWindowError, match=rf"^CONNECT_OFFSETS_RETRY_FOR: expected .*or forever \(no limit\), got '{word}'"
    ):
        OffsetsClient("http://127.0.0.1:9")


def test_zero_still_asks_once() -> None:
    assert parse_retry_for_s("0") == parse_retry_for_s("0s") == 0.0
    assert parse_retry_for_s("1500ms") == 1.5


@pytest.mark.slow
@pytest.mark.parametrize("retry_after", ["nan", "NaN", "inf"])
def test_a_retry_after_that_is_no_number_of_seconds_waits_the_default_within_the_window(
    retry_after: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``float()`` reads ``nan`` and ``inf``: a NaN wait was never past the window's end and never slept,
    so both clients asked again without pause and without end, ``retry_for_s`` notwithstanding (and
    logged "every nan s"); ``inf`` gave up at once. Either is waited as a missing ``Retry-After``: 1 s,
    within the window."""
    asked: list[float] = []

    async def answers_nan(scope: dict[str, Any], receive: Any, send: Any) -> None:
        asked.append(time.monotonic())
        headers = [(b"x-connect-offsets-error", b"log_timeout"), (b"retry-after", retry_after.encode())]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"error_code":503,"message":"slow log"}'})

    outcomes: list[BaseException] = []

    def sync_call(url: str) -> None:
        with OffsetsClient(url, retry_for_s=2.5) as client:
            client.connectors()

    async def async_call(url: str) -> None:
        async with AsyncOffsetsClient(url, retry_for_s=2.5) as client:
            await asyncio.wait_for(client.connectors(), 8)

    for call in (sync_call, lambda url: asyncio.run(async_call(url))):
        asked.clear()

        def run(url: str, call: Callable[[str], object] = call) -> None:
            try:
                call(url)
            except BaseException as exc:  # the outcome is the test's to check
                outcomes.append(exc)

        with served(answers_nan) as url, caplog.at_level(logging.WARNING, "emulator.client.http"):
            started = time.monotonic()
            thread = threading.Thread(target=run, args=(url,), daemon=True)
            thread.start()
            thread.join(8)
            elapsed = time.monotonic() - started
            assert not thread.is_alive(), f"still asking after 8 s ({len(asked)} tries) with retry_for_s=2.5"
        assert isinstance(outcomes.pop(), NotReadyError)
        assert 2 <= elapsed < 5 and 2 <= len(asked) <= 4, f"{len(asked)} tries in {elapsed:.1f} s"
    warnings = [r.getMessage() for r in caplog.records if r.name == "emulator.client.http"]
    assert warnings and all("asking again every 1 s for up to 2.5 s" in w for w in warnings), warnings
