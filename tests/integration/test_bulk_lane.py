"""Large writes take turns: several at once no longer all run out of their deadline together.

A large write's work is Python on worker threads, and several at once share one interpreter. Ten
PATCHes of 20,000 partitions sent together, each done in 2 s alone, were all answered 503 after a
6 s ``--write-timeout``: none was written. Now a write with a large body waits for its turn, first
come first served, within its deadline (``emulator/service/bulk_lane.py``): those whose turn comes
in time are written whole, the others are answered 503 saying they waited, with nothing written.

The app runs in-process over a real SQLite log; each partition's parsing is made to take 0.5 ms of
CPU (a busy wait, which holds the interpreter as the real work does), so that one request's work is
~1 s on an idle machine (up to ~4 s on a loaded one: each wait ends late when its thread is not
running) and ten of them cannot all fit in a 6 s deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import emulator.service.bodies as bodies_module
from tests.fixtures.in_process import embedded_test_client

WRITE_TIMEOUT_S = 6.0  # one request's work takes 1-4 s here, with the machine idle or loaded
PARTITIONS = 2000  # a body of ~100 KB: a large write (service/bulk.py, BULK_BYTES)
WORK_S = 0.0005  # per partition: ~1 s of one request's work
REQUESTS = 10  # 10 s of work at least: they cannot all fit one deadline


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with embedded_test_client(tmp_path, WRITE_TIMEOUT_S) as served:
        yield served


def _working(real: Callable[..., Any], seconds: float = WORK_S) -> Callable[..., Any]:
    def busy(*args: Any, **kwargs: Any) -> Any:
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            pass
        return real(*args, **kwargs)

    return busy


def _patch(client: TestClient, connector: str) -> tuple[str, int, str]:
    body = {"offsets": [{"partition": {"file": f"f{i}"}, "offset": {"position": i}} for i in range(PARTITIONS)]}
    answer = client.patch(f"/connectors/{connector}/offsets?create=true", json=body)
    return connector, answer.status_code, answer.text


def test_large_writes_sent_together_are_written_in_turn_and_the_rest_refused_whole(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bodies_module, "_parse_item", _working(bodies_module._parse_item))
    names = [f"lane-{i}" for i in range(REQUESTS)]
    with ThreadPoolExecutor(REQUESTS) as pool:
        answers = list(pool.map(lambda name: _patch(client, name), names))
    written = [name for name, status, _ in answers if status == 200]
    refused = [(name, text) for name, status, text in answers if status != 200]
    assert written, f"none of {REQUESTS} large writes was written, each ~1 s of work alone: {answers}"
    assert refused, "ten writes of ~1 s each all fit a 6 s deadline: the test no longer tests turns"
    for name in written:
        assert len(client.get(f"/connectors/{name}/offsets").json()["offsets"]) == PARTITIONS
    waited = [text for _, text in refused if "for its turn behind" in text]
    assert waited, f"no refused write says it waited for its turn: {refused}"
    for name, text in refused:
        assert "nothing was written" in text, text
        assert client.get(f"/connectors/{name}/offsets").status_code == 404, f"{name} was refused but written"
    assert (
        "waited 6 s (--write-timeout) for its turn behind" in waited[0]
        and "large writes run one at a time: send it again once they are done" in waited[0]
    ), waited[0]


def test_a_small_write_does_not_wait_behind_a_large_one(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connector's one-partition commit is answered while a large import or PATCH works."""
    monkeypatch.setattr(bodies_module, "_parse_item", _working(bodies_module._parse_item))
    small = {"offsets": [{"partition": {"file": "f"}, "offset": {"position": 1}}]}
    with ThreadPoolExecutor(1) as pool:
        large = pool.submit(_patch, client, "lane-large")
        time.sleep(0.2)  # the large one is at work
        started = time.monotonic()
        answer = client.patch("/connectors/lane-small/offsets?create=true", json=small)
        took = time.monotonic() - started
        assert large.result()[1] == 200
    assert answer.status_code == 200, answer.text
    assert took < 0.8, f"the small write took {took:.2f} s beside a ~1 s large one"


def test_a_reset_of_a_large_connector_takes_its_turn_too(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DELETE has no body, but resetting thousands of partitions is as much work as writing them."""
    assert _patch(client, "lane-reset")[1] == 200
    monkeypatch.setattr(bodies_module, "_parse_item", _working(bodies_module._parse_item))
    answered: dict[str, float] = {}

    def large() -> int:
        status = _patch(client, "lane-before")[1]
        answered["patch"] = time.monotonic()
        return status

    with ThreadPoolExecutor(1) as pool:
        patched = pool.submit(large)
        time.sleep(0.2)  # the PATCH has its turn and works for ~1 s
        reset = client.delete("/connectors/lane-reset/offsets")
        answered["reset"] = time.monotonic()
        assert patched.result() == 200
    assert reset.status_code == 200, reset.text
    assert answered["reset"] > answered["patch"], "the reset of 2,000 partitions did not wait for its turn"
    assert client.get("/connectors/lane-reset/offsets").json()["offsets"] == []


def test_status_and_metrics_show_the_large_write_running_and_those_waiting(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator who meets "waited … for its turn" sees the queue: ``/status`` and the gauge."""
    assert client.get("/status").json()["large_writes"] == {"running": 0, "waiting": 0}
    monkeypatch.setattr(bodies_module, "_parse_item", _working(bodies_module._parse_item))
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_patch, client, "lane-seen-0")
        time.sleep(0.2)
        second = pool.submit(_patch, client, "lane-seen-1")
        time.sleep(0.2)  # both are in: one works (~1 s), one waits for it
        during = client.get("/status").json()["large_writes"]
        scraped = client.get("/metrics").text
        assert first.result()[1] == 200, first.result()[2]
        second.result()  # written, or refused at its deadline after its turn came late: either way answered
    assert during == {"running": 1, "waiting": 1}
    assert 'connect_offsets_large_writes{state="running"} 1.0' in scraped
    assert 'connect_offsets_large_writes{state="waiting"} 1.0' in scraped
    assert client.get("/status").json()["large_writes"] == {"running": 0, "waiting": 0}
