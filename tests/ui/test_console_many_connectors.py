"""The connectors page draws 100 rows at a time, Previous / Next between them, in a real headless
Chromium on the session's embedded daemon (no sign-in on loopback without credentials settings).

With every row drawn at each 2 s refresh, 10,000 connectors held the browser's main thread ~0.5 s
out of every 2 s (docs/console.md, "Performance").
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.fixtures.daemon import DaemonProcess
from tests.ui.browser import missing, open_page

if TYPE_CHECKING:
    from playwright.sync_api import Browser

SKIP = missing()
pytestmark = [pytest.mark.skipif(SKIP is not None, reason=SKIP or ""), pytest.mark.slow]

CONNECTORS = 250


def test_the_list_is_drawn_a_page_at_a_time_and_keeps_its_page_across_refreshes(
    browser: Browser, embedded_daemon: DaemonProcess
) -> None:
    from playwright.sync_api import expect

    prefix = f"many-{uuid.uuid4().hex[:8]}-"
    names = sorted(f"{prefix}{i:03d}" for i in range(CONNECTORS))
    with httpx.Client(base_url=embedded_daemon.url, timeout=30) as http:
        for name in names:
            body = {"offsets": [{"partition": {"file": "/in"}, "offset": {"position": 1}}]}
            assert http.patch(f"/connectors/{name}/offsets?create=true", json=body).status_code == 200
    foreign: list[str] = []
    page = open_page(browser, embedded_daemon.url, foreign)
    page.goto(embedded_daemon.url + "/ui")
    page.fill("#filter", prefix)
    rows = page.locator("tr[data-connector]")
    pager = page.locator("#connectors-pager")
    expect(pager.locator("span")).to_have_text(f"1–100 of {CONNECTORS}", timeout=20_000)
    expect(rows).to_have_count(100)
    assert rows.first.get_attribute("data-connector") == names[0]

    pager.get_by_role("button", name="Next").click()
    expect(pager.locator("span")).to_have_text(f"101–200 of {CONNECTORS}")
    assert rows.first.get_attribute("data-connector") == names[100]
    time.sleep(2.5)  # one refresh of the list (every 2 s): the page stays where the user put it
    expect(pager.locator("span")).to_have_text(f"101–200 of {CONNECTORS}")
    assert rows.first.get_attribute("data-connector") == names[100]

    pager.get_by_role("button", name="Next").click()
    expect(rows).to_have_count(CONNECTORS - 200)
    expect(pager.get_by_role("button", name="Next")).to_be_disabled()

    page.fill("#filter", f"{prefix}02")  # 020-029: one page, no pager, back to its first row
    expect(rows).to_have_count(10)
    expect(pager.locator("button")).to_have_count(0)
    assert rows.first.get_attribute("data-connector") == f"{prefix}020"
    page.close()
    assert foreign == [], "the console asked another host"
