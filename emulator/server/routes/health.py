"""Liveness, readiness (Connect's read-to-end rule) and counters, separate from Connect's routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from emulator.server.deps import Runtime, RuntimeDep

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Alive")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="200 once the log has been read to its end, else 503 with progress")
async def readyz(rt: RuntimeDep) -> JSONResponse:
    body = _progress(rt)
    if body["ready"]:
        return JSONResponse(body)
    return JSONResponse({"error_code": 503, "message": "Reading the offsets log to its end", **body}, status_code=503)


@router.get("/status", summary="Log location, read progress and record counters")
async def status(rt: RuntimeDep) -> dict[str, Any]:
    return {
        **_progress(rt),
        "log": rt.log.description,
        "view": rt.view.stats.as_dict(),
        "live_keys": rt.view.live_keys(),
    }


def _progress(rt: Runtime) -> dict[str, Any]:
    progress = rt.log.progress()
    # With a Connect cluster, its config and status topics must be read to their end as well.
    cluster = None if rt.cluster is None else {"connect_cluster": rt.cluster.readiness()}
    return {
        "ready": progress.caught_up and (cluster is None or bool(cluster["connect_cluster"]["ready"])),
        "error": progress.error,
        "records_read": progress.records_read,
        "partitions_at_end": progress.partitions_done,
        "partitions": len(progress.end_offsets),
        "positions": {str(p): v for p, v in sorted(progress.positions.items())},
        "end_offsets": {str(p): v for p, v in sorted(progress.end_offsets.items())},
        **(cluster or {}),
    }
