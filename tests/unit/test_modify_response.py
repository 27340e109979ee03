"""PATCH and DELETE answers are rendered straight to bytes, identical to what FastAPI sent before.

The handlers used to return ``_body(result)`` as a dict, which FastAPI walked with
``jsonable_encoder`` and rendered with ``JSONResponse``; they now send ``json_response(_body(result))``
(issue 12, single-commit latency). These pin that every shape of answer — a write, a write with
dropped stale commits, a dry run of new and existing keys, a sink's dry run — keeps its exact bytes,
content type and status.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from emulator.model.connectors import NoConnectCluster
from emulator.server.json_answer import json_response
from emulator.server.routes.offsets import _body
from emulator.service.checks import ConnectorChecks
from emulator.service.results import DroppedCommit, ModifyResult, PlannedRecord
from emulator.service.sinks import PlannedGroupChange

RECORDS = [
    PlannedRecord(b'["c",{"f":"/data/\xc3\xbc.txt"}]', b'{"position":9223372036854775807}', 3, existing=True),
    PlannedRecord(b'["c",{"bad":"\xff"}]', None, 0, existing=False, topic="own-offsets"),
]
DROPPED = [DroppedCommit(partition={"f": "/data/日本.txt", "n": 10**30, "x": 2.5}, reason="sequence 4 is stale")]

RESULTS = [
    ModifyResult("The offsets for this connector have been altered successfully", RECORDS, dry_run=False),
    ModifyResult("The offsets for this connector have been altered successfully", [], False, DROPPED),
    ModifyResult("The offsets for this connector have been reset successfully", RECORDS, dry_run=True),
    ModifyResult("unused", [], dry_run=True),
]


@pytest.mark.parametrize("result", RESULTS)
def test_modification_answers_keep_the_bytes_fastapi_rendered(result: ModifyResult) -> None:
    ours = json_response(_body(result))
    theirs = JSONResponse(jsonable_encoder(_body(result)))
    assert ours.body == theirs.body
    assert ours.headers["content-type"] == theirs.headers["content-type"] == "application/json"
    assert ours.status_code == theirs.status_code == 200


def test_a_sink_dry_run_keeps_its_bytes() -> None:
    changes = [PlannedGroupChange("connect-s", "commit", "t", 0, 42), PlannedGroupChange("connect-s", "delete_group")]
    result = ModifyResult("unused", changes, dry_run=True)
    assert json_response(_body(result)).body == JSONResponse(jsonable_encoder(_body(result))).body


class _Registry:
    """Stands in for a Connect cluster's config topic: only ``refresh`` is called here."""

    def __init__(self) -> None:
        self.refreshed_in: list[str] = []

    def refresh(self, timeout_s: float) -> None:
        self.refreshed_in.append(threading.current_thread().name)


def _checks(states: Any) -> ConnectorChecks:
    return ConnectorChecks(log=None, view=None, states=states, refresh_timeout_s=1.0)  # type: ignore[arg-type]


def test_a_connect_clusters_config_topic_is_still_read_to_its_end_in_a_worker_thread() -> None:
    registry = _Registry()
    asyncio.run(_checks(registry).refresh())
    assert len(registry.refreshed_in) == 1
    assert registry.refreshed_in[0] != threading.main_thread().name


def test_without_a_connect_cluster_refresh_hands_nothing_to_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    hops: list[object] = []

    async def recording_to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        hops.append(func)
        return func(*args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", recording_to_thread)
    asyncio.run(_checks(NoConnectCluster()).refresh())
    assert hops == []
    asyncio.run(_checks(_Registry()).refresh())
    assert len(hops) == 1
