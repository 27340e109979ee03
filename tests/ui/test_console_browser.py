"""The console in a real headless Chromium (Debian's), on a daemon following a topic that Apache
Kafka's own ``OffsetStorageWriter`` wrote, with authentication and scopes on.

What a user does: sign in, see every connector Java wrote, open one, see one chart point per history
row, alter an offset (dry run first, then apply) and find the change in the table and the chart
without a reload, in the API, and in what Java's ``OffsetStorageReaderImpl`` reads. A rollback to a
change picked in the history waits for the connector's name to be typed. A read-only user
sees no edit control, and the daemon refuses its write anyway. The page never asks another host.
Screenshots: ``<basetemp>/artifacts/console-*.png``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonProcess, free_port
from tests.integration.auth_helpers import PASSWORDS, basic, write_security_files
from tests.integration.connect_helpers import JAVA_ONE_RECORD_PER_BATCH, eventually, from_java, kafka_daemon_args
from tests.oracle import JavaOracle
from tests.oracle import typed as T
from tests.ui.browser import missing, open_page, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Browser

SKIP = missing()
pytestmark = [
    pytest.mark.skipif(SKIP is not None, reason=SKIP or ""),
    pytest.mark.kafka,
    pytest.mark.jvm,
    pytest.mark.slow,
]

PARTITIONS = 3
CONNECTORS = 3
FILE_A = T.jmap([("file", "/data/a.txt")])
FILE_B = T.jmap([("file", "/data/b.txt")])


@dataclass
class Console:
    daemon: DaemonProcess
    topic: str
    names: list[str]
    foreign: list[str] = field(default_factory=list)
    """Requests the page tried to send to another host (refused by the test's route guard)."""


@pytest.fixture(scope="module")
def console(
    kafka_broker: TansuBroker, java_oracle: JavaOracle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Console]:
    """Java writes CONNECTORS connectors (``orders-…``: bob may read them, only alice may write);
    the first one gets a second commit, so its ``a`` partition has two history rows."""
    topic = kafka_broker.unique_topic("console")
    uid = topic.rsplit("-", 1)[-1]
    names = [f"orders-ui{uid}-{i}" for i in range(CONNECTORS)]
    for i, name in enumerate(names):
        java_oracle.offsets_write(
            kafka_broker.bootstrap,
            topic,
            name,
            [(FILE_A, T.jmap({"position": T.long(100 + i)})), (FILE_B, T.jmap({"position": T.long(7)}))],
            partitions=PARTITIONS,
            extra_config=JAVA_ONE_RECORD_PER_BATCH,
        )
    java_oracle.offsets_write(
        kafka_broker.bootstrap,
        topic,
        names[0],
        [(FILE_A, T.jmap({"position": T.long(150)}))],
        partitions=PARTITIONS,
        extra_config=JAVA_ONE_RECORD_PER_BATCH,
    )
    directory = tmp_path_factory.mktemp("console")
    security = write_security_files(directory / "security")
    args = [*kafka_daemon_args(kafka_broker.bootstrap, topic, PARTITIONS), "--data-dir", str(directory / "data")]
    daemon = DaemonProcess([*args, *security.serve_args()], free_port(), directory / "daemon.log").start()
    try:
        yield Console(daemon, topic, names)
    finally:
        daemon.stop()


def api_offsets(console: Console, name: str) -> dict[str, Any]:
    response = httpx.get(f"{console.daemon.url}/connectors/{name}/offsets", auth=basic("alice"), timeout=30)
    assert response.status_code == 200, response.text
    return {json.dumps(o["partition"], sort_keys=True): o["offset"] for o in response.json()["offsets"]}


def history_rows(console: Console, name: str, partition: dict[str, Any]) -> int:
    response = httpx.get(
        f"{console.daemon.url}/connectors/{name}/offsets/history",
        params={"partition": json.dumps(partition)},
        auth=basic("alice"),
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return len(response.json()["changes"])


def test_an_admin_sees_what_java_wrote_and_alters_it_with_a_dry_run_first(
    browser: Browser, console: Console, java_oracle: JavaOracle, kafka_broker: TansuBroker, artifacts: Path
) -> None:
    # Waits poll with Playwright's locators: the page's CSP (no eval) refuses wait_for_function's strings.
    from playwright.sync_api import expect  # here: the module imports without Playwright, to skip

    origin = console.daemon.url
    page = open_page(browser, origin, console.foreign)
    sign_in(page, origin, "alice", PASSWORDS["alice"])

    # The list: every connector Java wrote, with its partition count.
    page.fill("#filter", console.names[0].rsplit("-", 1)[0])
    expect(page.locator("tr[data-connector]")).to_have_count(CONNECTORS, timeout=20_000)
    shown = page.locator("tr[data-connector]")
    assert sorted(shown.nth(i).get_attribute("data-connector") or "" for i in range(CONNECTORS)) == console.names
    assert [shown.nth(i).locator("td.num").first.inner_text() for i in range(CONNECTORS)] == ["2"] * CONNECTORS
    # Once the history archive is indexed, the poll fills in who made the last change (Java: Connect).
    written_by_java = page.locator("tr[data-connector]", has_text="Connect (external)")
    expect(written_by_java).to_have_count(CONNECTORS, timeout=20_000)
    page.screenshot(path=str(artifacts / "console-connectors.png"))

    # The connector page: one chart point per history row of the partition.
    name, a = console.names[0], {"file": "/data/a.txt"}
    page.click(f"tr[data-connector='{name}'] a")
    page.wait_for_selector("#offsets-table")
    page.get_by_label('History of {"file":"/data/a.txt"}').click()
    page.wait_for_selector("#chart svg")
    rows = history_rows(console, name, a)
    assert rows == 2, "Java committed partition a twice"
    expect(page.locator("#chart path.point")).to_have_count(rows)
    page.screenshot(path=str(artifacts / "console-connector.png"), full_page=True)

    # Alter: the dry run shows the plan and writes nothing; Apply writes.
    page.get_by_label('Edit {"file":"/data/a.txt"}').click()
    page.fill("#offset-editor", '{"position": 4242}')
    page.click("#preview")
    page.wait_for_selector("#apply")
    assert page.locator("#plan").inner_text().count("4242") >= 1
    page.screenshot(path=str(artifacts / "console-alter-dry-run.png"))
    assert api_offsets(console, name)[json.dumps(a)] == {"position": 150}, "the dry run wrote nothing"
    page.click("#apply")

    # Table and chart show it without a reload; the API and Java read it.
    page.wait_for_selector("#offsets-table >> text=4242")
    expect(page.locator("#chart path.point")).to_have_count(rows + 1, timeout=20_000)
    assert history_rows(console, name, a) == rows + 1
    assert api_offsets(console, name)[json.dumps(a)] == {"position": 4242}
    offsets, _ = java_oracle.offsets_read(
        kafka_broker.bootstrap, console.topic, name, [FILE_A, FILE_B], num_partitions=PARTITIONS
    )
    assert [from_java(o) for o in offsets] == [{"position": 4242}, {"position": 7}]
    page.screenshot(path=str(artifacts / "console-after-alter.png"), full_page=True)

    # Roll back to Java's second commit, picked in the changes table: destructive, so the name is typed.
    page.locator("#history button", has_text="Roll back to here").nth(1).click()
    page.click("#preview")
    page.wait_for_selector("#confirm-name")
    assert page.locator("#apply").is_disabled(), "a destructive change waits for the connector's name"
    page.fill("#confirm-name", name)
    page.click("#apply")
    page.wait_for_selector("#offsets-table >> text=150")
    assert api_offsets(console, name)[json.dumps(a)] == {"position": 150}
    page.close()
    assert console.foreign == [], "the console asked another host"


def test_a_read_only_user_sees_no_edit_controls_and_the_daemon_refuses_its_writes(
    browser: Browser, console: Console, artifacts: Path
) -> None:
    origin, name = console.daemon.url, console.names[1]
    page = open_page(browser, origin, console.foreign, width=600, height=800)  # a narrow window too
    sign_in(page, origin, "bob", PASSWORDS["bob"])
    page.wait_for_selector("#read-only-badge")
    page.goto(f"{origin}/ui#/connector/{name}")
    page.wait_for_selector("#offsets-table")
    assert page.locator("#read-only").is_visible()
    for control in ("button:has-text('Edit')", "#reset", "button:has-text('Roll back')"):
        assert page.locator(control).count() == 0, f"{control} shown to a read-only user"
    page.screenshot(path=str(artifacts / "console-read-only.png"), full_page=True)

    # The page's own call path (its credentials, the console header, JSON) is still refused.
    status = page.evaluate(
        """async (name) => {
            const body = JSON.stringify({offsets: [{partition: {file: "/data/a.txt"}, offset: {position: 1}}]});
            const r = await fetch(`/connectors/${name}/offsets`, {method: "PATCH", body, headers: {
                "Content-Type": "application/json", "X-Connect-Offsets-Console": "1",
                Authorization: sessionStorage.getItem("connect-offsets.authorization")}});
            return [r.status, r.headers.get("X-Connect-Offsets-Error")];
        }""",
        name,
    )
    assert status == [403, "forbidden"]
    seen = eventually(lambda: api_offsets(console, name), lambda o: bool(o))
    assert seen[json.dumps({"file": "/data/a.txt"})] == {"position": 101}
    page.close()
    assert console.foreign == [], "the console asked another host"


def test_during_a_broker_stall_the_console_keeps_the_offsets_and_says_why(
    browser: Browser, console: Console, kafka_broker: TansuBroker, artifacts: Path
) -> None:
    """``GET`` keeps answering from memory while the broker is away; the console shows the same, under
    the reason, and drops the reason once the broker answers again (it used to hide every connector
    behind "Waiting for the replay to finish…")."""
    from playwright.sync_api import expect

    origin = console.daemon.url
    page = open_page(browser, origin, console.foreign)
    sign_in(page, origin, "bob", PASSWORDS["bob"])
    page.fill("#filter", console.names[0].rsplit("-", 1)[0])
    rows = page.locator("tr[data-connector]")
    expect(rows).to_have_count(CONNECTORS, timeout=20_000)
    with kafka_broker.paused():
        # bob is not an admin: the broker's address and error are withheld from him, as in /readyz
        expect(page.locator("#unreachable")).to_have_text(
            "The log cannot take writes now. The offsets below are as last read; changes will fail until it recovers. "
            "Why: (shown to the admin scope only)",
            timeout=15_000,
        )
        expect(rows).to_have_count(CONNECTORS)
        page.screenshot(path=str(artifacts / "console-broker-stalled.png"))
    expect(page.locator("#unreachable")).to_have_count(0, timeout=20_000)
    expect(rows).to_have_count(CONNECTORS)
    page.close()
    assert console.foreign == [], "the console asked another host"
