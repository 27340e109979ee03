"""Claims (ours): one owner per connector. ``POST`` claims with the next epoch, fencing older
owners; writes then carry ``claim_epoch``. See ``emulator.model.claims`` and ``emulator.service.write_guard``."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request

from emulator.model.errors import BadRequest, NotFound
from emulator.server.deps import RuntimeDep

router = APIRouter(tags=["claims"])


@router.post(
    "/connectors/{connector}/claim",
    summary="Claim a connector's offsets for one owner; a newer claim fences older ones (409 on their writes)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["owner"],
                        "properties": {"owner": {"type": "string"}, "force": {"type": "boolean"}},
                    }
                }
            },
        }
    },
)
async def claim(connector: str, request: Request, rt: RuntimeDep) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict) or not isinstance(body.get("owner"), str):
        raise BadRequest('A claim body is {"owner": "<who writes>", "force": false}')
    force = body.get("force", False)
    if not isinstance(force, bool):
        raise BadRequest("'force' must be true or false")
    return (await rt.service.claim(connector, body["owner"], force)).as_dict()


@router.get("/connectors/{connector}/claim", summary="The connector's current claim")
async def current_claim(connector: str, rt: RuntimeDep) -> dict[str, Any]:
    current = await rt.service.guard.current(connector)
    if current is None:
        raise NotFound(f"Connector {connector} has no current claim")
    return current.as_dict()


@router.delete("/connectors/{connector}/claim", summary="Release the claim with this epoch")
async def release_claim(connector: str, epoch: int, rt: RuntimeDep) -> dict[str, Any]:
    if not await rt.service.guard.release(connector, epoch):
        raise NotFound(f"Connector {connector} has no current claim with epoch {epoch}")
    return {"message": f"The claim on connector {connector} with epoch {epoch} was released"}
