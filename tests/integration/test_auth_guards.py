"""Safe by default: what a daemon refuses before any route runs, and what it refuses to start with.

A daemon on loopback without authentication is the common case on a developer's machine, and
the one a web page in that developer's browser can reach: a ``text/plain`` POST needs no CORS
preflight, and DNS rebinding lets a page's own host name point at 127.0.0.1. Both are refused here
against the session's unauthenticated daemon, and nothing is written.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.fixtures.daemon import DaemonFactory, DaemonProcess, free_port
from tests.integration.auth_helpers import PASSWORDS, audit_line_of, basic, cli, write_security_files


def seeded(daemon: DaemonProcess) -> str:
    name = f"guard-{uuid.uuid4().hex[:8]}"
    response = httpx.patch(
        f"{daemon.url}/connectors/{name}/offsets?create=true",
        json={"offsets": [{"partition": {"f": "x"}, "offset": {"pos": 7}}]},
    )
    assert response.status_code == 200, response.text
    return name


def offsets(daemon: DaemonProcess, name: str) -> object:
    return httpx.get(f"{daemon.url}/connectors/{name}/offsets").json()


@pytest.mark.parametrize(
    ("method", "path", "headers", "body"),
    [
        ("POST", "/offsets/rollback?to=0", {}, None),  # no body at all, as a form or fetch() can send it
        ("POST", "/offsets/rollback?to=0", {"Content-Type": "text/plain"}, b""),
        ("POST", "/claim", {"Content-Type": "text/plain"}, b'{"owner": "a web page"}'),
        (
            "PATCH",
            "/offsets",
            {"Content-Type": "text/plain"},
            b'{"offsets": [{"partition": {"f": "x"}, "offset": null}]}',
        ),
        ("DELETE", "/offsets", {"Content-Type": "application/x-www-form-urlencoded"}, b"a=b"),
    ],
)
def test_a_write_that_is_not_json_is_refused_and_writes_nothing(
    embedded_daemon: DaemonProcess, method: str, path: str, headers: dict[str, str], body: bytes | None
) -> None:
    name = seeded(embedded_daemon)
    before = offsets(embedded_daemon, name)
    url = f"{embedded_daemon.url}/connectors/{name}{path}"
    response = httpx.request(method, url, headers=headers, content=body)
    assert response.status_code == 415, response.text
    assert response.headers["X-Connect-Offsets-Error"] == "unsupported_media_type"
    assert response.json()["error_code"] == 415 and "application/json" in response.json()["message"]
    assert offsets(embedded_daemon, name) == before
    claim = httpx.get(f"{embedded_daemon.url}/connectors/{name}/claim")
    assert claim.status_code == 404, "no claim was taken"


def test_records_import_that_is_not_json_is_refused(embedded_daemon: DaemonProcess) -> None:
    response = httpx.post(f"{embedded_daemon.url}/offsets/records", content=b'{"records": []}')
    assert response.status_code == 415
    ok = httpx.post(f"{embedded_daemon.url}/offsets/records?dry_run=true", json={"records": []})
    assert ok.status_code == 200, "the same request as JSON passes"


def test_a_delete_without_a_body_needs_no_content_type(embedded_daemon: DaemonProcess) -> None:
    """Connect's DELETE has no body, and kcctl sends none: nothing to declare."""
    name = seeded(embedded_daemon)
    assert httpx.delete(f"{embedded_daemon.url}/connectors/{name}/offsets?dry_run=true").status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8081", "127.0.0.1.nip.io", "[::2]:80"])
def test_a_foreign_host_header_is_refused_on_loopback(embedded_daemon: DaemonProcess, host: str) -> None:
    response = httpx.get(f"{embedded_daemon.url}/connectors", headers={"Host": host})
    assert response.status_code == 400
    assert response.headers["X-Connect-Offsets-Error"] == "host_not_allowed"
    assert "--allowed-hosts" in response.json()["message"]


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "LOCALHOST:8081", "[::1]:8081"])
def test_loopback_host_headers_are_served_on_loopback(embedded_daemon: DaemonProcess, host: str) -> None:
    assert httpx.get(f"{embedded_daemon.url}/connectors", headers={"Host": host}).status_code == 200


