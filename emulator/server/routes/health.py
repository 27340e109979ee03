"""Liveness, readiness (Connect's read-to-end rule) and counters, separate from Connect's routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from emulator.model.errors import NotReady
from emulator.server.deps import RuntimeDep
from emulator.server.errors import error_response
from emulator.server.openapi import documented
from emulator.server.openapi_bodies import Alive, NotReadyBody
from emulator.service.health import Readiness, Status

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Alive", **documented(Alive))
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="200 once the log has been read to its end, else 503 with progress",
    **documented(Readiness, (503, "Not ready yet: the read progress so far", NotReadyBody)),
)
async def readyz(rt: RuntimeDep) -> JSONResponse:
    body = rt.health.readiness()
    if body["ready"]:
        return JSONResponse(body)
    return error_response(NotReady("Reading the offsets log to its end"), extra=body)


@router.get("/status", summary="Log location, read progress and record counters", **documented(Status))
async def status(rt: RuntimeDep) -> dict[str, Any]:
    return dict(rt.health.status())
