"""Raw offsets records over HTTP: byte-exact export and import through a running daemon.

KIP-875 bodies carry parsed JSON, so they cannot move a key whose bytes differ from Jackson's
canonical form, or a key Connect ignores; backups, restores and migrations need the bytes
themselves. Keys and values travel base64-encoded. Imports follow the same rules as PATCH
(STOPPED connectors only, read-your-writes) and answer with the diff they applied.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from emulator.formats.model import RawRecord, connector_of
from emulator.model.errors import BadRequest
from emulator.server.deps import RuntimeDep

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


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


@router.get("/offsets/records", summary="Live raw offsets records (base64 key/value) with their log coordinates")
async def get_records(
    rt: RuntimeDep, connector: Annotated[list[str] | None, Query(description="only these connectors")] = None
) -> dict[str, Any]:
    rt.service.ensure_ready()
    wanted = set(connector or [])
    records = []
    skipped_null_keys = 0
    for key, entry in rt.view.raw_entries():
        if key is None:
            skipped_null_keys += 1
            continue
        name = connector_of(key)
        if wanted and name not in wanted:
            continue
        records.append(
            {
                "key": _b64(key),
                "value": _b64(entry.value),
                "connector": name,
                "kafka_partition": entry.partition,
                "offset": entry.offset,
                "timestamp_ms": entry.timestamp_ms,
            }
        )
    records.sort(key=lambda r: (r["kafka_partition"], r["offset"]))
    return {"source": rt.log.description, "records": records, "skipped_null_keys": skipped_null_keys}


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
    result = await rt.service.import_records(
        records, dry_run=dry_run, allow_malformed=allow_malformed, write_all=write_all
    )
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


def parse_records_body(raw: bytes) -> list[RawRecord]:
    try:
        body = json.loads(raw) if raw.strip() else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict) or not isinstance(body.get("records"), list):
        raise BadRequest('Request body must be {"records": [{"key": <base64>, "value": <base64 or null>}, …]}')
    unknown = sorted(set(body) - {"records"})
    if unknown:
        raise BadRequest(f"Unrecognized field(s) {unknown} in the request body; expected only 'records'")
    records: list[RawRecord] = []
    for index, item in enumerate(body["records"]):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise BadRequest(f"records[{index}] must be an object with a base64 'key'")
        value = item.get("value")
        if value is not None and not isinstance(value, str):
            raise BadRequest(f"records[{index}].value must be a base64 string or null")
        try:
            key_bytes = base64.b64decode(item["key"], validate=True)
            value_bytes = None if value is None else base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadRequest(f"records[{index}] is not valid base64: {exc}") from exc
        records.append(RawRecord(key_bytes, value_bytes))
    return records
