"""Builds the ASGI app: Connect's routes and ours, with every error in Connect's error body
(``emulator.server.errors``), behind the security guards (``emulator.server.auth``).

Order of what a request meets, outermost first: the Host check, CORS (only with
``--cors-origins``), the browser rules (same origin, no forms; ``ui.csrf``), authentication and the
``Content-Type`` of writes (``auth.guards``), then the route's access rule (``auth.policy.enforce``,
an app-wide dependency, so every API route has one).
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI
from starlette.middleware.cors import CORSMiddleware

from emulator import __version__
from emulator.model.errors import ERROR_HEADER
from emulator.server.auth.config import Security
from emulator.server.auth.guards import Guard, HostGuard
from emulator.server.auth.policy import enforce
from emulator.server.body_budget import LargeBodies
from emulator.server.deps import Runtime
from emulator.server.deps import runtime as runtime_dep
from emulator.server.docs_pages import install_docs
from emulator.server.errors import install_error_handlers
from emulator.server.head_requests import HeadAsGet
from emulator.server.hot_routes import HotRoutes, hot_routes_of
from emulator.server.observability import Observability, install_observability
from emulator.server.openapi import install_openapi
from emulator.server.routes import claims as routes_claims
from emulator.server.routes import health as routes_health
from emulator.server.routes import history as routes_history
from emulator.server.routes import offsets as routes_offsets
from emulator.server.routes import records as routes_records
from emulator.server.trailing_slash import TrailingSlash
from emulator.server.ui import install_console
from emulator.server.ui.csrf import ConsoleGuard


def create_app(
    runtime: Runtime, security: Security | None = None, observability: Observability | None = None
) -> FastAPI:
    """``security`` None: no authentication and no Host check (in-process apps and tests; the
    daemon's wiring always passes the settings' ``Security``)."""
    security = security or Security()
    app = FastAPI(
        title="connect-offsets emulator",
        version=__version__,
        description=(
            "Kafka Connect's KIP-875 offsets REST API for any Connect version, over Connect's own "
            "offsets topic (or an embedded log). Error bodies are Connect's: {error_code, message}; "
            "the X-Connect-Offsets-Error header names the error's kind for programs."
        ),
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(enforce)],
        # The daemon's telemetry is its log and Prometheus metrics (docs/operations.md). FastAPI's
        # native OpenTelemetry would otherwise look up the global providers on every request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.runtime = runtime
    app.state.security = security
    app.state.authenticator = security.authenticator
    app.include_router(routes_offsets.router)
    app.include_router(routes_health.router)
    app.include_router(routes_history.router)
    app.include_router(routes_records.router)
    app.include_router(routes_claims.router)
    install_docs(app)
    install_console(app)
    install_error_handlers(app)
    install_openapi(app)
    _declare_authentication(app, security)
    # Innermost of ours (added first), so after authentication: see emulator.server.hot_routes.
    healthz = [r for r in routes_health.router.routes if getattr(r, "endpoint", None) is routes_health.healthz]
    hot = hot_routes_of([*routes_offsets.router.routes, *healthz], app.router.dependencies, runtime_dep)
    app.add_middleware(HotRoutes, routes=hot, exception_handlers=app.exception_handlers)
    app.add_middleware(LargeBodies)  # after authentication: no share of the budget without credentials
    app.add_middleware(Guard, authenticator=security.authenticator)
    app.add_middleware(ConsoleGuard, allowed_origins=security.cors_origins)  # outside Guard: sees its 401s
    if security.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(security.cors_origins),
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=[ERROR_HEADER, "WWW-Authenticate"],
        )
    if security.allowed_hosts is not None:
        app.add_middleware(HostGuard, allowed=security.allowed_hosts, ip_literals=security.ip_literal_hosts)
    app.add_middleware(TrailingSlash)  # outside every rule that reads the path: all judge the same one
    app.add_middleware(HeadAsGet)  # HEAD as Connect answers it: GET's status and headers
    # Access log, audit line and metrics: added after every other middleware, so outermost, so
    # that it times and records every answer, refusals by authentication included.
    observability = observability or Observability()
    install_observability(app, runtime, observability)
    app.state.sink_lag = observability.sink_lag  # the console's connectors page shows sinks' lag too
    return app


def _declare_authentication(app: FastAPI, security: Security) -> None:
    """The schemes in force, in the OpenAPI document, so ``/docs`` offers to authenticate."""
    schemes = {
        "basic": {"type": "http", "scheme": "basic"},
        "token": {"type": "http", "scheme": "bearer"},
    }
    offered = {m: schemes[m] for m in security.authenticator.mechanisms() if m in schemes}
    if not offered:
        return
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            document.setdefault("components", {})["securitySchemes"] = offered
            document["security"] = [{name: []} for name in offered]
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
