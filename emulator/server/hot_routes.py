"""The offsets routes, served without FastAPI's per-request routing and dependency solving.

Every Connect-side commit and every offsets read goes through ``GET``/``PATCH``/``DELETE
/connectors/{c}/offsets`` (and ``GET /connectors``); ``/healthz`` is served the same way so that it
stays the cheapest request (the benchmarks' HTTP floor). For those, FastAPI's machinery between our
middleware and the handler (matching the path against every route, solving the app's, the router's
and the handler's dependencies per request, its exception middleware) cost about a third of the
daemon's CPU per request (benchmarks/RESULTS.md, round 10). ``HotRoutes`` sits innermost among our
middleware, after authentication, and serves those routes itself, doing what FastAPI would:

- it matches the route's own path pattern and method, and leaves everything else, including a
  wrong method, a trailing slash and any ``root_path`` deployment, to FastAPI;
- it records the match in the scope as FastAPI does (``route``, ``endpoint``, ``path_params``:
  the access log, metrics and the access policy read them);
- it calls the app's and the route's dependencies (each takes only the request: checked when the
  middleware is built), then the handler with its path parameters and, if it takes them, the
  request and the runtime;
- an exception goes to the app's exception handler for its class, as FastAPI's exception
  middleware would send it (``emulator.server.errors``); one without a handler propagates to the
  server error middleware, as it would from FastAPI.

The routes stay declared on their FastAPI router, which still builds the OpenAPI document and
serves any request this middleware leaves alone. ``tests/integration/test_hot_routes.py`` sends the
same requests, successes and every kind of refusal, to two apps, one with and one without this
middleware, and compares the answers and the metrics they leave.

``_handled`` repeats Starlette's lookup of an exception's handler (by status for an
``HTTPException``, then along the exception's class hierarchy): Starlette keeps that lookup private.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HotRoute", "HotRoutes", "hot_routes_of"]

Dependency = Callable[[Request], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class HotRoute:
    route: APIRoute
    dependencies: tuple[Dependency, ...]
    """The app's, then the route's (its router's included), in FastAPI's order; results unused."""
    takes_request: bool
    runtime: Dependency | None
    """The handler's ``rt`` (``emulator.server.deps.runtime``), if it takes one."""


def hot_routes_of(routes: Sequence[Any], app_dependencies: Sequence[Any], runtime: Dependency) -> list[HotRoute]:
    """The routes of a router (``APIRouter.routes``) to serve directly; each calls the app's
    dependencies, then its own (which include its router's), as FastAPI does. Refuses, at startup,
    what this middleware could not serve as FastAPI does: a handler parameter other than its path
    parameters, ``request`` and ``rt``, a handler that returns anything but a ``Response`` (FastAPI
    would serialize it), or a dependency that takes more than the request."""
    hot: list[HotRoute] = []
    for route in routes:
        if not isinstance(route, APIRoute):
            raise TypeError(f"HotRoutes: {route!r} is not a FastAPI route")
        signature = inspect.signature(route.endpoint)
        taken = set(signature.parameters)
        extra = taken - {*route.param_convertors, "request", "rt"}
        answers = signature.return_annotation in (Response, "Response")
        if extra or not answers or not inspect.iscoroutinefunction(route.endpoint):
            raise TypeError(
                f"HotRoutes: {route.path}'s handler must be `async`, return a `Response` and take only its path "
                f"parameters, `request` and `rt` (read query parameters with RouteQuery); it takes {sorted(taken)}"
            )
        calls = tuple(_request_only(depends.dependency) for depends in [*app_dependencies, *route.dependencies])
        hot.append(HotRoute(route, calls, "request" in taken, runtime if "rt" in taken else None))
    return hot


def _request_only(call: Any) -> Dependency:
    parameters = list(inspect.signature(call).parameters.values())
    if not inspect.iscoroutinefunction(call) or [p.annotation for p in parameters] not in ([Request], ["Request"]):
        raise TypeError(f"HotRoutes: dependency {call.__qualname__} must be `async def f(request: Request)`")
    dependency: Dependency = call
    return dependency


class HotRoutes:
    def __init__(self, app: ASGIApp, routes: Sequence[HotRoute], exception_handlers: Mapping[Any, Any]) -> None:
        self.app = app
        self._by_method: dict[str, list[HotRoute]] = {}
        for hot in routes:
            for method in hot.route.methods or ():
                self._by_method.setdefault(method, []).append(hot)
        self._handlers = exception_handlers
        """The app's own dict, read at each exception (handlers installed later are seen)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            for hot in self._by_method.get(scope["method"], ()):
                match = hot.route.path_regex.match(scope["path"])
                if match is not None:
                    await self._serve(hot, match.groupdict(), scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _serve(self, hot: HotRoute, raw: dict[str, str], scope: Scope, receive: Receive, send: Send) -> None:
        route = hot.route
        params = {name: route.param_convertors[name].convert(value) for name, value in raw.items()}
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = params
        request = Request(scope, receive, send)
        try:
            for dependency in hot.dependencies:
                await dependency(request)
            arguments: dict[str, Any] = dict(params)
            if hot.takes_request:
                arguments["request"] = request
            if hot.runtime is not None:
                arguments["rt"] = await hot.runtime(request)
            response: Response = await route.endpoint(**arguments)
        except Exception as exc:
            response = await self._handled(request, exc)
        await response(scope, receive, send)

    async def _handled(self, request: Request, exc: Exception) -> Response:
        """What Starlette's exception middleware answers for ``exc`` (FastAPI hands it the app's
        handlers except the one for ``Exception``, which the server error middleware uses)."""
        handler = None
        if isinstance(exc, HTTPException) and exc.status_code != 500:
            handler = self._handlers.get(exc.status_code)
        if handler is None:
            handler = next(
                (self._handlers[cls] for cls in type(exc).__mro__ if cls is not Exception and cls in self._handlers),
                None,
            )
        if handler is None:
            raise exc
        answer = handler(request, exc)
        response: Response = await answer if inspect.isawaitable(answer) else answer
        return response
