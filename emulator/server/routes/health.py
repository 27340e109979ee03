"""Liveness, readiness (Connect's read-to-end rule) and counters, separate from Connect's routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from emulator.model.errors import NotReady
from emulator.server.deps import RuntimeDep
from emulator.server.errors import error_response

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Alive")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz", summary="200 once the log has been read to its end and its storage answers, else 503 with the reason"
)
async def readyz(rt: RuntimeDep) -> JSONResponse:
    body = rt.health.readiness()
    if body["ready"]:
        return JSONResponse(body)
    unreachable = body.get("unreachable")
    reason = "Reading the offsets log to its end" if unreachable is None else f"Not ready: {unreachable}"
    return error_response(NotReady(reason), extra=body)


@router.get("/status", summary="Log location, read progress and record counters")
async def status(rt: RuntimeDep) -> dict[str, Any]:
    return dict(rt.health.status())
