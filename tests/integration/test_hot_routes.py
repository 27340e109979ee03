"""The offsets routes answer exactly the same with ``HotRoutes`` serving them as through FastAPI.

Two apps, each over its own fresh embedded log, get the same script of requests: successes, every
kind of refusal (parameters, bodies, names, sizes, claims, sequences, history, methods, paths the
middleware must leave to FastAPI). One app serves the offsets routes through
``emulator.server.hot_routes.HotRoutes``, the other has that middleware removed, so FastAPI's own
routing and dependency solving answer. Status, body and headers (all but ``date``) must be equal,
and the first app must really have served the hot requests itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.server.hot_routes import HotRoutes
from emulator.server.wiring import assemble_runtime, make_app
from emulator.view.offset_view import OffsetView

BODY = {"offsets": [{"partition": {"file": "/data/in.txt"}, "offset": {"position": 5}}]}
JSON = {"content-type": "application/json"}


class RunningConnectors(NoConnectCluster):
    """As a Connect cluster would report: ``busy`` is running, every other connector stopped."""

    def is_stopped(self, connector: str) -> bool:
        return connector != "busy"


def _app(directory: Path, hot: bool) -> FastAPI:
    log = EmbeddedOffsetLog(directory, partitions=3, synchronous="NORMAL")
    log.open()
    app = make_app(assemble_runtime(log, OffsetView(), RunningConnectors()), max_body_bytes=4096)
    if not hot:
        app.user_middleware = [m for m in app.user_middleware if m.cls is not HotRoutes]
    return app


class FellThrough:
    """Stands behind ``HotRoutes``: records the requests it left to FastAPI."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.paths.append(f"{scope['method']} {scope['path']}")
        await self.app(scope, receive, send)


def _hot_middleware(app: FastAPI) -> HotRoutes:
    layer: Any = app.middleware_stack
    while not isinstance(layer, HotRoutes):
        layer = layer.app
    return layer


@pytest.fixture
def clients(tmp_path: Path) -> Iterator[tuple[TestClient, TestClient, FellThrough]]:
    hot_app, plain_app = _app(tmp_path / "hot", hot=True), _app(tmp_path / "plain", hot=False)
    with TestClient(hot_app) as hot, TestClient(plain_app) as plain:
        for client in (hot, plain):
            for _ in range(200):
                if client.get("/readyz").status_code == 200:
                    break
        middleware = _hot_middleware(hot_app)
        fell = FellThrough(middleware.app)
        middleware.app = fell
        yield hot, plain, fell


