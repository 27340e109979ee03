"""Raw offsets records over HTTP: byte-exact export and import through a running daemon.

Keys and values travel base64-encoded; imports follow the same rules as PATCH and answer with the
diff they applied (``emulator.service.records`` says why raw records, and how).
"""

from __future__ import annotations

import asyncio
import base64
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from emulator.formats.model import RawRecord
from emulator.model.principal import current_principal
from emulator.server.audit import note_import
from emulator.server.auth.scopes import grants_of
from emulator.server.auth.status import HIDDEN
from emulator.server.deps import RuntimeDep
from emulator.server.json_answer import json_answer
from emulator.server.openapi import documented
from emulator.server.openapi_bodies import Imported
from emulator.server.routes.params import parse_body, read_body
from emulator.service.bodies import parse_records_body
from emulator.service.bulk import bulk_pass, is_bulk
from emulator.service.records import ImportResult, RecordsExport

router = APIRouter(tags=["records"])

_RECORDS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["records"],
    "properties": {
        "records": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key"],
                "properties": {
                    "key": {"type": "string", "format": "base64"},
                    "value": {"type": ["string", "null"], "format": "base64"},
                },
            },
        }
    },
    "example": {
        "records": [
            {
                "key": base64.b64encode(b'["file-src",{"filename":"/data/in.txt"}]').decode(),
                "value": base64.b64encode(b'{"position":30}').decode(),
            }
        ]
    },
}


@router.get(
    "/offsets/records",
    summary="Live raw offsets records (base64 key/value) with their log coordinates",
    **documented(RecordsExport, 400, 503),
)
async def get_records(
    rt: RuntimeDep,
    connector: Annotated[list[str] | None, Query(description="only these connectors")] = None,
    store: Annotated[
        str | None,
        Query(
            description="effective (default: each connector as Connect reads it, its own offsets topic when it "
            "has one), worker (the worker's log alone) or connector (connectors' own topics alone)"
        ),
    ] = None,
) -> Response:
    # A large view is copied, then encoded: both off the event loop (emulator.server.json_answer).
    exported = await asyncio.to_thread(rt.records.export, connector, store)
    if not grants_of(current_principal.get().scopes).admin:  # a server path or the brokers, as /status hides them
        exported["source"] = HIDDEN
    return await json_answer(exported)


@router.post(
    "/offsets/records",
    summary="Import raw offsets records as-is; answers the diff (added/changed/removed/unchanged)",
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": _RECORDS_SCHEMA}}}},
    **documented(Imported, 400, 413, 500, 503),
)
async def post_records(
    request: Request,
    rt: RuntimeDep,
    dry_run: bool = False,
    allow_malformed: bool = False,
    write_all: bool = False,
    diff_limit: Annotated[int | None, Query(ge=1, description="entries listed per connector; default all")] = None,
) -> Response:
    raw = await read_body(request)

    async def imported() -> tuple[list[RawRecord], ImportResult]:
        records = await parse_body(parse_records_body, raw)
        return records, await rt.records.import_records(
            records, dry_run=dry_run, allow_malformed=allow_malformed, write_all=write_all
        )

    if is_bulk(0, len(raw)):  # large writes take turns (service/bulk_lane.py)
        what = f"An import of {len(raw):,} bytes"
        async with rt.bulk_lane.turn(rt.offsets.deadline(), what, request.is_disconnected):
            records, result = await imported()
    else:
        records, result = await imported()

    def answer() -> dict[str, Any]:
        """The audit notes and the answer: passes over every record (on a worker thread for a bulk)."""
        note_import(result.diff, result.written)
        counts = result.diff.counts()
        changes = sum(counts.get(k, 0) for k in ("added", "changed", "removed"))
        if result.dry_run:
            message = f"Dry run: nothing was written. {changes} change(s) would be written."
        else:
            message = f"Imported {len(records)} record(s): {result.written} written, {changes} change(s)."
        if result.unreadable_values:
            verb = "would be" if result.dry_run else "were"
            message += f" {result.unreadable_values} value(s) Connect cannot read back {verb} written as-is."
        if result.unread_keys:
            verb = "would hold" if result.dry_run else "hold"
            message += (
                f" {result.unread_keys} key(s) {verb} a value in bytes no converter writes (spaces, another number"
                " form): Connect lists their partitions, but no task reads these values and GET shows null."
            )
        return {
            "message": message,
            "dry_run": result.dry_run,
            "written": result.written,
            "unreadable_values": result.unreadable_values,
            "unread_keys": result.unread_keys,
            "diff": result.diff.as_dict(diff_limit),
        }

    return await json_answer(await bulk_pass(len(records), answer))
