"""One middleware that sees every request end: the access log, the request metrics and the audit line.

A pure ASGI middleware (not Starlette's ``BaseHTTPMiddleware``, which runs the app in another task)
so that the principal set while the request runs and the route the router matched are both visible
here. Registered last, it is the outermost one: it times and logs every answer, refusals by
authentication included.

Access line (logger ``emulator.access``, INFO unless ``--no-access-log``): method, route *template*
(``/connectors/{connector}/offsets``, never the raw path: the path carries connector names and would
make every line unique), status, duration and principal. Client mistakes (4xx) appear here, at INFO,
and nowhere at ERROR: they are the client's to fix, not the operator's.

Who is asking: authentication (when on) sets ``emulator.model.principal.current_principal``; this
middleware first sets the anonymous principal with the client's address, so the address is known
to the audit trail with or without authentication. It reads the principal when the answer starts
(while an inner middleware that set it still holds it) and, failing that, when the request ends.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from urllib.parse import parse_qs

from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emulator.model.audit import AuditEvent, current_audit
from emulator.model.errors import ERROR_HEADER
from emulator.model.foreground import FOREGROUND
from emulator.model.principal import Principal, current_principal
from emulator.server.audit import READ_METHODS, Auditor, is_dry_run, operation_of
from emulator.server.log_format import fields
from emulator.server.metrics import UNMATCHED_ROUTE, Metrics

log = logging.getLogger("emulator.access")

_ERROR_HEADER = ERROR_HEADER.lower().encode("latin-1")


def remote_address(scope: Scope) -> str | None:
    """``host:port`` of the client as the server saw it (``[v6]:port`` for IPv6)."""
    client = scope.get("client")
    if not client:
        return None
    host, port = client[0], client[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


class RequestObserver:
    """Times each HTTP request, then writes its access line, counts it, and audits it if it modifies."""

    def __init__(self, app: ASGIApp, *, auditor: Auditor, metrics: Metrics | None, access_log: bool = True) -> None:
        self.app = app
        self._auditor = auditor
        self._metrics = metrics
        self._access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method: str = scope["method"]
        principal_token = None
        if current_principal.get().remote is None:  # nobody (no authentication) named the client yet
            principal_token = current_principal.set(Principal(remote=remote_address(scope)))
        event = None if method in READ_METHODS else AuditEvent(operation="", connector=None, dry_run=False)
        audit_token = current_audit.set(event)
        answer = _Answer()

        async def observed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer.started(message, current_principal.get())
            await send(message)

        FOREGROUND.started()
        try:
            await self.app(scope, receive, observed_send)
        finally:
            seconds = time.perf_counter() - started
            principal = answer.principal or current_principal.get()
            status = answer.status or 500  # an exception before the answer: the server answers 500
            self._finish(scope, method, status, answer.error_kind, principal, event, seconds)
            current_audit.reset(audit_token)
            if principal_token is not None:
                current_principal.reset(principal_token)
            FOREGROUND.finished()

    def _finish(
        self,
        scope: Scope,
        method: str,
        status: int,
        error_kind: str | None,
        principal: Principal,
        event: AuditEvent | None,
        seconds: float,
    ) -> None:
        matched = scope.get("route")
        route = route_label(scope)
        try:
            if self._access_log and log.isEnabledFor(logging.INFO):  # built only to be written
                log.info(
                    "%s %s %d%s %.1f ms %s@%s",
                    method,
                    route,
                    status,
                    f" {error_kind}" if error_kind else "",
                    seconds * 1000,
                    principal.name,
                    principal.remote or "-",
                    extra=fields(
                        event="access",
                        method=method,
                        route=route,
                        status=status,
                        duration_ms=round(seconds * 1000, 3),
                        principal=principal.name,
                        remote=principal.remote,
                        error_kind=error_kind,
                    ),
                )
            if self._metrics is not None:
                self._metrics.observe_request(method, route, status, seconds)
            if event is not None and method in getattr(matched, "methods", ()):
                # A route matched by path only answered 405: nothing was modified, nothing to audit.
                path_params = scope.get("path_params") or {}
                query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
                event.operation = operation_of(method, route)
                event.connector = path_params.get("connector")
                event.dry_run = is_dry_run(query)
                if "claim_epoch" in query and "claim_epoch" not in event.details:
                    event.details["claim_epoch"] = query["claim_epoch"][-1]
                self._auditor.finish(event, principal, status, error_kind, seconds)
        except Exception:  # observing a request must never turn its answer into an error
            log.exception("could not log or count the request %s %s", method, route)


@dataclasses.dataclass(slots=True)
class _Answer:
    """What the app answered, captured as the answer starts."""

    status: int | None = None
    error_kind: str | None = None
    principal: Principal | None = None

    def started(self, message: Message, principal: Principal) -> None:
        self.status = int(message["status"])
        self.principal = principal
        for name, value in message.get("headers", ()):
            if name.lower() == _ERROR_HEADER:
                self.error_kind = value.decode("latin-1")


def route_label(scope: Scope) -> str:
    """The template of the route that answered: FastAPI's routes name themselves in the scope;
    Starlette's plain routes and mounts (the console's page, its static files, the API docs) leave
    only their endpoint there, so it is looked up among the app's routes (a mount is labelled with
    ``/{path}``). ``unmatched`` only where no route matched."""
    path = getattr(scope.get("route"), "path", None)
    if path:
        return str(path)
    endpoint = scope.get("endpoint")
    if endpoint is not None:
        for route in getattr(scope.get("app"), "routes", ()):
            if isinstance(route, Mount) and route.app is endpoint:
                return f"{route.path}/{{path}}"
            if isinstance(route, Route) and route.endpoint is endpoint:
                return route.path
    return UNMATCHED_ROUTE
