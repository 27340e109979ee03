"""Signing in and staying signed in, in a real headless Chromium, on a daemon of this module's own
with a credentials file, a tokens file and scopes (``tests/integration/auth_helpers.py``): a token
alone signs in, a refresh the daemon refuses says so, and the connectors named ``.`` and ``..``
(names no other test could share) open and change like any other (docs/console.md).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.fixtures.daemon import DaemonProcess, free_port
from tests.integration.auth_helpers import PASSWORDS, SecurityFiles, basic, write_security_files
from tests.ui.browser import missing, open_page, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

SKIP = missing()
pytestmark = [pytest.mark.skipif(SKIP is not None, reason=SKIP or ""), pytest.mark.slow]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProcess, SecurityFiles]]:
    directory = tmp_path_factory.mktemp("console-sign-in")
    security = write_security_files(directory / "security")
    args = [*security.serve_args(), "--data-dir", str(directory / "data")]
    daemon = DaemonProcess(args, free_port(), directory / "daemon.log").start()
    try:
        yield daemon, security
    finally:
        daemon.stop()


@pytest.fixture
def page(browser: Browser, secured: tuple[DaemonProcess, SecurityFiles]) -> Iterator[Page]:
    foreign: list[str] = []
    opened = open_page(browser, secured[0].url, foreign)
    yield opened
    opened.close()
    assert foreign == [], "the console asked another host"


def reload_credentials(daemon: DaemonProcess) -> None:
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGHUP)  # the daemon reloads its credential files at once


def test_a_token_alone_signs_in_and_an_empty_form_says_what_is_missing(
    page: Page, secured: tuple[DaemonProcess, SecurityFiles]
) -> None:
    from playwright.sync_api import expect

    daemon, security = secured
    page.goto(daemon.url + "/ui")
    page.click("#signin button[type=submit]")
    expect(page.locator("#signin [role=alert]")).to_have_text("Type a user and its password, or a token.")

    page.fill("#token", security.tokens["writer"])
    page.click("#signin button[type=submit]")
    expect(page.locator("#who")).to_contain_text("Signed in as writer")


def test_a_refresh_refused_after_the_token_is_revoked_says_why_until_refreshes_succeed_again(
    page: Page, secured: tuple[DaemonProcess, SecurityFiles]
) -> None:
    from playwright.sync_api import expect

    daemon, security = secured
    page.goto(daemon.url + "/ui")
    page.fill("#token", security.tokens["writer"])
    page.click("#signin button[type=submit]")
    expect(page.locator("#who")).to_contain_text("Signed in as writer")

    tokens = security.tokens_file.read_text()
    revoked = "".join(line for line in tokens.splitlines(keepends=True) if "writer" not in line)
    try:
        security.tokens_file.write_text(revoked)
        reload_credentials(daemon)
        failure = page.locator("#progress [role=status]")
        expect(failure).to_contain_text("The daemon refused the refresh (401", timeout=10_000)
        expect(failure.get_by_role("button", name="Sign in again")).to_be_visible()
        expect(page.locator("#main h2")).to_have_text("Connectors")  # what was read before stays
    finally:
        security.tokens_file.write_text(tokens)
        reload_credentials(daemon)
    expect(page.locator("#progress [role=status]")).to_have_count(0, timeout=10_000)


@pytest.mark.parametrize("name", [".", ".."])
def test_the_connectors_named_dot_and_dot_dot_open_and_change_like_any_other(
    page: Page, secured: tuple[DaemonProcess, SecurityFiles], name: str
) -> None:
    from playwright.sync_api import expect

    daemon, _ = secured
    segment = name.replace(".", "%2E")  # as a program sends them (emulator/client/http.py)
    url = f"{daemon.url}/connectors/{segment}/offsets"
    body = {"offsets": [{"partition": {"file": "/in"}, "offset": {"position": 1}}]}
    assert httpx.patch(url, params={"create": "true"}, json=body, auth=basic("alice"), timeout=30).status_code == 200

    sign_in(page, daemon.url, "alice", PASSWORDS["alice"])
    page.goto(f"{daemon.url}/ui#/connector/{name}")
    expect(page.locator("#offsets-table tbody tr")).to_have_count(1)
    expect(page.locator("#main h2 .name")).to_have_text(name)
    page.wait_for_selector("#chart svg path.point")  # its history, asked for by name too

    page.get_by_label('Edit {"file":"/in"}').click()
    page.fill("#offset-editor", '{"position": 2}')
    page.click("#preview")
    page.click("#apply")
    expect(page.locator("#offsets-table")).to_contain_text('{"position":2}')
    offsets = httpx.get(url, auth=basic("alice"), timeout=30).json()["offsets"]
    assert [(json.dumps(o["partition"]), o["offset"]) for o in offsets] == [('{"file": "/in"}', {"position": 2})]
