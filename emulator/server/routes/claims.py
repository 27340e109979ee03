"""Claims (ours): one owner per connector. ``POST`` claims with the next epoch, fencing older
owners; writes then carry ``claim_epoch``. See ``emulator.model.claims`` and ``emulator.service.claims``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from emulator.model import audit
from emulator.model.claims import ClaimBody
from emulator.model.principal import current_principal
from emulator.server.auth.scopes import grants_of
from emulator.server.deps import RuntimeDep
from emulator.server.openapi import documented
from emulator.server.openapi_bodies import Message
from emulator.server.routes.params import check_connector_path, claim_epoch_param, read_body
from emulator.service.bodies import parse_claim_body

router = APIRouter(tags=["claims"], dependencies=[Depends(check_connector_path)])


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
                        "additionalProperties": False,  # another field is a 400 (parse_claim_body)
                        "properties": {
                            "owner": {"type": "string", "minLength": 1, "pattern": "\\S"},  # not blank: 400
                            "force": {"type": "boolean"},
                        },
                    }
                }
            },
        }
    },
    **documented(ClaimBody, 400, 409, 413, 500, 503),
)
async def claim(connector: str, request: Request, rt: RuntimeDep) -> dict[str, Any]:
    body = parse_claim_body(await read_body(request))
    audit.note(owner=body.owner, force=body.force)
    claim = await rt.claims.claim(connector, body.owner, body.force)
    audit.note(epoch=claim.epoch)
    return dict(claim.as_dict())


@router.get(
    "/connectors/{connector}/claim",
    summary="The connector's current claim",
    **documented(ClaimBody, 400, 404, 500),
)
async def current_claim(connector: str, rt: RuntimeDep) -> dict[str, Any]:
    return dict((await rt.claims.current(connector)).as_dict())


@router.get(
    "/claims",
    summary="Every current claim (ours), sorted by connector, of the connectors the caller may read",
    **documented(list[ClaimBody], 500, 503),
)
async def list_claims(rt: RuntimeDep) -> list[dict[str, Any]]:
    """Read from the claims storage itself, so a claim on a connector without offsets is listed too,
    within --write-timeout (503 ``log_timeout`` after it), like ``GET /connectors/{c}/claim``. Filtered
    as ``GET /connectors`` is: only the connectors the principal may ``read`` (all without
    authentication or with ``admin``). A log without claims support has none: ``[]``."""
    grants = grants_of(current_principal.get().scopes)
    claims = await rt.claims.current_all()
    return [dict(claim.as_dict()) for claim in claims if grants.admin or grants.allows("read", claim.connector)]


@router.delete(
    "/connectors/{connector}/claim",
    summary="Release the claim with this epoch",
    **documented(Message, 400, 404, 500, 503),
)
async def release_claim(connector: str, epoch: int, request: Request, rt: RuntimeDep) -> dict[str, Any]:
    """``epoch`` is read as strictly as a write's ``claim_epoch`` (plain digits, at least 1, given once)."""
    checked = claim_epoch_param(request, "epoch")
    epoch = epoch if checked is None else checked  # present: FastAPI required it
    audit.note(epoch=epoch)
    await rt.claims.release(connector, epoch)
    return {"message": f"The claim on connector {connector} with epoch {epoch} was released"}
