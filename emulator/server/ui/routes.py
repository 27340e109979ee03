"""The console's own reads (``/ui/api/...``): what its pages need in one request each.

Every change the console makes goes through the public API (``PATCH``/``DELETE`` offsets, rollback,
each first with ``dry_run=true``), so the console can do nothing a client could not. These routes
only read, with the same access rules as the API (``emulator.server.auth.policy``): the connectors
page lists only connectors the principal may read, and says which ones it may change.

They are left out of the OpenAPI document: they serve the console's pages and may change with them;
the API is the contract for programs. Their bodies go through ``json_response`` (not FastAPI's
serializer, which cannot send a partition holding half a surrogate pair: ``emulator.codec.surrogates``).

While the log is replayed they answer 200 with the replay's progress (``ready: false``) instead of
a 503, so the page can draw a progress bar; the history index reports its own first build the same
way (``history.building``). While the broker is away after the replay (``ready: false``,
``serving: true``) they answer what the API's reads answer, from memory.
"""

from __future__ import annotations

import asyncio
import math
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from emulator.codec.keys import read_back_id
from emulator.history.archive import HistoryArchive
from emulator.model.errors import InvalidRequest
from emulator.model.principal import current_principal
from emulator.server.auth.scopes import grants_of
from emulator.server.auth.status import for_principal
from emulator.server.deps import Runtime, RuntimeDep
from emulator.server.json_answer import json_response
from emulator.server.routes.history import partition_param
from emulator.server.routes.params import check_connector_path
from emulator.server.sink_lag import SinkLag
from emulator.server.ui.connector_list import ListQuery, connector_list
from emulator.server.ui.history_index import HistoryIndex
from emulator.server.ui.offsets_table import OFFSET_SORTS, PreparedTables, offsets_table
from emulator.server.ui.paging import PageQuery
from emulator.server.ui.summary import (
    change_dict,
    claim_of,
    connector_kind,
    connector_state,
    sink_lag,
)

router = APIRouter(prefix="/ui/api", tags=["console"], include_in_schema=False)
SESSION = "/ui/api/session"
CONNECTORS = "/ui/api/connectors"
CONNECTOR = "/ui/api/connectors/{connector}"
HISTORY = "/ui/api/connectors/{connector}/history"


def history_index(request: Request) -> HistoryIndex | None:
    """The index of this app's archive, created (and its first build started) on first use."""
    archive: HistoryArchive | None = getattr(request.app.state, "history", None)
    if archive is None:
        return None
    index: HistoryIndex | None = getattr(request.app.state, "console_index", None)
    if index is None:
        index = request.app.state.console_index = HistoryIndex(archive)
    index.start()
    return index


async def fresh_index(request: Request) -> HistoryIndex | None:
    """The index, brought up to date with the archive first (once it is built)."""
    index = history_index(request)
    if index is not None and index.state().ready:
        await asyncio.to_thread(index.refresh)
    return index


def history_state(index: HistoryIndex | None) -> dict[str, Any]:
    if index is None:
        return {"enabled": False}
    state = index.state()
    return {
        "enabled": True,
        "ready": state.ready,
        "building": state.building,
        "records": state.records,
        "error": state.error,
        "damaged": list(state.damaged),
        "behind": index.behind(),
    }


def readiness(rt: Runtime) -> dict[str, Any]:
    body = for_principal(rt.health.readiness(), current_principal.get())
    ends = body.get("end_offsets", {})
    positions = body.get("positions", {})
    body["records_total"] = sum(max(ends.get(p, 0), positions.get(p, 0)) for p in ends)
    return body


def page_state(rt: Runtime, index: HistoryIndex | None) -> dict[str, Any]:
    """What every page starts from: readiness (the replay's progress, or why the log is
    unreachable) and ``serving``: whether the offsets are shown, by the API's rule for reads — during
    a broker outage the page shows them as last read, with the reason above, as ``GET`` answers them."""
    ready = readiness(rt)
    serving = rt.offsets.serves_reads()
    return {"ready": ready["ready"], "serving": serving, "progress": ready, "history": history_state(index)}


