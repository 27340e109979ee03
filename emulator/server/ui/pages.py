"""The console's page and its files: our own HTML, CSS and JavaScript from this package, D3 from the
installed ``XStatic-D3`` package (BSD-3-Clause, 340 kB unminified, no dependencies: the smallest
maintained wheel that ships a charting toolkit's JavaScript). Nothing is fetched from another host:
the page's Content-Security-Policy allows scripts, styles and requests to this origin only.

The page and its files hold no data and are public (like ``/docs``); the data comes from the API
and ``/ui/api``, which need the principal's scopes.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.types import Scope

STATIC = "/ui/static"
VENDOR = "/ui/vendor"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
"""On the page and its files: no other origin, no framing (clickjacking), revalidate on every load."""


def static_dir() -> Path:
    return Path(str(files("emulator.server.ui") / "static"))


def d3_dir() -> Path:
    """``xstatic.pkg.d3``'s data directory (``d3.js``), found without importing the untyped package."""
    return Path(str(files("xstatic.pkg.d3") / "data"))


class _Files(StaticFiles):
    """Static files with the console's security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def install_pages(app: FastAPI) -> None:
    app.mount(STATIC, _Files(directory=static_dir()), name="ui-static")
    app.mount(VENDOR, _Files(directory=d3_dir()), name="ui-vendor")
    page = static_dir() / "index.html"

    async def console(_: Request) -> Response:
        return FileResponse(page, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)

    async def slash(request: Request) -> Response:
        root = request.scope.get("root_path", "")
        return RedirectResponse(f"{root}/ui", status_code=307)

    app.add_route("/ui", console, include_in_schema=False)
    app.add_route("/ui/", slash, include_in_schema=False)
