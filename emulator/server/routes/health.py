"""Liveness, readiness (Connect's read-to-end rule), status and metrics, separate from Connect's routes."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from emulator.history.archive import HistoryArchive
from emulator.model.errors import NotReady
from emulator.model.principal import current_principal
from emulator.model.readiness import still_reading
from emulator.server.auth.status import HIDDEN, for_principal
from emulator.server.deps import RuntimeDep
from emulator.server.errors import error_response
from emulator.server.metrics import CONTENT_TYPE, Metrics
from emulator.server.openapi import documented
from emulator.server.openapi_bodies import Alive, NotReadyBody
from emulator.service.health import Readiness, Status


class StatusBody(Status):
    """``/status``: the health fields, the security settings and the GET cache's counters, and
    ``warnings``."""

    security: dict[str, Any]
    get_cache: dict[str, Any]
    large_writes: dict[str, int]
    """Large writes running (one at a time) and waiting for their turn (``service/bulk_lane.py``)."""
    warnings: list[str]
    """What the operator must know although the daemon is ready, e.g. that the offsets log lost
    acknowledged writes the history archive holds (a new history epoch) and how to see them."""


router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Alive", **documented(Alive))
async def healthz() -> Response:
    # Served by emulator.server.hot_routes like the offsets routes, so that it stays the cheapest
    # request (the benchmarks' HTTP floor). A comment, not a docstring: that would be its OpenAPI text.
    return Response(b'{"status":"ok"}', media_type="application/json")


@router.get(
    "/readyz",
    summary="200 once the log has been read to its end and its storage answers, else 503 with the reason",
    **documented(
        Readiness, (503, "Not ready yet: the read progress so far, or why the log cannot be reached", NotReadyBody)
    ),
)
async def readyz(rt: RuntimeDep) -> JSONResponse:
    """Public (probes carry no credentials): error texts, which may name files, only to admin."""
    body = for_principal(rt.health.readiness(), current_principal.get())
    if body["ready"]:
        return JSONResponse(body)
    unreachable = body.get("unreachable")
    if unreachable is None:
        reason = still_reading(body)
    elif unreachable == HIDDEN:  # it names hosts or files
        reason = f"Not ready: the offsets log's storage cannot be reached now (why: {HIDDEN})"
    else:
        reason = f"Not ready: {unreachable}"
    return error_response(NotReady(reason), extra=body)


@router.get(
    "/status",
    summary="Read progress, end offsets and lag, the reader's health, counters, the history archiver, security",
    **documented(StatusBody),
)
async def status(rt: RuntimeDep, request: Request) -> dict[str, Any]:
    """File paths and error texts are shown to the admin scope only (``auth.status``)."""
    archive: HistoryArchive | None = getattr(request.app.state, "history", None)

    # Off the event loop: the archive's warnings list its directory and look at each file.
    health = await asyncio.to_thread(rt.health.status, archive)
    history = health["history"]
    body = {
        **health,
        "security": request.app.state.security.describe(),
        "get_cache": rt.bodies.stats(),
        "large_writes": {"running": rt.bulk_lane.running, "waiting": rt.bulk_lane.waiting},
        # What the operator must know although the daemon is ready (a log that lost acknowledged
        # writes still serves); the security settings' own warnings stay under "security".
        # The archive's warnings, as its own status (``history.warnings``) read them above.
        "warnings": list(history["warnings"]) if history["enabled"] else [],
    }
    return for_principal(body, current_principal.get())


@router.get(
    "/metrics",
    summary="Prometheus metrics (text exposition format; docs/operations.md lists them); admin scope",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition format 0.0.4",
            "content": {CONTENT_TYPE: {"schema": {"type": "string"}}},
        }
    },
)
async def metrics(request: Request) -> Response:
    registry: Metrics = request.app.state.metrics
    # A scrape reads locks the reader thread takes and may ask the broker (sink lag): not on the loop.
    body = await asyncio.to_thread(registry.render)
    return Response(body, media_type=CONTENT_TYPE)
