"""The offsets console: a browser UI at ``/ui``, served by the daemon itself (docs/console.md).

- ``pages.py``: the page and its static files (ours, and D3 from an installed package);
- ``routes.py``: ``/ui/api/*``, the reads the pages need; changes go through the public API;
- ``summary.py``: what a connector row and the offsets table show, from the services' reads;
- ``history_index.py`` + ``archive_tail.py``: the history archive, indexed once and followed;
- ``csrf.py``: the rules that keep a browser from being used against the daemon.
"""

from __future__ import annotations

from fastapi import FastAPI

from emulator.server.ui.pages import install_pages
from emulator.server.ui.routes import router


def install_console(app: FastAPI) -> None:
    app.include_router(router)
    install_pages(app)
