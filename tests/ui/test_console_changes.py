"""The change dialogs (Alter, Reset, Roll back) and the messages around them in a real headless
Chromium on the session's embedded daemon: numbers keep their JSON type, what is applied is what
was previewed and still planned, and a lost answer or an unreachable daemon is said as such
(docs/console.md, "Changes", "Signing in").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import pytest

from tests.fixtures.daemon import DaemonProcess
from tests.ui.browser import missing, open_connector, open_page, unique, write

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Route

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


def test_the_dialogs_name_the_connector_as_text_with_its_spaces(page: Page, embedded_daemon: DaemonProcess) -> None:
    from playwright.sync_api import expect

    name = f"dialog  {uuid.uuid4().hex[:8]}"  # two spaces: shown as two
    for position in (1, 2):
        write(embedded_daemon, name, [({"file": "/in"}, {"position": position})])
    open_connector(page, embedded_daemon, name)
    intro = page.locator("#dialog-content > p").first
    cancel = page.locator("#dialog-actions button", has_text="Cancel")

    page.get_by_label('Edit {"file":"/in"}').click()
    expect(intro).to_be_visible()
    assert intro.inner_text() == (
        f"Change one partition of “{name}”. The daemon checks the new offset as the API does; "
        "nothing is written before you apply."
    )
    cancel.click()
    page.click("#reset")
    expect(intro).to_be_visible()
    assert intro.inner_text() == f"Delete every offset of “{name}”: its tasks start from scratch next time."
    cancel.click()
    page.locator("#history .history-table button", has_text="Roll back to here").last.click()
    expect(intro).to_be_visible()
    assert intro.inner_text().startswith(f"Put every offset of “{name}” back as it was at "), intro.inner_text()


def test_json_and_names_keep_their_repeated_spaces_on_screen(page: Page, embedded_daemon: DaemonProcess) -> None:
    from playwright.sync_api import expect

    name = unique("spaces")
    write(embedded_daemon, name, [({"file": "a b"}, {"note": "x y"}), ({"file": "a   b"}, {"note": "x   y"})])
    open_connector(page, embedded_daemon, name)
    rows = page.locator("#offsets-table tbody tr")
    expect(rows).to_have_count(2)
    # innerText: what is on screen, where white-space collapses unless kept.
    shown = sorted(rows.evaluate_all("rows => rows.map((r) => [r.cells[0].innerText, r.cells[1].innerText])"))
    assert shown == [['{"file":"a   b"}', '{"note":"x   y"}'], ['{"file":"a b"}', '{"note":"x y"}']]

    page.locator("""button[aria-label='Edit {"file":"a   b"}']""").click()  # accessible names collapse spaces
    page.click("#preview")
    expect(page.locator("#plan table.plan")).to_be_visible()
    assert "a   b" in page.locator("#plan table.plan tbody td").first.inner_text()


def test_an_offset_edited_after_its_preview_must_be_previewed_again_before_apply(
    page: Page, embedded_daemon: DaemonProcess
) -> None:
    from playwright.sync_api import expect

    name = unique("stale-preview")
    write(embedded_daemon, name, [({"file": "/in"}, {"position": 1})])
    open_connector(page, embedded_daemon, name)
    page.get_by_label('Edit {"file":"/in"}').click()
    page.fill("#offset-editor", '{"position": 500}')
    page.click("#preview")
    expect(page.locator("#apply")).to_be_enabled()

    page.fill("#offset-editor", '{"position": 777}')
    expect(page.locator("#apply")).to_be_disabled()
    expect(page.locator("#stale")).to_contain_text("preview it again")
    page.fill("#offset-editor", '{"position": 500}')  # back to what was previewed: Apply may apply it
    expect(page.locator("#apply")).to_be_enabled()
    page.fill("#offset-editor", '{"position": 777}')
    page.click("#preview")
    expect(page.locator("#plan .diff")).to_contain_text('{"position":777}')
    expect(page.locator("#stale")).to_be_hidden()
    page.click("#apply")
    expect(offset_cell(page)).to_have_text('{"position":777}')
    assert [r["offset"] for r in listed(embedded_daemon, name)] == [{"position": 777}]


def test_a_reset_whose_plan_grew_since_its_preview_shows_the_new_plan_and_asks_again(
    page: Page, embedded_daemon: DaemonProcess
) -> None:
    from playwright.sync_api import expect

    name = unique("reset-race")
    write(embedded_daemon, name, [({"file": "/a"}, {"position": 1})])
    open_connector(page, embedded_daemon, name)
    page.click("#reset")
    page.click("#preview")
    caption = page.locator("#plan table.plan caption")
    expect(caption).to_have_text("1 record(s) would be written")

    write(embedded_daemon, name, [({"file": "/b"}, {"position": 1})])  # another writer, meanwhile
    page.fill("#confirm-name", name)
    page.click("#apply")
    expect(page.locator("#plan-changed")).to_contain_text("The plan changed since your preview")
    expect(caption).to_have_text("2 record(s) would be written")
    expect(page.locator("#apply")).to_be_disabled()  # the name is typed again for the new plan
    assert len(listed(embedded_daemon, name)) == 2  # nothing deleted yet

    page.fill("#confirm-name", name)
    page.click("#apply")
    expect(page.locator("#dialog")).not_to_be_visible()
    assert listed(embedded_daemon, name) == []


def test_an_apply_whose_answer_is_lost_says_it_may_have_been_applied_and_reads_the_offsets_again(
    page: Page, embedded_daemon: DaemonProcess
) -> None:
    from playwright.sync_api import expect

    name = unique("lost")
    write(embedded_daemon, name, [({"file": "/in"}, {"position": 1})])
    open_connector(page, embedded_daemon, name)

    def lose_the_answer(route: Route) -> None:
        """The write reaches the daemon; its answer never reaches the page (the connection resets)."""
        if route.request.method == "PATCH" and "dry_run" not in route.request.url:
            route.fetch()
            route.abort("connectionreset")
        else:
            route.fallback()

    page.route("**/offsets*", lose_the_answer)
    page.get_by_label('Edit {"file":"/in"}').click()
    page.fill("#offset-editor", '{"position": 42}')
    page.click("#preview")
    page.click("#apply")
    alert = page.locator("#plan [role=alert]")
    expect(alert).to_contain_text("The daemon's answer was lost")
    expect(alert).to_contain_text("may or may not have been applied")
    expect(alert).to_contain_text("do not simply try again")
    expect(page.locator("#apply")).to_have_count(0)  # a fresh preview first, not a blind retry
    expect(page.locator("#reread")).to_contain_text("The offsets were read again")
    expect(offset_cell(page)).to_have_text('{"position":42}')  # the write landed; the table says so
    assert [r["offset"] for r in listed(embedded_daemon, name)] == [{"position": 42}]


def test_an_unreachable_daemon_is_said_so_on_load_and_in_a_dry_run(page: Page, embedded_daemon: DaemonProcess) -> None:
    from playwright.sync_api import expect

    name = unique("down")
    write(embedded_daemon, name, [({"file": "/in"}, {"position": 1})])
    open_connector(page, embedded_daemon, name)
    page.route("**/connectors/**", lambda route: route.abort("connectionrefused"))
    page.get_by_label('Edit {"file":"/in"}').click()
    page.click("#preview")
    alert = page.locator("#plan [role=alert]")
    expect(alert).to_contain_text("The daemon could not be reached")
    expect(alert).to_contain_text("Nothing was changed")

    page.route("**/ui/api/**", lambda route: route.abort("connectionrefused"))
    page.goto("about:blank")
    page.goto(f"{embedded_daemon.url}/ui")
    shown = page.locator("#main [role=alert]")
    expect(shown).to_contain_text("The daemon could not be reached")
    assert "answered" not in shown.inner_text()


def test_the_time_of_the_last_good_read_stays_while_refreshes_fail(page: Page, embedded_daemon: DaemonProcess) -> None:
    from playwright.sync_api import expect

    name = unique("stale-time")
    write(embedded_daemon, name, [({"file": "/in"}, {"position": 1})])
    open_connector(page, embedded_daemon, name)
    page.route("**/ui/api/**", lambda route: route.abort("connectionrefused"))  # the daemon went away
    failure = page.locator("#poll-failure")
    expect(failure).to_be_visible()
    first = failure.inner_text()
    for _ in range(2):  # two more failed refreshes, 2 s apart: the time they failed moves, the page's does not
        with page.expect_event("requestfailed", lambda r: "/ui/api/" in r.url, timeout=10_000):
            pass
    expect(failure).to_contain_text("Retrying")
    assert failure.inner_text() == first
    assert first.startswith("The daemon could not be reached (Failed to fetch); the page shows what it read at "), first


def test_advice_after_a_refusal_keeps_the_names_spaces_and_spells_its_path_for_curl(
    page: Page, embedded_daemon: DaemonProcess
) -> None:
    """The advice under a refusal names paths to type (releasing a claim, stopping in Connect): a name
    with spaces was put in them raw, and the message shown beside them lost its repeated spaces."""
    from playwright.sync_api import expect

    name = unique("held  twice")
    write(embedded_daemon, name, [({"file": "/in"}, {"position": 1})])
    claimed = httpx.post(
        f"{embedded_daemon.url}/connectors/{quote(name, safe='')}/claim", json={"owner": "someone"}, timeout=30
    )
    assert claimed.status_code == 200, claimed.text
    open_connector(page, embedded_daemon, name)
    page.get_by_label('Edit {"file":"/in"}').click()
    page.fill("#offset-editor", '{"position": 2}')
    page.click("#preview")

    alert = page.locator("#dialog .error")
    expect(alert).to_contain_text(f"DELETE /connectors/{quote(name, safe='')}/claim?epoch=N")
    assert name in alert.locator(".error-message").inner_text(), "the daemon's message, its spaces kept"
