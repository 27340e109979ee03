"""Hostile or mistaken requests get a 400 (413 for a body too large) in Connect's error body, never a 500.

Each case here answered 500 or did something worse before (issue 8, "Hostile input"): ~2,000-deep
JSON raised ``RecursionError`` in every JSON body and in history's ``partition=``; times and epochs
beyond their ranges raised ``OverflowError``; ``%FE`` and ``%FF`` both decoded to U+FFFD and reached
one connector, ``%00`` made a name holding NUL; there was no body size limit. The daemon is the
real process (uvicorn decodes the path; the raw path is what these checks read).
"""

from __future__ import annotations

import base64
import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.fixtures.processes import rss_kib
from tests.fixtures.waits import until
from tests.integration.auth_helpers import bearer, write_security_files

DEEP = 2000


@pytest.fixture
def name() -> str:
    return f"limits-{uuid.uuid4().hex[:10]}"


def request(daemon: DaemonProcess, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """Writes carry ``Content-Type: application/json`` as a client of the API must (415 otherwise)."""
    headers = {"content-type": "application/json", **kwargs.pop("headers", {})}
    return httpx.request(method, daemon.url + path, timeout=30, headers=headers, **kwargs)


def assert_400(response: httpx.Response, *words: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    body: dict[str, Any] = response.json()
    assert body["error_code"] == 400
    assert response.headers["X-Connect-Offsets-Error"] == "invalid_request"
    for word in words:
        assert word in body["message"], body["message"]
    return body


def seed(daemon: DaemonProcess, connector: str) -> None:
    body = {"offsets": [{"partition": {"p": 1}, "offset": {"o": 1}}]}
    response = request(daemon, "PATCH", f"/connectors/{connector}/offsets", json=body, params={"create": "true"})
    assert response.status_code == 200, response.text


def offsets(daemon: DaemonProcess, connector: str) -> Any:
    return request(daemon, "GET", f"/connectors/{connector}/offsets").json()


# --- JSON nesting ------------------------------------------------------------------------------

DEPTH_WORDS = "Document nesting depth (1001) exceeds the maximum allowed (1000)"


def test_deep_json_is_a_400_naming_the_depth_limit_in_every_body(embedded_daemon: DaemonProcess, name: str) -> None:
    seed(embedded_daemon, name)
    deep = b"[" * DEEP + b"]" * DEEP
    headers = {"content-type": "application/json"}
    patch_body = b'{"offsets":[{"partition":{"p":1},"offset":{"o":' + deep + b"}}]}"
    for method, path, body in [
        ("PATCH", f"/connectors/{name}/offsets", patch_body),
        ("POST", "/offsets/records", b'{"records":' + deep + b"}"),
        ("POST", f"/connectors/{name}/claim", b'{"owner":' + deep + b"}"),
    ]:
        assert_400(request(embedded_daemon, method, path, content=body, headers=headers), DEPTH_WORDS)
    history = request(embedded_daemon, "GET", f"/connectors/{name}/offsets/history", params={"partition": "[" * DEEP})
    assert_400(history, "query parameter 'partition'", DEPTH_WORDS)
    assert offsets(embedded_daemon, name) == {"offsets": [{"partition": {"p": 1}, "offset": {"o": 1}}]}


def test_json_within_the_depth_limit_but_too_deep_for_any_body_is_a_400_too(
    embedded_daemon: DaemonProcess, name: str
) -> None:
    seed(embedded_daemon, name)
    deep = b"[" * 990 + b"]" * 990  # Jackson reads this; Python's json gives up around here
    body = b'{"offsets":[{"partition":{"p":1},"offset":{"o":' + deep + b"}}]}"
    response = request(
        embedded_daemon,
        "PATCH",
        f"/connectors/{name}/offsets",
        content=body,
        headers={"content-type": "application/json"},
    )
    # Connect would parse it and refuse the nested offset; here the parser says why it stopped.
    assert_400(
        response,
        "Request body is nested deeper than this program parses, though within the limit of Connect's JSON reader "
        "(Jackson: 1000 levels)",
    )
    assert offsets(embedded_daemon, name)["offsets"][0]["offset"] == {"o": 1}


def test_numbers_and_names_beyond_jacksons_limits_are_400s(embedded_daemon: DaemonProcess, name: str) -> None:
    seed(embedded_daemon, name)
    path = f"/connectors/{name}/offsets"
    headers = {"content-type": "application/json"}
    long_number = b'{"offsets":[{"partition":{"p":1},"offset":{"o":' + b"1" * 1001 + b"}}]}"
    assert_400(
        request(embedded_daemon, "PATCH", path, content=long_number, headers=headers),
        "Number value length (1001) exceeds the maximum allowed (1000)",
    )
    long_name = {"offsets": [{"partition": {"p": 1}, "offset": {"n" * 50_001: 1}}]}
    assert_400(
        request(embedded_daemon, "PATCH", path, json=long_name),
        "Name length (50001) exceeds the maximum allowed (50000)",
    )
    assert offsets(embedded_daemon, name)["offsets"][0]["offset"] == {"o": 1}


# --- connector names in the path ---------------------------------------------------------------


@pytest.mark.parametrize("encoded", ["%FE", "%FF", "bad%FEname", "%C3", "%ED%A0%80"])
def test_a_name_that_is_not_utf8_once_decoded_is_a_400(embedded_daemon: DaemonProcess, encoded: str) -> None:
    for method, path in [("GET", "/offsets"), ("PATCH", "/offsets"), ("DELETE", "/offsets"), ("GET", "/claim")]:
        kwargs = {"json": {"offsets": [{"partition": {"p": 1}, "offset": None}]}} if method == "PATCH" else {}
        response = request(embedded_daemon, method, f"/connectors/{encoded}{path}", **kwargs)
        assert_400(response, "not valid UTF-8 once percent-decoded")


@pytest.mark.parametrize("encoded", ["%00", "a%0Ab", "tab%09", "%7F", "c1%C2%85"])
def test_a_name_with_control_characters_is_refused_with_connects_rule(
    embedded_daemon: DaemonProcess, encoded: str
) -> None:
    body = {"offsets": [{"partition": {"p": 1}, "offset": {"o": 1}}]}
    response = request(embedded_daemon, "PATCH", f"/connectors/{encoded}/offsets", json=body, params={"create": "true"})
    assert_400(response, "String may not contain control sequences but had the following ASCII chars")
    listed = request(embedded_daemon, "GET", "/connectors").json()
    assert not [n for n in listed if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in n)]


@pytest.mark.parametrize(
    "path",
    [
        "/connectors/a%2Fb/offsets",
        "/connectors/a%2foffsets/history",  # decoded, this path is the history of connector "a"
        "/connectors/%2F/claim",
    ],
)
def test_an_encoded_slash_in_a_name_is_a_400_as_in_connect(embedded_daemon: DaemonProcess, path: str) -> None:
    assert_400(request(embedded_daemon, "GET", path), "cannot contain an encoded '/' (%2F)")


def raw_request(daemon: DaemonProcess, method: str, raw_path: str) -> tuple[int, dict[str, Any]]:
    """A request whose path is sent byte for byte (an HTTP client may normalise ``%63`` to ``c``)."""
    url = httpx.URL(daemon.url)
    head = f"{method} {raw_path} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\nConnection: close\r\n\r\n"
    with socket.create_connection((url.host, url.port), timeout=30) as sock:
        sock.sendall(head.encode("ascii"))
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    body = rest.partition(b"\r\n\r\n")[2]
    return int(status_line.split()[1]), json.loads(body)


@pytest.mark.parametrize(
    ("method", "raw_path", "says"),
    [
        ("DELETE", "/connectors%2F{name}%2Foffsets", "outside a connector name"),
        ("GET", "/%63onnectors/{name}%2Foffsets/history", "cannot contain an encoded '/' (%2F)"),
        ("GET", "/%63onnectors/%FE/offsets", "not valid UTF-8 once percent-decoded"),
    ],
)
def test_a_spelling_of_the_path_does_not_skip_the_checks_of_the_name(
    embedded_daemon: DaemonProcess, name: str, method: str, raw_path: str, says: str
) -> None:
    """Decoded, these are a connector's offsets or history; the name's checks looked for a literal
    ``connectors`` segment, so the first reset ``name``'s offsets and the last served ``%FE`` and
    ``%FF`` as one connector (API fuzz QA)."""
    seed(embedded_daemon, name)
    status, body = raw_request(embedded_daemon, method, raw_path.format(name=name))
    assert status == 400, body
    assert says in body["message"], body
    assert offsets(embedded_daemon, name)["offsets"][0]["offset"] == {"o": 1}, "nothing was reset"


@pytest.mark.parametrize(
    ("request_bytes", "status", "kind", "message"),
    [
        # past the 64 KiB a request head may take (emulator.server.connections.MAX_HEAD_BYTES)
        (
            b"GET /connectors/" + b"x" * 100_000 + b"/offsets HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            431,
            b"request_head_too_large",
            "The request's line and headers are longer than 64 KiB",
        ),
        (b"NOT HTTP AT ALL\r\n\r\n", 400, b"invalid_request", "the request could not be parsed"),
    ],
    ids=["a-100k-path", "not-http"],
)
def test_a_request_the_http_parser_refuses_gets_connects_error_body(
    embedded_daemon: DaemonProcess, request_bytes: bytes, status: int, kind: bytes, message: str
) -> None:
    """uvicorn answered these in plain text ("Invalid HTTP request received."); docs/api.md: every error
    has Connect's body."""
    with socket.create_connection(("127.0.0.1", embedded_daemon.port), timeout=10) as conn:
        conn.sendall(request_bytes)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), answer[:200]
    assert b"content-type: application/json" in head.lower() and b"x-connect-offsets-error: " + kind in head
    error = json.loads(body)
    assert error["error_code"] == status and message in error["message"], error


