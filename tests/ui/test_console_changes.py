"""The change dialogs (Alter, Reset, Roll back) and the messages around them in a real headless
Chromium on the session's embedded daemon: numbers keep their JSON type, what is applied is what
was previewed and still planned, and a lost answer or an unreachable daemon is said as such
(docs/console.md, "Changes", "Signing in").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import pytest

from tests.fixtures.daemon import DaemonProcess
from tests.ui.browser import missing, open_page
from tests.ui.test_console_connector_page import open_connector, unique

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

SKIP = missing()
pytestmark = [pytest.mark.skipif(SKIP is not None, reason=SKIP or ""), pytest.mark.slow]


def write_text(daemon: DaemonProcess, name: str, body: str) -> None:
    """A PATCH of this JSON text, its numbers spelled as written here (Python's json writes 1e16 as 1e+16)."""
    answer = httpx.patch(
        f"{daemon.url}/connectors/{quote(name, safe='')}/offsets?create=true",
        content=body,
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text


def listed(daemon: DaemonProcess, name: str) -> list[dict[str, Any]]:
    """GET …/offsets as Python reads it: a float stays a float, an int an int."""
    answer = httpx.get(f"{daemon.url}/connectors/{quote(name, safe='')}/offsets", timeout=30)
    assert answer.status_code == 200, answer.text
    return list(json.loads(answer.text)["offsets"])


def typed(value: Any) -> Any:
    """A JSON value with each number's type beside it: 2.0 and 2 compare equal in Python, not here."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (type(value).__name__, value)
    return value


@pytest.fixture
def page(browser: Browser, embedded_daemon: DaemonProcess) -> Iterator[Page]:
    foreign: list[str] = []
    opened = open_page(browser, embedded_daemon.url, foreign)
    yield opened
    opened.close()
    assert foreign == [], "the console asked another host"


def offset_cell(page: Page, row: int = 0) -> Any:
    return page.locator("#offsets-table tbody tr").nth(row).locator("td").nth(1)


def test_doubles_with_integer_values_stay_doubles_when_another_field_is_edited(
    page: Page, embedded_daemon: DaemonProcess
) -> None:
    from playwright.sync_api import expect

    name = unique("doubles")
    write_text(
        embedded_daemon,
        name,
        '{"offsets":[{"partition":{"file":"/in"},"offset":{"position":1,"ratio":2.0,"ts":1e16}}]}',
    )
    open_connector(page, embedded_daemon, name)
    expect(offset_cell(page)).to_contain_text('"ratio":2.0')

    page.get_by_label('Edit {"file":"/in"}').click()
    editor = page.locator("#offset-editor").input_value()
    assert '"ratio": 2.0' in editor, editor
    assert "10000000000000000" not in editor, editor  # 1e16 as written, not as a long's digits
    page.fill("#offset-editor", editor.replace('"position": 1,', '"position": 5,'))
    page.click("#preview")
    expect(page.locator("#plan .diff")).to_contain_text('"ratio":2.0')
    page.click("#apply")
    expect(offset_cell(page)).to_contain_text('"position":5')

    [row] = listed(embedded_daemon, name)
    assert typed(row["offset"]) == {"position": ("int", 5), "ratio": ("float", 2.0), "ts": ("float", 1e16)}
    expect(offset_cell(page)).to_contain_text('"ratio":2.0')


def test_editing_a_partition_whose_key_holds_a_double_alters_that_partition(
    page: Page, embedded_daemon: DaemonProcess
) -> None:
    from playwright.sync_api import expect

    name = unique("double-key")
    write_text(embedded_daemon, name, '{"offsets":[{"partition":{"k":1.0},"offset":{"position":1}}]}')
    open_connector(page, embedded_daemon, name)
    page.locator("#offsets-table button", has_text="Edit").click()
    page.fill("#offset-editor", '{"position": 2}')
    page.click("#preview")
    expect(page.locator("#plan")).to_contain_text("existing key")
    page.click("#apply")
    expect(offset_cell(page)).to_contain_text('{"position":2}')

    rows = listed(embedded_daemon, name)
    assert [(typed(r["partition"]), r["offset"]) for r in rows] == [({"k": ("float", 1.0)}, {"position": 2})]