def raw_get(url: str, request: bytes) -> tuple[str, bytes]:
    """The status line and body of one request sent as given (httpx always adds a Host header)."""
    parsed = httpx.URL(url)
    with socket.create_connection((parsed.host, parsed.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0].decode(), body


@pytest.mark.parametrize("version", ["1.1", "1.0"])
def test_a_request_without_a_host_header_is_refused(embedded_daemon: DaemonProcess, version: str) -> None:
    """HTTP/1.1 requires Host (RFC 9112); HTTP/1.0 may omit it, but leaving it out must not skip the check."""
    status, body = raw_get(embedded_daemon.url, f"GET /connectors HTTP/{version}\r\nConnection: close\r\n\r\n".encode())
    assert status.split()[1] == "400", (status, body)
    assert b"Host header" in body
    with_host = f"GET /connectors HTTP/{version}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
    assert raw_get(embedded_daemon.url, with_host)[0].split()[1] == "200"


def write_from(daemon: DaemonProcess, claimed_address: str) -> str:
    name = f"xff-{uuid.uuid4().hex[:8]}"
    response = httpx.patch(
        f"{daemon.url}/connectors/{name}/offsets?create=true",
        json={"offsets": [{"partition": {"f": "x"}, "offset": {"pos": 1}}]},
        headers={"X-Forwarded-For": claimed_address},
    )
    assert response.status_code == 200, response.text
    return audit_line_of(daemon, name)


def test_a_local_client_cannot_put_another_address_in_the_audit_line(embedded_daemon: DaemonProcess) -> None:
    """No forwarded header is believed unless --forwarded-allow-ips names the proxy (uvicorn's
    default believed it from 127.0.0.1: any local client wrote any address, kept in the history)."""
    line = write_from(embedded_daemon, "203.0.113.66")
    assert "from 127.0.0.1:" in line and "203.0.113.66" not in line, line


@pytest.mark.slow
def test_forwarded_for_is_believed_from_the_proxies_named(daemon_factory: DaemonFactory) -> None:
    daemon = daemon_factory("--forwarded-allow-ips", "127.0.0.1")
    line = write_from(daemon, "203.0.113.66")
    assert "from 203.0.113.66:" in line, line


@pytest.mark.slow
def test_no_cors_unless_origins_are_given(embedded_daemon: DaemonProcess, daemon_factory: DaemonFactory) -> None:
    preflight = {"Origin": "https://ui.example", "Access-Control-Request-Method": "PATCH"}
    refused = httpx.options(f"{embedded_daemon.url}/connectors/x/offsets", headers=preflight)
    assert "access-control-allow-origin" not in refused.headers
    plain = httpx.get(f"{embedded_daemon.url}/connectors", headers={"Origin": "https://ui.example"})
    assert "access-control-allow-origin" not in plain.headers

    daemon = daemon_factory("--cors-origins", "https://ui.example")
    allowed = httpx.options(f"{daemon.url}/connectors/x/offsets", headers=preflight)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://ui.example"
    other = httpx.options(f"{daemon.url}/connectors/x/offsets", headers={**preflight, "Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


@pytest.mark.slow
def test_listening_beyond_loopback_without_authentication_refuses_to_start(tmp_path: Path) -> None:
    result = cli("serve", "--host", "0.0.0.0", "--port", str(free_port()), "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --host 0.0.0.0 listens beyond loopback without authentication")
    assert "--insecure-no-auth" in last
    env = cli("serve", "--port", str(free_port()), env={"CONNECT_OFFSETS_HOST": "0.0.0.0"})
    assert env.returncode == 2 and "beyond loopback" in env.stderr, "the container's variable too"
    assert env.stderr.rstrip().endswith("(--host came from CONNECT_OFFSETS_HOST)"), "an operator who never typed --host"
    assert "came from" not in last, "a flag given is not said to come from the environment"


@pytest.mark.slow
def test_insecure_no_auth_starts_with_a_warning_in_the_log_and_in_status(daemon_factory: DaemonFactory) -> None:
    daemon = daemon_factory("--host", "0.0.0.0", "--insecure-no-auth")
    status = httpx.get(f"{daemon.url}/status").json()
    assert status["security"]["insecure_no_auth"] is True
    assert status["security"]["warnings"] and "without authentication" in status["security"]["warnings"][0]
    assert re.search(r"WARNING .*--insecure-no-auth", daemon.log_tail())
    assert re.search(r"WARNING .*DNS rebinding.*--allowed-hosts", daemon.log_tail())
    other_host = httpx.get(f"{daemon.url}/connectors", headers={"Host": "daemon.internal"})
    assert other_host.status_code == 400, "without authentication, only addresses and this machine's names"


@pytest.mark.slow
def test_an_empty_credentials_file_refuses_to_start_where_connect_would_let_everyone_in(tmp_path: Path) -> None:
    empty = tmp_path / "users.properties"
    empty.write_text("# nobody yet\n\n")
    result = cli("serve", "--port", str(free_port()), "--data-dir", str(tmp_path), "--credentials-file", str(empty))
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: credentials file {empty} lists no user") and "every request" in last


@pytest.mark.slow
def test_a_user_without_a_password_is_let_in_as_connect_would_and_warned_about(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """The QA's reproduction: a credentials file of the one line ``carol`` starts, and ``carol``
    with an empty password is admitted (admin, no scopes file), as Connect admits her. The log
    names her at start; ``/status`` (and so ``connect-offsets status``) says one user has an empty
    password without naming her to whoever reads it (security QA MEDIUM: nothing was said)."""
    bare = tmp_path / "bare"
    bare.write_text("carol\n")
    os.chmod(bare, 0o600)
    daemon = daemon_factory("--credentials-file", str(bare))
    assert httpx.get(f"{daemon.url}/connectors", auth=("carol", "")).status_code == 200
    assert re.search(r"WARNING .*credentials file .*'carol' have an empty password.* as admin", daemon.log_tail())
    warnings = httpx.get(f"{daemon.url}/status", auth=("carol", "")).json()["security"]["warnings"]
    assert [w for w in warnings if "1 user(s) (named in the daemon's log) have an empty password" in w], warnings
    assert "carol" not in " ".join(warnings)


@pytest.mark.slow
def test_credentials_reload_on_change_and_on_sighup_and_an_emptied_file_revokes_every_user(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    files = write_security_files(tmp_path / "security")
    daemon = daemon_factory(*files.serve_args())
    newcomer = httpx.BasicAuth("dave", "dave-pw")
    assert httpx.get(f"{daemon.url}/status", auth=newcomer).status_code == 401

    with files.credentials.open("a") as f:
        f.write("dave=dave-pw\n")
    assert wait_for_status(daemon, newcomer, 200), "a changed file is picked up without a restart"

    # dave and bob removed while another line has a typo: the typo is skipped, the removals apply
    files.credentials.write_text(f"alice={PASSWORDS['alice']}\nmallory=\\uZZZZ\n")
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "credentials reloaded without" not in daemon.log_tail() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "SIGHUP: reloading credentials" in daemon.log_tail()
    assert re.search(rf"ERROR .*{re.escape(str(files.credentials))}:2: malformed", daemon.log_tail())
    assert httpx.get(f"{daemon.url}/status", auth=newcomer).status_code == 401, "what the file lists is in force"
    assert httpx.get(f"{daemon.url}/status", auth=basic("bob")).status_code == 401
    credentials = httpx.get(f"{daemon.url}/status", auth=basic("alice")).json()["security"]["credentials"]
    assert credentials["skipped"] == 1 and ":2: malformed" in credentials["last_error"]
    token = {"Authorization": f"Bearer {files.tokens['writer']}"}
    hidden = httpx.get(f"{daemon.url}/status", headers=token).json()["security"]["credentials"]["last_error"]
    assert hidden == "(shown to the admin scope only)", "the error names a file"

    files.credentials.write_text("\n")  # emptied: no Basic user at all (the tokens still work)
    assert wait_for_status(daemon, basic("alice"), 401), "an emptied file revokes every user"
    assert httpx.get(f"{daemon.url}/status", headers=token).status_code == 200


def wait_for_status(daemon: DaemonProcess, auth: httpx.BasicAuth, status: int, timeout_s: float = 15) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if httpx.get(f"{daemon.url}/status", auth=auth).status_code == status:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_connects_credentials_file_works_unchanged_with_a_connect_client(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """The header a Connect client sends for ``alice`` (user name up to the first ':')."""
    files = write_security_files(tmp_path / "security")
    daemon = daemon_factory(*files.serve_args())
    assert httpx.get(f"{daemon.url}/connectors", auth=basic("alice")).status_code == 200
    assert ":" in PASSWORDS["alice"], "the password itself holds a colon"
    for header in ("Basic !!!", "Basic " + "OmFsaWNl", "Digest abc", "Bearer cot_unknown"):
        refused = httpx.get(f"{daemon.url}/healthz", headers={"Authorization": header})
        assert refused.status_code == 401, header


@pytest.mark.slow
def test_token_mint_prints_a_token_and_the_line_that_admits_it(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    result = cli("token", "mint", "ci-job", "--scope", "read:orders-*", "--scope", "claim:orders-*")
    assert result.returncode == 0, result.stderr
    token = re.search(r"^\s+(cot_\S+)$", result.stdout, re.MULTILINE)
    line = re.search(r"^\s+(ci-job:sha256\$[0-9a-f]{64}:read:orders-\* claim:orders-\*)$", result.stdout, re.MULTILINE)
    assert token and line, result.stdout
    assert token.group(1) not in line.group(1), "only the hash is stored"
    (tmp_path / "tokens").write_text(line.group(1) + "\n")
    daemon = daemon_factory("--tokens-file", str(tmp_path / "tokens"))
    headers = {"Authorization": f"Bearer {token.group(1)}"}
    assert httpx.get(f"{daemon.url}/connectors/orders-9/claim", headers=headers).status_code == 404
    assert httpx.get(f"{daemon.url}/connectors/billing/claim", headers=headers).status_code == 403
    bad = cli("token", "mint", "x", "--scope", "delete:*")
    assert bad.returncode == 2 and "unknown scope" in bad.stderr


def test_docs_pages_reference_no_external_url(embedded_daemon: DaemonProcess) -> None:
    for page in ("/docs", "/redoc"):
        html = httpx.get(embedded_daemon.url + page).text
        referenced = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", html) + re.findall(r"url:\s*'([^']+)'", html)
        assert referenced, html
        for url in referenced:
            assert url.startswith("/") and not url.startswith("//"), f"{page} references {url}"
            assert httpx.get(embedded_daemon.url + url).status_code == 200, url
        assert "https://" not in html and "http://" not in html, f"{page} names an external URL"


@pytest.mark.slow
def test_docs_render_in_a_browser_without_any_network(embedded_daemon: DaemonProcess, tmp_path: Path) -> None:
    """Headless Chromium with every host but the daemon's unresolvable: Swagger UI must still draw
    the API (its operations appear), and the page's requests in the browser's network log must all
    go to the daemon."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium on PATH (apt-get install chromium; see docs/testing.md)")
    net_log = tmp_path / "net.json"
    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
    result = subprocess.run(
        [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            f"--log-net-log={net_log}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            f"{embedded_daemon.url}/docs",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert "opblock" in result.stdout, f"Swagger UI did not render:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    assert "/connectors/{connector}/offsets" in result.stdout
    page = [
        url
        for annotation, url in re.findall(
            r'"traffic_annotation":(\d+),"url":"([^"]+)"', net_log.read_text("utf-8", "replace")
        )
        if int(annotation) in PAGE_TRAFFIC
    ]
    assert f"{embedded_daemon.url}/docs-assets/swagger-ui-bundle.js" in page, page
    assert {re.sub(r"^(https?://[^/]+).*", r"\1", url) for url in page} == {embedded_daemon.url}, page


PAGE_TRAFFIC = {63171670, 101845102}
"""Chromium's network annotations of a page's own requests (navigation, Blink resource loads): the
browser's background traffic (updates, sign-in, time) carries others and is not the page's doing."""