@router.get("/session")
async def session(request: Request) -> dict[str, Any]:
    """Who the console speaks for: the principal, its scopes, and how to sign in."""
    principal = current_principal.get()
    grants = grants_of(principal.scopes)
    authenticator = request.app.state.authenticator
    return {
        "principal": principal.name,
        "mechanism": principal.mechanism,
        "scopes": list(principal.scopes),
        "admin": grants.admin,
        "may_write": grants.allows_any("write"),
        "authentication": authenticator.enabled,
        "mechanisms": authenticator.mechanisms(),
        "history": getattr(request.app.state, "history", None) is not None,
    }


@router.get("/connectors")
async def connectors(
    request: Request,
    rt: RuntimeDep,
    q: str = "",
    kind: str | None = None,
    sort: str = "name",
    desc: bool = False,
    at: int = 0,
    limit: int | None = None,
    connector: str | None = None,
) -> Response:
    """The connectors page: readable connectors with their kind, state, partitions, last change,
    claim and (sinks) lag, filtered (``q`` in the name, ``kind``, exactly ``connector``), sorted
    (``sort``, ``desc``) and, with ``limit``, one page from ``at``; or the replay's progress while
    the daemon is not ready."""
    query = ListQuery(PageQuery(q, sort, desc, at, limit), kind or None, connector)
    index = await fresh_index(request)
    body = page_state(rt, index)
    if not body["serving"]:
        body["connectors"] = None
        return json_response(body)
    grants = grants_of(current_principal.get().scopes)
    lag_source: SinkLag | None = getattr(request.app.state, "sink_lag", None)
    names = await rt.offsets.connectors()
    body |= await connector_list(rt, names, grants, index, await sink_lag(lag_source), query)
    body["sink_lag"] = lag_source is not None
    return json_response(body)


@router.get("/connectors/{connector}", dependencies=[Depends(check_connector_path)])
async def connector(
    connector: str,
    request: Request,
    rt: RuntimeDep,
    q: str = "",
    sort: str = "partition",
    desc: bool = False,
    at: int = 0,
    limit: int | None = None,
) -> Response:
    """The connector page: its offsets (with where each sits in the log and how many changes the
    history holds; ``q`` in a partition's or offset's JSON, sorted by ``sort``, with ``limit`` one
    page from ``at``), kind, state and claim. 404 for a connector the API would not know."""
    query = PageQuery(q, sort, desc, at, limit)
    query.check(OFFSET_SORTS)
    index = await fresh_index(request)
    body = page_state(rt, index)
    if not body["serving"]:
        return json_response(body)
    kind = connector_kind(rt, connector)
    table = await offsets_table(rt, connector, kind, index, query, prepared_tables(request))
    grants = grants_of(current_principal.get().scopes)
    body |= {
        "name": connector,
        "kind": kind,
        **connector_state(rt, connector),
        "claim": await claim_of(rt, connector),
        "can_write": grants.allows("write", connector),
        **table,
    }
    return json_response(body)


def prepared_tables(request: Request) -> PreparedTables:
    """This app's kept offsets tables (``offsets_table.py``), created on first use."""
    tables: PreparedTables | None = getattr(request.app.state, "offset_tables", None)
    if tables is None:
        tables = request.app.state.offset_tables = PreparedTables()
    return tables


@router.get("/connectors/{connector}/history", dependencies=[Depends(check_connector_path)])
async def partition_history(
    connector: str,
    request: Request,
    rt: RuntimeDep,
    partition: Annotated[str, Query(description="the partition as JSON")],
) -> Response:
    """One partition's changes for the chart, oldest first: the newest ``PER_PARTITION`` of them."""
    parsed = partition_param(partition)
    if parsed is None:
        raise InvalidRequest("query parameter 'partition' is required")
    if not _finite(parsed):  # echoed below, and JSON has no infinity: it was a 500 and a traceback
        raise InvalidRequest("query parameter 'partition' holds a number beyond a double's range (e.g. 1e999)")
    index = await fresh_index(request)
    state = history_state(index)
    if index is None or not state["ready"]:
        return json_response({"history": state, "changes": [], "total": 0})
    changes, total = index.partition(connector, read_back_id(parsed))
    return json_response(
        {
            "history": state,
            "partition": parsed,
            "total": total,
            "changes": [change_dict(c) for c in changes],
        }
    )


def _finite(value: Any) -> bool:
    """Whether ``value`` holds no float JSON cannot write (an infinity: ``1e999`` reads as one)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True
