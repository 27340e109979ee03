"""Connect's offsets routes (KIP-875): same paths, bodies, messages and status codes.

Ours, off by default: ``?dry_run=true`` on PATCH/DELETE answers what would be written (exact
key bytes, values and Kafka partitions) without writing anything; ``?create=true`` on PATCH lets a
connector without any offsets yet receive its first ones (Connect would answer 404); ``?kind=sink``
on GET/PATCH/DELETE treats the connector as a sink (its consumer group) when no Connect cluster's
config topic says which kind it is; ``?fresh=true`` on GET first reads the log to its current end,
so the answer reflects every write any daemon on the same log acknowledged before the request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from emulator.model import audit
from emulator.model.errors import InvalidRequest
from emulator.model.principal import current_principal
from emulator.server.audit import note_modification
from emulator.server.auth.scopes import grants_of
from emulator.server.deps import Runtime, RuntimeDep
from emulator.server.json_answer import encode, json_answer, json_bytes, json_response, render_json
from emulator.server.openapi import documented
from emulator.server.openapi_bodies import DryRun, Modified, Offsets
from emulator.server.routes.history import offsets_as_of
from emulator.server.routes.params import (
    check_connector_path,
    claim_epoch_param,
    decimal_param,
    parse_body,
    read_body,
    refuse_store_on_write,
    source_param,
)
from emulator.server.routes.query import QueryModel, RouteQuery
from emulator.service.bodies import parse_alter_body
from emulator.service.bulk import PassAbandoned, abandoned, bulk_pass, is_bulk
from emulator.service.results import ModifyResult
from emulator.service.write_guard import WriteAuth
from emulator.service.writer import Deadline

router = APIRouter(tags=["offsets"], dependencies=[Depends(check_connector_path)])

_OFFSETS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["offsets"],
    "additionalProperties": False,  # Connect's Jackson refuses unknown properties (bodies.py): 400
    "properties": {
        "offsets": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["partition"],
                "additionalProperties": False,
                "properties": {
                    "partition": {"type": "object", "additionalProperties": True},
                    "offset": {"type": ["object", "null"], "additionalProperties": True},
                },
            },
        }
    },
    "example": {"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 30}}]},
}


# The routes' query parameters, read by ``RouteQuery`` rather than from the handlers' signatures
# (see emulator.server.routes.query: these routes carry every commit and every read).
class ListQuery(QueryModel):
    fresh: bool = False


class GetQuery(QueryModel):
    as_of: str | None = None
    epoch: int | None = None
    kind: str | None = None
    fresh: bool = False
    store: str | None = None


# ``claim_epoch``, ``sequence_source`` and ``sequence`` (ours) are declared here for the document and a
# type error's sentence; their values are read strictly from the request (``claim_epoch_param``,
# ``params.decimal_param``): given once, plain decimal digits, an epoch of at least 1.
class AlterQuery(QueryModel):
    dry_run: bool = False
    create: bool = False
    kind: str | None = None
    claim_epoch: int | None = None
    sequence_source: str | None = None
    sequence: int | None = None


class ResetQuery(QueryModel):
    dry_run: bool = False
    kind: str | None = None
    claim_epoch: int | None = None


_LIST = RouteQuery(ListQuery)
_GET = RouteQuery(GetQuery)
_ALTER = RouteQuery(AlterQuery)
_RESET = RouteQuery(ResetQuery)


@router.get(
    "/connectors",
    summary="List connectors: the Connect cluster's configured ones, or (without one) those with offsets in the log",
    openapi_extra=_LIST.openapi(),
    **documented(list[str], 503),
)
async def list_connectors(rt: RuntimeDep, request: Request) -> Response:
    """``?fresh=true`` (ours): read the log (and the Connect cluster's config topic) to its current end
    first (503 if that takes longer than --write-timeout).

    Only the connectors the principal may read are listed (all of them without authentication or
    with ``admin``): a team scoped to ``read:team-a-*`` should not learn other teams' connector
    names, which are often customer or system names. The console's list follows the same rule."""
    fresh = _LIST.read(request).fresh
    grants = grants_of(current_principal.get().scopes)
    version = rt.offsets.names_version()  # before reading: a name added meanwhile bumps it
    names = await rt.offsets.connectors(fresh)
    if not grants.admin:
        return json_response([name for name in names if grants.allows("read", name)])
    if version is None:
        return json_response(names)

    async def body() -> tuple[Any, int]:
        return names, len(names)

    return await cached_json(rt, ("connectors",), version, body, keep_small=True)


@router.get(
    "/connectors/{connector}/offsets",
    summary="Get a connector's offsets (Connect's GET)",
    openapi_extra=_GET.openapi(),
    **documented(Offsets, 400, 404, 500, 503),
)
async def get_offsets(connector: str, rt: RuntimeDep, request: Request) -> Response:
    """``?as_of=<ISO-8601, epoch ms or now-<duration>>`` (ours) answers from the history archive: the offsets as
    they were then, in the same shape (``&epoch=<n>``: as that epoch of the archive had them, e.g. before
    the log lost records). ``?kind=sink`` (ours, without a Connect cluster) answers
    the consumer group ``connect-<connector>``'s offsets in Connect's sink shape. ``?fresh=true``
    (ours) reads the log to its current end first, so writes acknowledged by any daemon on the same
    log before the request are seen (503 if that takes longer than --write-timeout). ``?store=``
    (ours, source connectors): ``effective`` (the default, Connect's answer), ``connector`` (the
    connector's own offsets topic alone, KIP-618) or ``worker`` (the worker's offsets topic alone)."""
    query = _GET.read(request)
    store = query.store
    if query.epoch is not None and query.as_of is None:
        raise InvalidRequest("query parameter 'epoch' needs as_of: it picks the epoch of the history archive to read")
    if query.as_of is not None:
        if query.kind == "sink":  # the archive holds the offsets log's records: a sink's are its group's
            raise InvalidRequest(
                "as_of reads the history archive of source offsets; a sink connector's offsets are its consumer "
                "group's committed offsets, which have no history here (leave out as_of, or kind=sink)"
            )
        past, headers = await offsets_as_of(request, connector, query.as_of, rt, store, query.epoch)
        return await json_answer(past, headers)
    resolved = await rt.offsets.prepare_get(connector, query.kind, query.fresh, store)
    if resolved != "source":  # a sink's answer comes from the broker each time
        return json_response({"offsets": await rt.offsets.rows(connector, resolved, store)})
    version = rt.offsets.source_version(connector, store)  # before the rows: see BodyCache

    async def body() -> tuple[Any, int]:
        rows = await rt.offsets.rows(connector, resolved, store)
        return {"offsets": rows}, len(rows)

    return await cached_json(rt, ("offsets", connector, store), version, body)


async def cached_json(
    rt: Runtime,
    key: Hashable,
    version: Hashable,
    content: Callable[[], Awaitable[tuple[Any, int]]],
    keep_small: bool = False,
) -> Response:
    """Answer from the body cache, else render ``content()`` (the value and its item count) and keep
    the bytes under ``version``."""
    body = rt.bodies.get(key, version)
    if body is None:
        value, items = await content()
        # A big body off the event loop; a small one (most GETs) at once, in one encoder call.
        body = await asyncio.to_thread(encode, value) if is_bulk(items) else render_json(value)
        rt.bodies.put(key, version, body, keep_small)
    return json_bytes(body)


@router.patch(
    "/connectors/{connector}/offsets",
    summary="Alter offsets (Connect's PATCH); an offset of null removes that partition",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _OFFSETS_SCHEMA}},
        },
        **_ALTER.openapi(),
    },
    **documented(Modified | DryRun, 400, 404, 409, 413, 500, 503),
)
async def alter_offsets(connector: str, request: Request, rt: RuntimeDep) -> Response:
    """Ours: ``claim_epoch`` (the writer's claim, see /connectors/{c}/claim) and
    ``sequence_source`` + ``sequence`` (reordering detection: a stale commit is dropped per
    partition and listed under ``dropped``)."""
    query = _ALTER.read(request)
    refuse_store_on_write(request, "a PATCH")
    raw = await read_body(request)
    deadline = rt.offsets.deadline()  # --write-timeout counts from the body's arrival: reading it is the write's work
    if not is_bulk(0, len(raw)):
        return await _alter(connector, request, rt, query, raw, deadline)
    async with rt.bulk_lane.turn(deadline, f"A PATCH of {len(raw):,} bytes", request.is_disconnected):
        return await _alter(connector, request, rt, query, raw, deadline)