# (method, path with query, body: JSON value, raw bytes or None, extra headers, who answers:
# HotRoutes, FastAPI's router, or the authentication guard in front of both)
SCRIPT: list[tuple[str, str, Any, dict[str, str], str]] = [
    ("GET", "/connectors", None, {}, "hot"),
    ("GET", "/healthz", None, {}, "hot"),
    ("GET", "/healthz?verbose=1", None, {}, "hot"),
    ("HEAD", "/healthz", None, {}, "hot"),  # HEAD is GET without a body (HeadAsGet)
    ("GET", "/readyz", None, {}, "fastapi"),
    ("PATCH", "/connectors/c1/offsets", BODY, JSON, "hot"),  # 404: no offsets yet
    ("PATCH", "/connectors/c1/offsets?create=true", BODY, JSON, "hot"),
    ("PATCH", "/connectors/c2/offsets?create=1&dry_run=0", BODY, JSON, "hot"),
    ("GET", "/connectors", None, {}, "hot"),
    ("GET", "/connectors?fresh=true", None, {}, "hot"),
    ("GET", "/connectors?fresh=sometimes", None, {}, "hot"),
    ("GET", "/connectors/c1/offsets", None, {}, "hot"),
    ("GET", "/connectors/c1/offsets?fresh=yes&unknown=1", None, {}, "hot"),
    ("GET", "/connectors/nope/offsets", None, {}, "hot"),
    ("GET", "/connectors/%C3%A9t%C3%A9/offsets", None, {}, "hot"),
    ("GET", "/connectors/%01x/offsets", None, {}, "hot"),
    ("GET", "/connectors/%FF/offsets", None, {}, "hot"),
    ("GET", "/connectors/c1/offsets?kind=sideways", None, {}, "hot"),
    ("GET", "/connectors/c1/offsets?kind=sink", None, {}, "hot"),
    ("GET", "/connectors/c1/offsets?store=connector", None, {}, "hot"),
    ("GET", "/connectors/c1/offsets?as_of=2026-01-01T00:00:00Z", None, {}, "hot"),
    ("GET", "/connectors/c1/offsets?as_of=yesterday", None, {}, "hot"),
    ("PATCH", "/connectors/c1/offsets?dry_run=true", BODY, JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets?dry_run=true&dry_run=maybe", BODY, JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets?dry_run=maybe&claim_epoch=x", BODY, JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets?claim_epoch=99999999999999999999", BODY, JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets?claim_epoch=3", BODY, JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets?sequence_source=job&sequence=2", BODY, JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets?sequence_source=job&sequence=1", BODY, JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets?sequence=1", BODY, JSON, "hot"),
    ("PATCH", "/connectors/busy/offsets?create=true", BODY, JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets", b'{"offsets": [', JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets", {"offsets": []}, JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets", {"offsets": [{"partition": {"f": 1}, "offset": {"a": [1]}}]}, JSON, "hot"),
    ("PATCH", "/connectors/c1/offsets", b"[" * 5000, JSON, "hot"),  # over --max-body-bytes
    ("PATCH", "/connectors/c1/offsets", BODY, {"content-type": "text/plain"}, "guard"),  # the guard's 415
    ("GET", "/connectors/c1/offsets/", None, {}, "hot"),  # trailing slash: the same resource (TrailingSlash)
    ("PUT", "/connectors/c1/offsets", BODY, JSON, "fastapi"),  # wrong method: FastAPI's 405
    ("HEAD", "/connectors/c1/offsets", None, {}, "hot"),  # HEAD is GET without a body (HeadAsGet)
    ("GET", "/connectors/c1/offsets/history", None, {}, "fastapi"),  # another router's route
    ("DELETE", "/connectors/c1/offsets?dry_run=true", None, {}, "hot"),
    ("DELETE", "/connectors/c1/offsets?dry_run=true&kind=source", None, {}, "hot"),
    ("DELETE", "/connectors/c1/offsets?claim_epoch=1", None, {}, "hot"),
    ("DELETE", "/connectors/nope/offsets", None, {}, "hot"),
    ("DELETE", "/connectors/c1/offsets", None, {}, "hot"),
    ("GET", "/connectors/c1/offsets", None, {}, "hot"),
    ("GET", "/connectors", None, {}, "hot"),
]


def _send(client: TestClient, method: str, url: str, body: Any, headers: dict[str, str]) -> Any:
    content = body if isinstance(body, bytes) else None
    json = None if body is None or isinstance(body, bytes) else body
    if json is not None:
        return client.request(method, url, content=_dumps(json), headers=headers)
    return client.request(method, url, content=content, headers=headers)


def _dumps(value: Any) -> bytes:
    import json

    return json.dumps(value).encode()


def _answer(response: Any) -> tuple[int, bytes, list[tuple[str, str]]]:
    headers = sorted((k.lower(), v) for k, v in response.headers.items() if k.lower() != "date")
    return response.status_code, response.content, headers


def test_the_offsets_routes_answer_as_fastapi_does(clients: tuple[TestClient, TestClient, FellThrough]) -> None:
    hot, plain, fell = clients
    statuses = set()
    for method, url, body, headers, who in SCRIPT:
        fell.paths.clear()
        got = _answer(_send(hot, method, url, body, headers))
        expected = _answer(_send(plain, method, url, body, headers))
        assert got == expected, f"{method} {url}"
        assert bool(fell.paths) == (who == "fastapi"), f"{method} {url}: {who} should answer; FastAPI saw {fell.paths}"
        statuses.add(got[0])
    assert {200, 400, 404, 405, 409, 413, 415} <= statuses, statuses
    # What the access log, the metrics and the audit line learn from the scope: the same route
    # templates, statuses and write results.
    assert _counted(hot) == _counted(plain)
    assert any('route="/connectors/{connector}/offsets"' in line for line in _counted(hot))


def _counted(client: TestClient) -> list[str]:
    text = client.get("/metrics").text
    wanted = ("connect_offsets_http_requests_total", "connect_offsets_writes_total", "connect_offsets_dropped")
    return sorted(line for line in text.splitlines() if line.startswith(wanted) and 'route="/metrics"' not in line)