def test_names_that_are_valid_utf8_are_served(embedded_daemon: DaemonProcess) -> None:
    name = f"caf\u00e9-{uuid.uuid4().hex[:6]}-\U0001f600 x+y"
    seed(embedded_daemon, name)
    assert offsets(embedded_daemon, name)["offsets"][0]["offset"] == {"o": 1}
    assert name in request(embedded_daemon, "GET", "/connectors").json()


# --- times and 64-bit numbers ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["99999999999999999999", "-" + "9" * 5000, "9223372036854775807", "0001-01-01T00:00:00+01:00"]
)
def test_times_out_of_range_are_400s(embedded_daemon: DaemonProcess, name: str, value: str) -> None:
    seed(embedded_daemon, name)
    for method, path, param in [
        ("GET", f"/connectors/{name}/offsets", "as_of"),
        ("GET", f"/connectors/{name}/offsets/history", "from"),
        ("GET", f"/connectors/{name}/offsets/history", "to"),
        ("POST", f"/connectors/{name}/offsets/rollback", "to"),
    ]:
        assert_400(request(embedded_daemon, method, path, params={param: value}), f"'{param}'", "out of range")
    earliest = request(embedded_daemon, "GET", f"/connectors/{name}/offsets/history", params={"from": "0001-01-01"})
    assert earliest.status_code == 200, earliest.text


