"""The browser and where its screenshots go (helpers: ``tests/ui/browser.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.ui.browser import QUIET, chromium_path

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()  # skips, saying why, without chromium or Playwright
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=QUIET)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<basetemp>/artifacts``: the screenshots of the browser tests."""
    directory = tmp_path_factory.getbasetemp() / "artifacts"
    directory.mkdir(exist_ok=True)
    return directory
