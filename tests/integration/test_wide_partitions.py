"""A request with one wide partition is handled off the event loop, as one with many partitions is.

``emulator.service.bulk`` moves a request's passes (planning, audit notes, reading back, encoding) to
a worker thread above ``BULK_ITEMS`` items. One partition whose map has 100,000 keys (a 3.3 MB PATCH)
is one item, yet cost ~0.3 s of planning and audit notes on the loop, and its first GET ~0.6 s of
reading back and ~0.1 s of encoding: ``/healthz`` from another client waited 0.9–1.2 s. So the
passes also leave the loop above ``BULK_BYTES`` of body or of records read. Which thread ran a pass
is observed directly (a timing threshold would be flaky on a loaded machine): the wrapped steps note
whether they ran on the event loop's thread. The common small request stays on the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import emulator.model.audit as audit_module
import emulator.server.routes.offsets as offsets_routes
import emulator.service.bodies as bodies_module
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.server.wiring import assemble_runtime, make_app, start_reading
from emulator.service.bulk import BULK_BYTES, BULK_ITEMS
from emulator.view.offset_view import OffsetView
from tests.fixtures.waits import until

WIDE_KEYS = 5_000  # one partition of ~100 KB: past BULK_BYTES, far below BULK_ITEMS partitions


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Observed:
    """Which steps ran, and whether on the event loop's thread, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, view: OffsetView) -> None:
        self.steps: list[tuple[str, bool]] = []
        self._wrap(monkeypatch, bodies_module, "encode_offset", "plan")  # a PATCH's plan (each partition's value)
        self._wrap(monkeypatch, audit_module, "listed", "audit")  # the audit's list of partitions
        self._wrap(monkeypatch, offsets_routes, "encode", "encode")  # a big GET's answer
        self._wrap(monkeypatch, offsets_routes, "render_json", "encode")  # a small GET's, any PATCH's, DELETE's
        self._wrap(monkeypatch, view, "offsets", "read")  # a GET's rows, a DELETE's plan

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, step: str) -> None:
        real: Callable[..., Any] = getattr(owner, name)

        def observed(*args: Any, **kwargs: Any) -> Any:
            self.steps.append((step, _on_loop()))
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, observed)

    def take(self) -> dict[str, set[bool]]:
        """For each step seen since the last call: whether it ran on the loop (True) or not."""
        seen: dict[str, set[bool]] = {}
        for step, on_loop in self.steps:
            seen.setdefault(step, set()).add(on_loop)
        self.steps.clear()
        return seen


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Observed]]:
    log = EmbeddedOffsetLog(tmp_path, partitions=2, synchronous="NORMAL")
    log.open()
    runtime = assemble_runtime(log, OffsetView(), NoConnectCluster())
    start_reading(runtime)
    observed = Observed(monkeypatch, runtime.view)
    try:
        with TestClient(make_app(runtime, reading_started=True), base_url="http://localhost") as client:
            until(lambda: client.get("/readyz").status_code == 200, "ready after the replay")
            observed.take()
            yield client, observed
    finally:
        log.close()


def _wide(position: int) -> dict[str, Any]:
    partition = {f"k{i}": i for i in range(WIDE_KEYS)}
    return {"offsets": [{"partition": partition, "offset": {**partition, "position": position}}]}


def test_a_wide_partitions_patch_get_and_reset_run_off_the_event_loop(app: tuple[TestClient, Observed]) -> None:
    client, observed = app
    body = _wide(1)
    assert len(str(body)) > BULK_BYTES and len(body["offsets"]) <= BULK_ITEMS
    path = f"/connectors/wide-{time.monotonic_ns()}/offsets"

    answer = client.patch(path, params={"create": "true"}, json=body)
    assert answer.status_code == 200, answer.text
    assert observed.take() == {"plan": {False}, "audit": {False}, "encode": {False}}

    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"offsets": body["offsets"]}
    assert observed.take() == {"read": {False}, "encode": {False}}

    answer = client.delete(path)
    assert answer.status_code == 200, answer.text
    assert observed.take() == {"read": {False}, "audit": {False}, "encode": {True}}  # its answer is a message
    assert client.get(path).json() == {"offsets": []}


def test_a_small_requests_passes_stay_on_the_event_loop(app: tuple[TestClient, Observed]) -> None:
    client, observed = app
    path = f"/connectors/small-{time.monotonic_ns()}/offsets"
    body = {"offsets": [{"partition": {"file": "a"}, "offset": {"position": 1}}]}

    assert client.patch(path, params={"create": "true"}, json=body).status_code == 200
    assert observed.take() == {"plan": {True}, "audit": {True}, "encode": {True}}
    assert client.get(path).json() == body
    assert observed.take() == {"read": {True}, "encode": {True}}
    assert client.delete(path).status_code == 200
    assert observed.take() == {"read": {True}, "audit": {True}, "encode": {True}}
