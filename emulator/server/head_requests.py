"""HEAD on a route that serves GET: GET's status and headers, no body, as Connect's REST layer answers.

JAX-RS answers HEAD for every GET resource method by itself (Jersey runs the GET and drops the
entity); FastAPI's routes answered 405, so a probe or a client checking a connector with HEAD met an
error Connect never gives. The request is run as a GET on a copy of the scope (uvicorn keeps its own
scope's HEAD, so it sends no body and checks no length), and what routing learnt is copied back for
the access log, the metrics and the audit, which run outside this.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_ROUTING = ("route", "endpoint", "path_params", "app_root_path")


class HeadAsGet:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        as_get = {**scope, "method": "GET"}

        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        try:
            await self.app(as_get, receive, without_body)
        finally:
            for key in _ROUTING:
                if key in as_get:
                    scope[key] = as_get[key]
