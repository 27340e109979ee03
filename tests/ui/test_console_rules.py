"""The console's server side over plain HTTP: its page and files are served by the daemon with a
policy that allows this origin only, and the browser rules (docs/console.md, "CSRF") refuse writes
a page of another origin, a form or a navigation could make a browser send — while programs, which
send no browser headers, are not affected."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.integration.auth_helpers import audit_line_of, write_security_files

CONSOLE = {"X-Connect-Offsets-Console": "1"}
BODY = {"offsets": [{"partition": {"file": "a"}, "offset": {"position": 1}}]}


def patch(daemon: DaemonProcess, name: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.patch(
        f"{daemon.url}/connectors/{name}/offsets",
        params={"create": "true", "dry_run": "true"},
        json=BODY,
        headers=headers,
        timeout=30,
    )


def test_the_page_and_d3_come_from_the_daemon_with_a_same_origin_policy(embedded_daemon: DaemonProcess) -> None:
    page = httpx.get(f"{embedded_daemon.url}/ui", timeout=30)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    d3 = httpx.get(f"{embedded_daemon.url}/ui/vendor/d3.js", timeout=30)
    assert d3.status_code == 200 and "d3" in d3.text[:2000], "D3 from the installed XStatic-D3 package"
    assert httpx.get(f"{embedded_daemon.url}/ui/static/app.js", timeout=30).status_code == 200


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"Origin": "http://evil.example", **CONSOLE}, "another origin"),
        ({"Origin": "null", **CONSOLE}, "another origin"),
        ({"Sec-Fetch-Site": "cross-site", **CONSOLE}, "cross-site"),
        ({"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "same-origin", **CONSOLE}, "form submission"),
        ({"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}, "X-Connect-Offsets-Console"),
    ],
)
def test_browser_writes_from_elsewhere_or_without_the_console_header_are_refused(
    embedded_daemon: DaemonProcess, headers: dict[str, str], why: str
) -> None:
    name = f"csrf-{uuid.uuid4().hex[:8]}"
    answer = patch(embedded_daemon, name, headers)
    assert answer.status_code == 403, answer.text
    assert answer.headers["X-Connect-Offsets-Error"] == "cross_origin_write"
    assert why in answer.json()["message"]
    # a refusal is audited like any other, under the route it was for (docs/operations.md, "Audit")
    audited = audit_line_of(embedded_daemon, name)
    assert "403 cross_origin_write" in audited and "dry run" in audited, audited
    access = [line for line in embedded_daemon.log_tail().splitlines() if "emulator.access" in line and "403" in line]
    assert any("PATCH /connectors/{connector}/offsets 403 cross_origin_write" in line for line in access), access


def test_the_consoles_own_writes_and_programs_pass_the_browser_rules(embedded_daemon: DaemonProcess) -> None:
    own = {"Origin": embedded_daemon.url, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", **CONSOLE}
    for headers in (own, {}):  # the console's fetch; a program (no browser header at all)
        answer = patch(embedded_daemon, f"csrf-{uuid.uuid4().hex[:8]}", headers)
        assert answer.status_code == 200, answer.text


def test_the_console_lists_connectors_or_the_replays_progress(embedded_daemon: DaemonProcess) -> None:
    name = f"listed-{uuid.uuid4().hex[:8]}"
    created = httpx.patch(
        f"{embedded_daemon.url}/connectors/{name}/offsets", params={"create": "true"}, json=BODY, timeout=30
    )
    assert created.status_code == 200, created.text
    body: dict[str, Any] = httpx.get(f"{embedded_daemon.url}/ui/api/connectors", timeout=30).json()
    assert body["ready"] is True and body["serving"] is True and body["progress"]["ready"] is True
    row = next(r for r in body["connectors"] if r["name"] == name)
    assert (row["kind"], row["partitions"]) == ("source", 1)


@pytest.mark.slow
def test_the_console_never_gets_a_login_challenge_the_browser_would_remember(
    daemon_factory: DaemonFactory, tmp_path: Any
) -> None:
    security = write_security_files(tmp_path / "security")
    daemon = daemon_factory(*security.serve_args())
    plain = httpx.get(f"{daemon.url}/ui/api/session", timeout=30)
    assert plain.status_code == 401 and "www-authenticate" in plain.headers
    console = httpx.get(f"{daemon.url}/ui/api/session", headers=CONSOLE, timeout=30)
    assert console.status_code == 401 and "www-authenticate" not in console.headers
