"""Builds the ASGI app and maps every error to Connect's ``{"error_code":…,"message":…}`` body."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from emulator import __version__
from emulator.model.errors import EmulatorError
from emulator.server.deps import Runtime
from emulator.server.routes import claims as routes_claims
from emulator.server.routes import health as routes_health
from emulator.server.routes import history as routes_history
from emulator.server.routes import offsets as routes_offsets
from emulator.server.routes import records as routes_records

log = logging.getLogger(__name__)


def create_app(runtime: Runtime) -> FastAPI:
    app = FastAPI(
        title="connect-offsets emulator",
        version=__version__,
        description=(
            "Kafka Connect's KIP-875 offsets REST API for any Connect version, over Connect's own "
            "offsets topic (or an embedded log). Error bodies are Connect's: {error_code, message}."
        ),
    )
    app.state.runtime = runtime
    app.include_router(routes_offsets.router)
    app.include_router(routes_health.router)
    app.include_router(routes_history.router)
    app.include_router(routes_records.router)
    app.include_router(routes_claims.router)

    @app.exception_handler(EmulatorError)
    async def _emulator_error(_: Request, exc: EmulatorError) -> JSONResponse:
        if exc.status >= 500:
            log.error("request failed: %s", exc.message)
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return JSONResponse({"error_code": exc.status_code, "message": message}, status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error_code": 400, "message": str(exc.errors())}, status_code=400)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return JSONResponse({"error_code": 500, "message": f"{type(exc).__name__}: {exc}"}, status_code=500)

    return app
