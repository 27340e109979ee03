"""The checks every request passes before any route runs, as plain ASGI middleware (no extra task,
so ``current_principal`` set here is the one the routes, audit and access log see).

``HostGuard`` (outermost): the ``Host`` header must name a host of ``--allowed-hosts``. A web page
can make a browser send requests to ``127.0.0.1`` (or any address the browser reaches) through a
host name it controls (DNS rebinding); the browser then sends that name, not the daemon's, so
checking it closes the gap. Without ``--allowed-hosts``, a daemon without authentication that
listens beyond loopback accepts IP addresses and this machine's own names only
(``emulator.server.auth.config.allowed_hosts``).

``Guard``: authentication (``Authenticator``; credentials that do not hold are a 401 here) and
``Content-Type``. POST, PUT and PATCH, and a DELETE with a body, must say ``application/json``:
a web page can send ``text/plain`` (or nothing) to any origin without a CORS preflight, and such a
request must never write, claim or roll back (``POST …/rollback?to=0`` has no body at all). Every
client of this project sends the header; Connect's clients do for their JSON bodies.

CORS (Starlette's middleware, only with ``--cors-origins``) sits between the two, so a preflight
is answered before authentication, as browsers require.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from emulator.model.errors import HostNotAllowed, InvalidRequest, OffsetsError, UnsupportedMediaType
from emulator.model.principal import current_principal
from emulator.server.auth.authenticate import Authenticator
from emulator.server.auth.hosts import HostRule
from emulator.server.errors import error_response

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH"})
JSON = "application/json"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def refuse_before_routing(error: OffsetsError, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer ``error`` from a middleware, the request's route named first (access log, metrics, audit)."""
    _name_route(scope)
    await error_response(error)(scope, receive, send)


def _name_route(scope: Scope) -> None:
    """Say which route a request refused here was for, as the router would have (a full match, else
    one that takes the path but not the method), so that the access log and the metrics name its
    template and a refused write still gets its audit line. A path no route takes stays unnamed."""
    router = getattr(scope.get("app"), "router", None)
    if router is not None and "route" not in scope:
        found = _matching(router.routes, scope)
        if found is not None:
            _, route, child = found
            scope.update(child, route=route)


def _matching(routes: Sequence[BaseRoute], scope: Scope) -> tuple[Match, BaseRoute, Scope] | None:
    """The first route that fully matches, else the first that partially does, else None."""
    partial = None
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.NONE:
            continue
        inner = getattr(route, "original_router", None)  # FastAPI keeps an included router as one route
        found = (inner and _matching(inner.routes, scope)) or (match, route, child)
        if found is not None and found[0] is Match.FULL:
            return found
        partial = partial or found
    return partial


class HostGuard:
    """Serves only the ``Host`` headers of ``allowed`` (``hosts.HostRule``); ``*`` allows any.
    ``ip_literals``: also any IP address (a web page can only rebind a name it controls). A
    request with more than one ``Host`` line, or one that is not ``host[:port]``, is refused
    whatever is allowed (RFC 9112, section 3.2), as the metrics port refuses it."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str], ip_literals: bool = False) -> None:
        self.app = app
        self.rule = HostRule.of(allowed, ip_literals)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            hosts = [bytes(v).decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"]
            why = self.rule.refusal_of_all(hosts, scope.get("http_version", "1.1"))
            if why is not None:
                await refuse_before_routing(HostNotAllowed(why), scope, receive, send)
                return
        await self.app(scope, receive, send)


class Guard:
    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        remote = f"{client[0]}:{client[1]}" if client else None
        tls = scope.get("extensions", {}).get("tls", {})
        try:
            principal = self.authenticator.principal(
                _header(scope, b"authorization"), tls.get("client_cert_name"), remote
            )
        except OffsetsError as error:
            await refuse_before_routing(error, scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal  # for middleware outside this one
        token = current_principal.set(principal)
        try:
            refusal = _media_type_refusal(scope) or _upgrade_refusal(scope)
            if refusal is not None:
                await refuse_before_routing(refusal, scope, receive, send)
            else:
                await self.app(scope, receive, send)
        finally:
            current_principal.reset(token)


def _served(scope: Scope) -> bool:
    """Does a route of the app take this method on this path? Only then is the request a write."""
    app = scope.get("app")
    router = getattr(app, "router", None)
    if router is None:
        return True  # not mounted in a Starlette app: judge every write
    found = _matching(router.routes, scope)
    return found is not None and found[0] is Match.FULL


def _has_body(scope: Scope) -> bool:
    """Whether the request says it has a body (a length above 0, or a chunked one)."""
    length = (_header(scope, b"content-length") or "0").strip()
    return length not in ("", "0") or _header(scope, b"transfer-encoding") is not None


def _upgrade_refusal(scope: Scope) -> InvalidRequest | None:
    """A request with a body that also asks to upgrade the connection (``Upgrade: h2c``, which ``curl
    --http2`` sends on ``http://``; a websocket): uvicorn's parser stops at such a request's head and
    the app got it without its body, so a PATCH was refused for "no offsets" and a claim for "no
    body". Refused saying why; one without a body (a GET) is served as HTTP/1.1."""
    upgrade = _header(scope, b"upgrade")
    if upgrade is None:
        return None
    has_body = _has_body(scope)
    if not has_body:
        return None
    return InvalidRequest(
        f"The request asks to upgrade the connection (Upgrade: {upgrade[:40]}); the daemon speaks HTTP/1.1 "
        "only and cannot read the body of such a request, so nothing was done. Send it without Upgrade "
        "(curl: --http1.1)"
    )


def _media_type_refusal(scope: Scope) -> UnsupportedMediaType | None:
    method = scope["method"]
    has_body = _has_body(scope)
    if method not in WRITE_METHODS and not (method == "DELETE" and has_body):
        return None
    content_type = (_header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
    if content_type == JSON:
        return None
    # Only now, for a write that is refused otherwise: matching every route costs more than the rest.
    if not _served(scope):
        return None  # no route takes this method here: the router's 404 or 405 is the honest answer
    shown = content_type or "none"
    if method == "DELETE":  # refused only with a body: one without needs no Content-Type
        return UnsupportedMediaType(f"DELETE with a body needs Content-Type: {JSON} (got {shown})")
    return UnsupportedMediaType(f"{method} needs Content-Type: {JSON} (got {shown}), even without a body")
