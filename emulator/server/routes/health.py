"""Liveness, readiness (Connect's read-to-end rule) and counters, separate from Connect's routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from emulator.model.errors import NotReady
from emulator.model.principal import current_principal
from emulator.server.auth.status import for_principal
from emulator.server.deps import RuntimeDep
from emulator.server.errors import error_response

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Alive")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="200 once the log has been read to its end, else 503 with progress")
async def readyz(rt: RuntimeDep) -> JSONResponse:
    """Public (probes carry no credentials): error texts, which may name files, only to admin."""
    body = for_principal(rt.health.readiness(), current_principal.get())
    if body["ready"]:
        return JSONResponse(body)
    return error_response(NotReady("Reading the offsets log to its end"), extra=body)


@router.get("/status", summary="Log location, read progress, record counters and security settings")
async def status(rt: RuntimeDep, request: Request) -> dict[str, Any]:
    """File paths and error texts are shown to the admin scope only."""
    body = {**rt.health.status(), "security": request.app.state.security.describe()}
    return for_principal(body, current_principal.get())
