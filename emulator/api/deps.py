"""What request handlers need from the running daemon, reachable from ``request.app.state``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from emulator.logs.base import OffsetLog
from emulator.offsets_service import OffsetsService
from emulator.view import OffsetView


@dataclass(frozen=True, slots=True)
class Runtime:
    log: OffsetLog
    view: OffsetView
    service: OffsetsService


def runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


RuntimeDep = Annotated[Runtime, Depends(runtime)]