@pytest.mark.parametrize("value", [str(2**63), str(-(2**63) - 1), "1" + "0" * 40])
def test_epochs_and_sequences_beyond_64_bits_are_400s(embedded_daemon: DaemonProcess, name: str, value: str) -> None:
    seed(embedded_daemon, name)
    body = {"offsets": [{"partition": {"p": 1}, "offset": {"o": 2}}]}
    path = f"/connectors/{name}/offsets"
    # a claim's epoch is at least 1: a negative one is refused for its sign before its size
    epoch_words = ("'claim_epoch'", "plain decimal digits") if value.startswith("-") else ("out of range", "64-bit")
    for method, params, words in [
        ("PATCH", {"claim_epoch": value}, epoch_words),
        ("PATCH", {"sequence_source": "s", "sequence": value}, ("out of range", "64-bit")),
        ("DELETE", {"claim_epoch": value}, epoch_words),
    ]:
        kwargs = {"json": body} if method == "PATCH" else {}
        assert_400(request(embedded_daemon, method, path, params=params, **kwargs), *words)
    release_words = ("'epoch'", "plain decimal digits") if value.startswith("-") else ("64-bit",)
    assert_400(request(embedded_daemon, "DELETE", f"/connectors/{name}/claim", params={"epoch": value}), *release_words)
    assert offsets(embedded_daemon, name)["offsets"][0]["offset"] == {"o": 1}


