"""Every route × every kind of principal → the status it must get, against a real secured daemon.

The routes are walked from the app itself: a route added without an access rule here (and in
``emulator.server.auth.policy``) fails ``test_every_route_of_the_app_is_in_the_matrix``, and the
daemon refuses it at run time. Expectations are written out per route, not derived from the policy.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastapi.routing
import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from emulator.server.app import create_app
from emulator.server.settings import Settings
from emulator.server.wiring import build_runtime
from tests.fixtures.daemon import DaemonProcess, free_port
from tests.integration.auth_helpers import SecurityFiles, basic, bearer, write_security_files

ORDERS, CLAIMED = "orders-1", "orders-2"
READERS = {"bob", "writer", "claimer", "alice"}  # read:orders-*; write and claim imply read
EVERYONE = {"bob", "carol", "writer", "claimer", "other", "alice"}
PRINCIPALS = ("anonymous", "wrong-password", *sorted(EVERYONE))


def _record(key: bytes, value: bytes) -> dict[str, str]:
    return {"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}


@dataclass(frozen=True)
class Case:
    method: str
    route: str
    url: str
    allowed: frozenset[str]
    """Principals that pass; ``public`` cases let anonymous through too."""
    ok: int
    body: Any = None
    public: bool = False


def case(method: str, route: str, allowed: set[str], ok: int = 200, url: str | None = None, **kw: Any) -> Case:
    return Case(method, route, url or route.replace("{connector}", ORDERS), frozenset(allowed), ok, **kw)


OFFSETS = "/connectors/{connector}/offsets"
CLAIM = "/connectors/{connector}/claim"
PATCH_BODY = {"offsets": [{"partition": {"f": "a"}, "offset": {"pos": 2}}]}
CASES = [
    case("GET", "/healthz", EVERYONE, public=True),
    case("GET", "/readyz", EVERYONE, public=True),
    case("GET", "/status", EVERYONE),
    case("GET", "/history/status", {"alice"}),
    case("GET", "/metrics", {"alice"}),
    case("GET", "/connectors", READERS | {"other"}),  # write:other-* reads other-*: may list
    case("GET", OFFSETS, READERS),
    case("PATCH", OFFSETS, {"writer", "alice"}, url=f"/connectors/{ORDERS}/offsets?dry_run=true", body=PATCH_BODY),
    case("DELETE", OFFSETS, {"writer", "alice"}, url=f"/connectors/{ORDERS}/offsets?dry_run=true"),
    case("GET", OFFSETS + "/history", READERS),
    case(
        "POST",
        OFFSETS + "/rollback",
        {"writer", "alice"},
        url=f"/connectors/{ORDERS}/offsets/rollback?to=0&dry_run=true",
    ),
    case("GET", CLAIM, READERS, ok=404, url=f"/connectors/{ORDERS}/claim"),  # no claim on orders-1
    case("POST", CLAIM, {"claimer", "alice"}, url=f"/connectors/{CLAIMED}/claim", body={"owner": "matrix"}),
    case("DELETE", CLAIM, {"claimer", "alice"}, ok=404, url=f"/connectors/{CLAIMED}/claim?epoch=999"),
    case("GET", "/claims", READERS | {"other"}),  # lists only the claims of connectors one may read
    case("GET", "/offsets/records", READERS, url=f"/offsets/records?connector={ORDERS}"),
    case("GET", "/offsets/records", {"alice"}, url="/offsets/records"),  # unfiltered: every raw record
    case(
        "POST",
        "/offsets/records",
        {"writer", "alice"},
        url="/offsets/records?dry_run=true",
        body={"records": [_record(b'["orders-1",{"f":"b"}]', b'{"pos":1}')]},
    ),
    case(
        "POST",
        "/offsets/records",
        {"alice"},
        url="/offsets/records?dry_run=true&allow_malformed=true",
        body={"records": [_record(b'["orders-1"]', b'{"pos":1}')]},  # a key Connect ignores: admin only
    ),
    case(
        "POST",
        "/offsets/records",
        {"alice"},
        url="/offsets/records?dry_run=true",
        body={"records": [_record(b'["orders-1",{"f":"b"}]', b"{}"), _record(b'["billing",{"f":"b"}]', b"{}")]},
    ),
]
CASES += [  # the console's reads (emulator/server/ui/routes.py)
    case("GET", "/ui/api/session", EVERYONE),
    case("GET", "/ui/api/connectors", READERS | {"other"}),
    case("GET", "/ui/api/connectors/{connector}", READERS),
    case(
        "GET",
        "/ui/api/connectors/{connector}/history",
        READERS,
        url=f"/ui/api/connectors/{ORDERS}/history?partition=%7B%22f%22%3A%22a%22%7D",
    ),
]
HTTP = httpx.Client(timeout=30)
"""One client for the module: a new one per request costs more than the request."""
PAGES = {"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json", "/docs-assets"}
PAGES |= {"/ui", "/ui/", "/ui/static", "/ui/vendor"}
"""Not API routes (no access rule): public documentation and the console's page and files (which hold
no data), served without credentials."""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> SecurityFiles:
    return write_security_files(tmp_path_factory.mktemp("security"))


@pytest.fixture(scope="module")
def daemon(files: SecurityFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    logs = tmp_path_factory.mktemp("matrix-daemon")
    started = DaemonProcess(
        ["--data-dir", str(logs / "data"), *files.serve_args()], free_port(), logs / "daemon.log"
    ).start()
    seeded = httpx.patch(
        f"{started.url}/connectors/{ORDERS}/offsets?create=true",
        json={"offsets": [{"partition": {"f": "a"}, "offset": {"pos": 1}}]},
        auth=basic("alice"),
    )
    assert seeded.status_code == 200, seeded.text
    yield started
    started.stop()


def request_as(daemon: DaemonProcess, files: SecurityFiles, principal: str, c: Case) -> httpx.Response:
    auth: httpx.BasicAuth | None = None
    headers = {"Content-Type": "application/json"} if c.method in ("POST", "PATCH") else {}
    if principal == "wrong-password":
        auth = httpx.BasicAuth("alice", "not her password")
    elif principal in ("alice", "bob", "carol"):
        auth = basic(principal)
    elif principal != "anonymous":
        headers |= bearer(files.tokens[principal])
    content = None if c.body is None else json.dumps(c.body)
    return HTTP.request(c.method, daemon.url + c.url, content=content, headers=headers, auth=auth)


def expected(c: Case, principal: str) -> int:
    if principal == "wrong-password":
        return 401  # credentials that do not hold are refused everywhere, never taken as anonymous
    if c.public:
        return c.ok
    if principal == "anonymous":
        return 401
    return c.ok if principal in c.allowed else 403


def walk_routes(app: FastAPI) -> Iterator[tuple[BaseRoute, str | None, set[str]]]:
    """(route, path, methods) for every route, through included routers (FastAPI >= 0.120 keeps
    them nested; older versions flatten them into ``app.routes``)."""
    walk = getattr(fastapi.routing, "iter_route_contexts", None)
    for context in walk(app.routes) if walk is not None else app.routes:
        route = getattr(context, "original_route", context)
        yield route, getattr(context, "path", None), set(getattr(context, "methods", None) or ())


def test_every_route_of_the_app_is_in_the_matrix(tmp_path: Path) -> None:
    runtime = build_runtime(Settings(data_dir=tmp_path))
    try:
        app = create_app(runtime)
    finally:
        runtime.log.close()
    covered = {(c.method, c.route) for c in CASES}
    seen = set()
    for route, path, methods in walk_routes(app):
        if isinstance(route, APIRoute):
            for method in methods:
                seen.add((method, path))
                assert (method, path) in covered, f"{method} {path}: add it to the matrix and the policy"
        else:
            assert path in PAGES, f"{route}: a page without an access rule must be listed"
    assert seen == covered, f"the matrix names routes the app does not have: {covered - seen}"


@pytest.mark.slow
@pytest.mark.parametrize("principal", PRINCIPALS)
def test_each_principal_gets_exactly_the_expected_status_on_every_route(
    daemon: DaemonProcess, files: SecurityFiles, principal: str
) -> None:
    wrong = []
    for c in CASES:
        response = request_as(daemon, files, principal, c)
        want = expected(c, principal)
        if response.status_code != want:
            wrong.append(f"{c.method} {c.url}: {response.status_code} (wanted {want}) {response.text[:160]}")
            continue
        if want in (401, 403):
            body = response.json()
            assert set(body) == {"error_code", "message"} and body["error_code"] == want, body
            kind = response.headers["X-Connect-Offsets-Error"]
            assert kind == ("unauthenticated" if want == 401 else "forbidden")
        if want == 401:
            challenges = response.headers.get_list("WWW-Authenticate")
            assert challenges == ['Basic realm="connect-offsets", charset="UTF-8"', 'Bearer realm="connect-offsets"']
    assert not wrong, "\n".join(wrong)


def test_documentation_pages_are_public(daemon: DaemonProcess) -> None:
    for page in ("/docs", "/redoc", "/openapi.json", "/docs-assets/swagger-ui.css"):
        assert httpx.get(daemon.url + page).status_code == 200, page
    schemes = httpx.get(daemon.url + "/openapi.json").json()["components"]["securitySchemes"]
    assert schemes == {"basic": {"type": "http", "scheme": "basic"}, "token": {"type": "http", "scheme": "bearer"}}


def test_status_shows_file_paths_to_admin_only(daemon: DaemonProcess, files: SecurityFiles, tmp_path: Path) -> None:
    as_admin = httpx.get(daemon.url + "/status", auth=basic("alice")).json()
    as_reader = httpx.get(daemon.url + "/status", auth=basic("bob")).json()
    assert as_admin["log"].startswith("embedded:") and "connect-offsets" in as_admin["log"]
    assert as_reader["log"] == "(shown to the admin scope only)"
    assert str(Path(as_admin["log"].removeprefix("embedded://")).parent) not in json.dumps(as_reader)
    assert as_reader["security"]["authentication"] == ["basic", "token"]
    assert as_reader["security"]["warnings"] == []
    # The raw records' export named the log's path to a reader too (on Kafka: the brokers).
    exported = httpx.get(daemon.url + "/offsets/records", params={"connector": ORDERS}, auth=basic("bob")).json()
    assert exported["source"] == "(shown to the admin scope only)"
    assert httpx.get(daemon.url + "/offsets/records", auth=basic("alice")).json()["source"] == as_admin["log"]


def test_the_connector_list_names_only_what_the_principal_may_read(daemon: DaemonProcess, files: SecurityFiles) -> None:
    """A team scoped to its own prefix does not learn other teams' connector names from the list."""
    seeded = HTTP.patch(
        f"{daemon.url}/connectors/other-billing/offsets?create=true",
        json={"offsets": [{"partition": {"f": "a"}, "offset": {"pos": 1}}]},
        auth=basic("alice"),
        headers={"Content-Type": "application/json"},
    )
    assert seeded.status_code == 200, seeded.text
    everything = HTTP.get(daemon.url + "/connectors", auth=basic("alice")).json()
    assert {ORDERS, "other-billing"} <= set(everything)
    as_bob = HTTP.get(daemon.url + "/connectors", auth=basic("bob")).json()  # read:orders-*
    as_other = HTTP.get(daemon.url + "/connectors", headers=bearer(files.tokens["other"])).json()  # write:other-*
    assert ORDERS in as_bob and all(name.startswith("orders-") for name in as_bob), as_bob
    assert as_other == ["other-billing"], as_other
