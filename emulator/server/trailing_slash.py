"""A path's one trailing ``/`` is dropped before anything reads the path, as Connect's REST layer serves it.

JAX-RS matches a resource method's template with an optional trailing ``/`` (Jersey serves
``GET /connectors/c/offsets/`` as ``GET /connectors/c/offsets``). Starlette answered such a path with
a bare 307 redirect instead: no Connect error body, and a write sent elsewhere. The path is changed
in the scope itself, before every other middleware, so the host, origin, media-type and
authorization rules, the router, the access log and the audit line all judge the same path. The
console's and the API docs' pages keep their own rule (``/ui/`` redirects to ``/ui``, whose
relative asset links resolve only there).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

_PAGES = ("/ui", "/docs")


class TrailingSlash:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if len(path) > 1 and path.endswith("/") and not path.startswith(_PAGES):
                scope["path"] = path[:-1]  # in place: the outermost observer reads this scope's route
                raw_path = scope.get("raw_path")
                if isinstance(raw_path, bytes) and len(raw_path) > 1 and raw_path.endswith(b"/"):
                    scope["raw_path"] = raw_path[:-1]
        await self.app(scope, receive, send)