async def _alter(
    connector: str, request: Request, rt: Runtime, query: AlterQuery, raw: bytes, deadline: Deadline
) -> Response:
    try:
        changes = await parse_body(parse_alter_body, raw, deadline.at)
    except PassAbandoned:
        raise abandoned("Reading the request's offsets", deadline.seconds) from None
    await bulk_pass(len(changes), lambda: audit.note_partitions(change.partition for change in changes))
    auth = WriteAuth.from_params(
        claim_epoch_param(request),
        source_param(request, "sequence_source"),
        decimal_param(request, "sequence"),
    )
    result = await rt.offsets.alter(
        connector, changes, dry_run=query.dry_run, create=query.create, kind=query.kind, auth=auth, deadline=deadline
    )
    return await _answer(result)


@router.delete(
    "/connectors/{connector}/offsets",
    summary="Reset offsets (Connect's DELETE)",
    openapi_extra=_RESET.openapi(),
    **documented(Modified | DryRun, 400, 404, 409, 500, 503),
)
async def reset_offsets(connector: str, rt: RuntimeDep, request: Request) -> Response:
    query = _RESET.read(request)
    refuse_store_on_write(request, "a DELETE")
    auth = WriteAuth(claim_epoch_param(request))
    keys, size = rt.view.extent(connector)
    if not is_bulk(keys, size):
        result = await rt.offsets.reset(connector, dry_run=query.dry_run, kind=query.kind, auth=auth)
        return await _answer(result)
    deadline = rt.offsets.deadline()
    async with rt.bulk_lane.turn(deadline, f"A DELETE of {keys:,} offsets", request.is_disconnected):
        result = await rt.offsets.reset(connector, dry_run=query.dry_run, kind=query.kind, auth=auth, deadline=deadline)
        return await _answer(result)


async def _answer(result: ModifyResult) -> Response:
    """The audit notes and the answer of a PATCH or DELETE (on a worker thread for a bulk one). Their
    partitions are noted before the write: by the PATCH route, by the service for a DELETE."""

    def body() -> bytes:
        note_modification(result)
        return render_json(_body(result))

    return json_bytes(await bulk_pass(len(result.records), body))


def _body(result: ModifyResult) -> dict[str, Any]:
    """Rendered by ``_answer``, not returned to FastAPI: its ``jsonable_encoder`` walk of the
    dict cost ~0.05 ms of every PATCH for the same bytes (JSONResponse's ``json.dumps`` settings)."""
    if not result.dry_run:
        body: dict[str, Any] = {"message": result.message}
        if result.dropped:
            body["dropped"] = result.dropped
        return body
    message = f"Dry run: nothing was written. {len(result.records)} record(s) would be written."
    if result.dropped:  # what the write would answer: a stale commit is dropped, not written
        message += (
            f" {len(result.dropped)} partition(s) would be dropped: the commit sequence is stale (see 'dropped')."
        )
    body = {"message": message, "dry_run": True, "records": [r.as_dict() for r in result.records]}
    if result.dropped:
        body["dropped"] = result.dropped
    return body