# --- body size ---------------------------------------------------------------------------------


@pytest.fixture
def small_daemon(daemon_factory: DaemonFactory) -> Iterator[DaemonProcess]:
    yield daemon_factory("--max-body-bytes", "4KiB")


def assert_413(response: httpx.Response) -> None:
    assert response.status_code == 413, response.text
    body = response.json()
    assert (
        body["error_code"] == 413 and "exceeds this daemon's limit of 4096 bytes (--max-body-bytes)" in body["message"]
    )
    assert response.headers["X-Connect-Offsets-Error"] == "request_too_large"


@pytest.mark.slow
def test_a_body_over_max_body_bytes_is_a_413_declared_or_streamed(small_daemon: DaemonProcess, name: str) -> None:
    seed(small_daemon, name)
    big = {"offsets": [{"partition": {"p": 1}, "offset": {"o": 2, "pad": "x" * 5000}}]}
    assert_413(request(small_daemon, "PATCH", f"/connectors/{name}/offsets", json=big))

    def chunks() -> Iterator[bytes]:  # no Content-Length: refused while streaming
        yield b'{"records":['
        for _ in range(100):
            yield b'{"key":"' + b"A" * 100 + b'","value":null},'
        yield b"]}"

    assert_413(request(small_daemon, "POST", "/offsets/records", content=chunks()))
    assert_413(request(small_daemon, "POST", f"/connectors/{name}/claim", json={"owner": "x" * 5000}))
    fits = {"offsets": [{"partition": {"p": 1}, "offset": {"o": 3, "pad": "x" * 3000}}]}
    assert request(small_daemon, "PATCH", f"/connectors/{name}/offsets", json=fits).status_code == 200
    assert offsets(small_daemon, name)["offsets"][0]["offset"]["o"] == 3


