"""A write's ``--write-timeout`` covers the daemon's own work on a big request, not only the log.

Reading a PATCH's offsets and planning its records are passes over every partition, on a worker
thread past 1,000 of them. They ran to their end whatever the deadline: a PATCH of 200,000
partitions on a loaded machine was answered 503 after 15-27 s with a 10 s ``--write-timeout``, and
its thread's CPU was taken from every other request all that time. Now the deadline counts from
the body's arrival, the passes stop at it, and the answer is 503 ``log_timeout`` then, nothing
written, saying how to make the request fit.

The app runs in-process over a real SQLite log; the per-partition work is made slow (a sleep in
the parsing or the planning of each partition) so that the deadline passes in the middle of a pass
on any machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import emulator.service.bodies as bodies_module
from tests.fixtures.in_process import embedded_test_client

WRITE_TIMEOUT_S = 3.0  # the planning test must parse all 10,000 partitions within it first (~0.1 s on a quiet machine)
PARTITIONS = 10000
SLOW_S = 0.002  # per partition: 20 s for the whole pass, nearly seven times the deadline


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with embedded_test_client(tmp_path, WRITE_TIMEOUT_S) as served:
        yield served


@pytest.fixture
def patient_client(tmp_path: Path) -> Iterator[TestClient]:
    """A deadline no loaded machine reaches for this request (a whole test run beside it took more
    than 1 s to read 5,000 partitions; this request has 10,000)."""
    with embedded_test_client(tmp_path, 60.0) as served:
        yield served


def _counting_slowly(real: Callable[..., Any], calls: list[int]) -> Callable[..., Any]:
    def slow(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        time.sleep(SLOW_S)
        return real(*args, **kwargs)

    return slow


def _patch(client: TestClient, connector: str) -> tuple[Any, float]:
    body = {"offsets": [{"partition": {"file": f"f{i}"}, "offset": {"position": i}} for i in range(PARTITIONS)]}
    started = time.monotonic()
    answer = client.patch(f"/connectors/{connector}/offsets?create=true", json=body)
    return answer, time.monotonic() - started


def _stopped(calls: list[int]) -> int:
    """The pass's calls once it has had time to go on, if it did (256 items between two looks at
    the clock: ~0.5 s here)."""
    time.sleep(3)
    return len(calls)


def test_reading_a_big_body_stops_at_the_deadline_and_writes_nothing(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(bodies_module, "_parse_item", _counting_slowly(bodies_module._parse_item, calls))
    answer, took = _patch(client, "deadline-read")
    assert answer.status_code == 503, answer.text
    assert answer.json()["message"] == (
        "Reading the request's offsets took longer than 3 s (--write-timeout); nothing was written "
        "(send it in smaller requests, or give the daemon a longer --write-timeout)"
    )
    assert took < 12, f"answered after {took:.1f} s, its deadline 3 s; the pass alone takes 20 s"
    assert _stopped(calls) < PARTITIONS, "the pass ran to its end after the answer"
    assert client.get("/connectors/deadline-read/offsets").status_code == 404


def test_planning_a_big_write_stops_at_the_deadline_and_writes_nothing(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    encode = bodies_module.encode_offset  # each partition's value, as the plan writes it (OffsetChange.encoded_offset)
    monkeypatch.setattr(bodies_module, "encode_offset", _counting_slowly(encode, calls))
    answer, took = _patch(client, "deadline-plan")
    assert answer.status_code == 503, answer.text
    assert answer.json()["message"].startswith(
        f"Planning the write of {PARTITIONS:,} partition(s) took longer than 3 s (--write-timeout); nothing was written"
    )
    assert took < 12, f"answered after {took:.1f} s, its deadline 3 s; the pass alone takes 20 s"
    assert _stopped(calls) < PARTITIONS, "the pass ran to its end after the answer"
    assert client.get("/connectors/deadline-plan/offsets").status_code == 404


def test_a_big_write_within_its_deadline_is_written_whole(patient_client: TestClient) -> None:
    """The looks at the clock change nothing for a pass that ends in time."""
    answer, _ = _patch(patient_client, "deadline-fits")
    assert answer.status_code == 200, answer.text
    assert len(patient_client.get("/connectors/deadline-fits/offsets").json()["offsets"]) == PARTITIONS
