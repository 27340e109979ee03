"""What request handlers need from the running daemon, reachable from ``request.app.state``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from emulator.server.runtime import Runtime

__all__ = ["Runtime", "RuntimeDep", "runtime"]


async def runtime(request: Request) -> Runtime:
    """``async`` on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, a hop per
    request for what is an attribute read."""
    rt: Runtime = request.app.state.runtime
    return rt


RuntimeDep = Annotated[Runtime, Depends(runtime)]
