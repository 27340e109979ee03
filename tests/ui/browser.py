"""Debian's ``chromium`` driven by Playwright from PyPI (never a browser Playwright downloads).

The browser tests skip, saying why, where there is no ``chromium`` on the PATH or no Playwright;
``.ci/run`` installs Chromium first, so CI runs them. Screenshots go to ``artifacts/`` under the
pytest base temp directory (``--basetemp`` when given), kept after the run.
"""

from __future__ import annotations

import importlib.util
import shutil
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import httpx
import pytest

from tests.fixtures.daemon import DaemonProcess

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Route

QUIET = [
    "--no-sandbox",  # the tests run as root in CI containers
    "--disable-background-networking",  # no update checks, no safe-browsing lists, no DNS prefetch
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
]
"""Flags that keep Chromium from talking to anything but the page's own daemon."""


def missing() -> str | None:
    """Why the browser tests cannot run here, or None: a module-level ``skipif``, so that they skip
    before the session's broker and JVM start for them."""
    if shutil.which("chromium") is None:
        return "no `chromium` on the PATH (Debian: apt-get install chromium; .ci/run installs it)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install -e '.[test]')"
    return None


def chromium_path() -> str:
    """Debian's executable (the ``browser`` fixture skips too, for a test without the module mark)."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    return str(shutil.which("chromium"))


def open_page(browser: Browser, origin: str, foreign: list[str], width: int = 1280, height: int = 800) -> Page:
    """A fresh page (its own sessionStorage) whose requests to any other origin are refused and
    recorded in ``foreign``: the console must need no other host."""
    page = browser.new_page(viewport={"width": width, "height": height})
    own = urlsplit(origin).netloc

    def guard(route: Route) -> None:
        url = route.request.url
        if urlsplit(url).netloc == own or url.startswith("data:"):
            route.continue_()
        else:
            foreign.append(url)
            route.abort()

    page.route("**/*", guard)
    return page


def sign_in(page: Page, origin: str, user: str, password: str) -> None:
    page.goto(origin + "/ui")
    page.fill("#user", user)
    page.fill("#password", password)
    page.click("#signin button[type=submit]")
    page.wait_for_selector("#who >> text=Signed in as " + user)


def unique(prefix: str) -> str:
    """A connector name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def write(daemon: DaemonProcess, name: str, offsets: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
    """Offsets written over REST (``?create=true``), as a program would before the page is opened."""
    body = {"offsets": [{"partition": p, "offset": o} for p, o in offsets]}
    answer = httpx.patch(f"{daemon.url}/connectors/{quote(name, safe='')}/offsets?create=true", json=body, timeout=30)
    assert answer.status_code == 200, answer.text


def open_connector(page: Page, daemon: DaemonProcess, name: str) -> None:
    page.goto(f"{daemon.url}/ui#/connector/{quote(name, safe='')}")
    page.wait_for_selector("#offsets-table")