@pytest.mark.slow
def test_a_writer_scoped_import_is_held_to_max_body_bytes_before_its_records_are_authorized(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """An import by a principal with write scopes is authorized per record, so its body is read before
    the route runs. It was read whole, whatever --max-body-bytes said: a 300 MB stream from one token
    took the daemon from 70 to 333 MB of RSS and answered 400 after 3 s."""
    files = write_security_files(tmp_path / "security")
    daemon = daemon_factory("--max-body-bytes", "4KiB", *files.serve_args())
    writer = {**bearer(files.tokens["writer"]), "Content-Type": "application/json"}
    before = rss_mib(daemon)

    def endless() -> Iterator[bytes]:  # 64 MiB, no Content-Length
        yield b'{"records":['
        for _ in range(1024):
            yield b'{"key":"' + b"A" * 65_000 + b'","value":null},'
        yield b"]}"

    assert_413(httpx.post(f"{daemon.url}/offsets/records", content=endless(), headers=writer, timeout=60))
    assert rss_mib(daemon) < before + 32, "the body was not held in memory"
    key = base64.b64encode(b'["orders-1",{"file":"a"}]').decode()
    value = base64.b64encode(b'{"position":1}').decode()
    fits = {"records": [{"key": key, "value": value}]}
    answer = httpx.post(f"{daemon.url}/offsets/records", json=fits, headers=writer, timeout=60)
    assert answer.status_code == 200, answer.text  # read once by the policy, then by the route


# --- memory ------------------------------------------------------------------------------------


def rss_mib(daemon: DaemonProcess) -> float:
    assert daemon.proc is not None
    return rss_kib(daemon.proc.pid)["VmRSS"] / 1024


@pytest.mark.slow  # 2-7 s here (2026-11-27)
def test_refused_bodies_do_not_outlive_their_requests(daemon_factory: DaemonFactory, name: str) -> None:
    """The daemon collects young objects only every 10,000 net allocations (``emulator.server.heap``),
    so anything a refused request left in a reference cycle would stay for long: a 20 MB body that is
    not JSON, refused ten times, must not leave 200 MB behind."""
    daemon = daemon_factory()
    seed(daemon, name)
    before = rss_mib(daemon)
    truncated = b'{"offsets":[{"partition":{"f":"' + b"x" * 20_000_000 + b'"},"offset":{"p":1}}'
    for _ in range(10):
        assert_400(request(daemon, "PATCH", f"/connectors/{name}/offsets", content=truncated), "not valid JSON")
    # The last request's buffers (the body, its chunks, its text: ~70 MB) go once its task ends.
    deadline = time.monotonic() + 10
    while (after := rss_mib(daemon)) >= before + 60:
        assert time.monotonic() < deadline, f"RSS {before:.0f} MiB before, {after:.0f} MiB 10 s after ten refusals"
        time.sleep(0.1)


def test_a_write_that_asks_to_upgrade_the_connection_is_refused_saying_why(
    embedded_daemon: DaemonProcess, name: str
) -> None:
    """``curl --http2`` on ``http://`` sends ``Upgrade: h2c``; the HTTP server then hands the app the
    request without its body, and a PATCH was refused for "no offsets" (API fuzz QA)."""
    seed(embedded_daemon, name)
    url = httpx.URL(embedded_daemon.url)
    body = json.dumps({"offsets": [{"partition": {"p": 1}, "offset": {"o": 5}}]}).encode()
    head = (
        f"PATCH /connectors/{name}/offsets HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
        "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection((url.host, url.port), timeout=30) as sock:
        sock.sendall(head.encode("ascii") + body)
        sock.settimeout(30)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status = int(answer.split(b"\r\n", 1)[0].split()[1])
    message = json.loads(answer.partition(b"\r\n\r\n")[2])["message"]
    assert status == 400, answer
    assert "asks to upgrade the connection (Upgrade: h2c)" in message and "--http1.1" in message, message
    assert offsets(embedded_daemon, name)["offsets"][0]["offset"] == {"o": 1}, "nothing was written"
    plain = request(embedded_daemon, "GET", f"/connectors/{name}/offsets", headers={"Upgrade": "h2c"})
    assert plain.status_code == 200, "a request without a body is served as HTTP/1.1"


def test_a_trailing_slash_is_the_same_resource_as_in_connect_with_every_rule_applied(
    embedded_daemon: DaemonProcess, name: str
) -> None:
    """Connect (JAX-RS) serves ``…/offsets/`` as ``…/offsets``; the daemon answered a bare 307 redirect
    (API fuzz QA). The rules that read the path judge the same path: a write still needs its JSON
    content type there."""
    seed(embedded_daemon, name)
    body = {"offsets": [{"partition": {"p": 1}, "offset": {"o": 7}}]}
    patched = request(embedded_daemon, "PATCH", f"/connectors/{name}/offsets/", json=body)
    assert patched.status_code == 200, patched.text
    listed = request(embedded_daemon, "GET", f"/connectors/{name}/offsets/")
    assert listed.status_code == 200 and listed.json() == offsets(embedded_daemon, name)
    assert listed.json()["offsets"][0]["offset"] == {"o": 7}
    untyped = httpx.patch(
        f"{embedded_daemon.url}/connectors/{name}/offsets/", content=json.dumps(body).encode(), timeout=30
    )
    assert untyped.status_code == 415, untyped.text


@pytest.mark.parametrize("path", ["/connectors", "/connectors/{name}/offsets", "/healthz", "/status", "/ui"])
def test_head_answers_as_get_without_a_body_as_connect_does(
    embedded_daemon: DaemonProcess, name: str, path: str
) -> None:
    """JAX-RS answers HEAD for every GET route; FastAPI's routes answered 405 (API fuzz QA)."""
    seed(embedded_daemon, name)
    url = embedded_daemon.url + path.format(name=name)

    def head_lines() -> int:
        return sum(
            1
            for line in embedded_daemon.log_tail(2000).splitlines()
            if "emulator.access: HEAD" in line and " 200 " in line
        )

    before = head_lines()
    got, head = httpx.get(url, timeout=30), httpx.head(url, timeout=30)
    assert got.status_code == 200, got.text
    assert head.status_code == 200, head.text
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    if path != "/status":  # its body carries the time: its length may differ by a digit
        assert head.headers["content-length"] == got.headers["content-length"]
    until(lambda: head_lines() > before, "an access line for the HEAD, under its route", timeout_s=10)
    assert "HEAD unmatched" not in embedded_daemon.log_tail(2000)
    refused = httpx.head(f"{embedded_daemon.url}/connectors/{name}/offsets/rollback", timeout=30)
    assert refused.status_code == 405, "a route without GET has no HEAD either"
