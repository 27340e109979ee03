"""Builds the ASGI app: Connect's routes and ours, with every error in Connect's error body
(``emulator.server.errors``)."""

from __future__ import annotations

from fastapi import FastAPI

from emulator import __version__
from emulator.server.deps import Runtime
from emulator.server.errors import install_error_handlers
from emulator.server.observability import Observability, install_observability
from emulator.server.openapi import install_openapi
from emulator.server.routes import claims as routes_claims
from emulator.server.routes import health as routes_health
from emulator.server.routes import history as routes_history
from emulator.server.routes import offsets as routes_offsets
from emulator.server.routes import records as routes_records


def create_app(runtime: Runtime, observability: Observability | None = None) -> FastAPI:
    app = FastAPI(
        title="connect-offsets emulator",
        version=__version__,
        description=(
            "Kafka Connect's KIP-875 offsets REST API for any Connect version, over Connect's own "
            "offsets topic (or an embedded log). Error bodies are Connect's: {error_code, message}; "
            "the X-Connect-Offsets-Error header names the error's kind for programs."
        ),
    )
    app.state.runtime = runtime
    app.include_router(routes_offsets.router)
    app.include_router(routes_health.router)
    app.include_router(routes_history.router)
    app.include_router(routes_records.router)
    app.include_router(routes_claims.router)
    install_error_handlers(app)
    install_openapi(app)
    # Access log, audit line and metrics: added after every other middleware, so outermost, so
    # that it times and records every answer, refusals by authentication included.
    install_observability(app, runtime, observability or Observability())
    return app
