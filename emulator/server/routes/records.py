"""Raw offsets records over HTTP: byte-exact export and import through a running daemon.

Keys and values travel base64-encoded; imports follow the same rules as PATCH and answer with the
diff they applied (``emulator.service.records`` says why raw records, and how).
"""

from __future__ import annotations

import base64
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from emulator.server.audit import note_import
from emulator.server.deps import RuntimeDep
from emulator.service.bodies import parse_records_body

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


@router.get("/offsets/records", summary="Live raw offsets records (base64 key/value) with their log coordinates")
async def get_records(
    rt: RuntimeDep, connector: Annotated[list[str] | None, Query(description="only these connectors")] = None
) -> dict[str, Any]:
    return dict(rt.records.export(connector))


@router.post(
    "/offsets/records",
    summary="Import raw offsets records as-is; answers the diff (added/changed/removed/unchanged)",
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": _RECORDS_SCHEMA}}}},
)
async def post_records(
    request: Request,
    rt: RuntimeDep,
    dry_run: bool = False,
    allow_malformed: bool = False,
    write_all: bool = False,
    diff_limit: Annotated[int | None, Query(ge=1, description="entries listed per connector; default all")] = None,
) -> dict[str, Any]:
    records = parse_records_body(await request.body())
    result = await rt.records.import_records(
        records, dry_run=dry_run, allow_malformed=allow_malformed, write_all=write_all
    )
    note_import(result.diff, result.written)
    counts = result.diff.counts()
    changes = sum(counts.get(k, 0) for k in ("added", "changed", "removed"))
    if result.dry_run:
        message = f"Dry run: nothing was written. {changes} change(s) would be written."
    else:
        message = f"Imported {len(records)} record(s): {result.written} written, {changes} change(s)."
    return {
        "message": message,
        "dry_run": result.dry_run,
        "written": result.written,
        "diff": result.diff.as_dict(diff_limit),
    }
