"""The server counts the requests it is answering, for background work to step aside
(``emulator.model.foreground``; the history archiver reads it)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from starlette.types import Message, Receive, Scope, Send

from emulator.model.foreground import FOREGROUND, Foreground
from emulator.server.access_log import RequestObserver
from emulator.server.audit import Auditor


def observe(fail: bool) -> tuple[list[int], list[Message]]:
    """Run one GET through ``RequestObserver``: the count the app saw, and what it sent."""
    seen: list[int] = []
    sent: list[Message] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(FOREGROUND.active)
        if fail:
            raise RuntimeError("the handler failed")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        seen.append(FOREGROUND.active)
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    observer = RequestObserver(app, auditor=Auditor(None, lambda _: True), metrics=None, access_log=False)
    scope: Scope = {"type": "http", "method": "GET", "path": "/healthz", "query_string": b"", "headers": []}
    asyncio.run(observer(scope, receive, send))
    return seen, sent


def test_a_request_counts_as_in_flight_until_its_answer_is_sent() -> None:
    before, served = FOREGROUND.active, FOREGROUND.served
    seen, sent = observe(fail=False)
    assert seen == [before + 1, before + 1]
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert (FOREGROUND.active, FOREGROUND.served) == (before, served + 1)


def test_a_request_whose_handler_raised_no_longer_counts() -> None:
    before = FOREGROUND.active
    with pytest.raises(RuntimeError):
        observe(fail=True)
    assert FOREGROUND.active == before


def test_a_thread_waiting_for_a_gap_wakes_when_the_last_request_is_answered() -> None:
    foreground = Foreground()
    foreground.started()
    foreground.started()
    woke: list[float] = []

    def waiter() -> None:
        started = time.monotonic()
        foreground.wait_for_gap(30.0)
        woke.append(time.monotonic() - started)

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.2)
    foreground.finished()
    time.sleep(0.2)
    assert not woke, "one request is still being answered"
    foreground.finished()
    thread.join(5)
    assert woke and 0.3 < woke[0] < 5


def test_waiting_for_a_gap_ends_at_its_timeout_and_costs_nothing_without_requests() -> None:
    foreground = Foreground()
    started = time.monotonic()
    foreground.wait_for_gap(30.0)
    assert time.monotonic() - started < 0.1, "no request: no wait"
    foreground.started()
    started = time.monotonic()
    foreground.wait_for_gap(0.3)
    assert 0.25 < time.monotonic() - started < 5
