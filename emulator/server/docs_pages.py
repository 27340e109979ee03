"""``/docs`` and ``/redoc`` from assets shipped in an installed package, never from a CDN.

FastAPI's own pages load Swagger UI, ReDoc and Google fonts from public CDNs: broken offline, and
whoever controls those hosts controls script running next to the daemon's API in an operator's
browser. The ``fastapi-offline`` package ships the same bundles; they are served from
``/docs-assets``, the favicon too, and Swagger UI's online validator badge is turned off.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import HTMLResponse

ASSETS = "/docs-assets"


def assets_dir() -> Path:
    return Path(str(files("fastapi_offline") / "static"))


def install_docs(app: FastAPI) -> None:
    """The pages, relative to the app's root path (so they work behind a reverse proxy's prefix)."""
    app.mount(ASSETS, StaticFiles(directory=assets_dir()), name="docs-assets")
    title = app.title
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = "/docs/oauth2-redirect"

    async def swagger(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{title} - Swagger UI",
            oauth2_redirect_url=root + redirect_url,
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},
        )

    async def redirect(_: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS}/favicon.png",
            with_google_fonts=False,
        )

    app.add_route("/docs", swagger, include_in_schema=False)
    app.add_route(redirect_url, redirect, include_in_schema=False)
    app.add_route("/redoc", redoc, include_in_schema=False)
