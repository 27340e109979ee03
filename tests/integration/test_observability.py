"""What an operator sees of a running daemon (embedded log): metrics, access log, audit lines, /status.

One daemon for the module, started as users start it, with JSON logs and a separate metrics port;
each test names its own connectors and compares counters before and after its own requests, so the
numbers it checks are the ones its requests made. ``/metrics`` is read with prometheus_client's own
parser (``tests.integration.scrape``), the daemon's log file one JSON object per line.
"""

from __future__ import annotations

import base64
import json
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.fixtures.daemon import DaemonFactory, DaemonProcess, free_port
from tests.fixtures.waits import until
from tests.integration.auth_helpers import mint
from tests.integration.connect_helpers import unique
from tests.integration.scrape import Samples, scrape, scrape_until

WRITE_ROUTE = "/connectors/{connector}/offsets"


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    workdir = tmp_path_factory.mktemp("observed")
    metrics_port = free_port()
    daemon = DaemonProcess(
        ["--data-dir", str(workdir / "data"), "--log-format", "json", "--metrics-port", str(metrics_port)],
        free_port(),
        workdir / "daemon.log",
    ).start()
    daemon.metrics_url = f"http://127.0.0.1:{metrics_port}"  # type: ignore[attr-defined]
    try:
        yield daemon
    finally:
        daemon.stop()


def log_lines(daemon: DaemonProcess) -> list[dict[str, Any]]:
    """Every line of the daemon's log; each must be one JSON object (``--log-format json``).

    The fixture's file holds stdout too, where ``serve`` announces its URL once ready (for scripts,
    not a log record): that one line is the only other one allowed."""
    lines = []
    for text in daemon.log_path.read_text(encoding="utf-8").splitlines():
        if text == daemon.url:
            continue
        lines.append(json.loads(text))  # a line that is not JSON fails the test here
    return lines


def lines_about(daemon: DaemonProcess, logger: str, connector: str, count: int) -> list[dict[str, Any]]:
    """The ``logger``'s lines naming ``connector``, once ``count`` are there (the log is flushed per line)."""
    deadline = time.monotonic() + 10
    while True:
        found = [line for line in log_lines(daemon) if line["logger"] == logger and line.get("connector") == connector]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def patch(daemon: DaemonProcess, connector: str, offsets: list[dict[str, Any]], **params: str) -> httpx.Response:
    return httpx.patch(f"{daemon.url}/connectors/{connector}/offsets", json={"offsets": offsets}, params=params)


def offsets(n: int, *files: str) -> list[dict[str, Any]]:
    return [{"partition": {"file": f}, "offset": {"pos": n}} for f in files]


def writes(samples: Samples, connector: str, operation: str, result: str) -> float:
    return samples.value("connect_offsets_writes_total", connector=connector, operation=operation, result=result)


@pytest.mark.slow
def test_n_writes_are_counted_n_times_per_connector_route_and_status(observed: DaemonProcess) -> None:
    name, stranger = unique("counted"), unique("never-created")
    before = scrape(observed.url)
    assert patch(observed, name, offsets(0, "a", "b"), create="true").status_code == 200
    for n in (1, 2):
        assert patch(observed, name, offsets(n, "a")).status_code == 200
    assert httpx.delete(f"{observed.url}/connectors/{name}/offsets", params={"dry_run": "true"}).status_code == 200
    assert patch(observed, stranger, offsets(1, "a")).status_code == 404

    after = scrape_until(
        observed.url,
        lambda s: (
            s.value("connect_offsets_reader_records_read_total")
            >= before.value("connect_offsets_reader_records_read_total") + 4
        ),
        "the reader delivering the 4 records written",
    )
    assert writes(after, name, "PATCH", "ok") == 3
    assert writes(after, name, "DELETE", "dry_run") == 1
    assert writes(after, "", "PATCH", "connector_not_found") - writes(before, "", "PATCH", "connector_not_found") == 1
    assert stranger not in after.label_values("connect_offsets_writes_total", "connector")  # no series at will
    labels = {"method": "PATCH", "route": WRITE_ROUTE, "status": "200"}
    assert (
        after.value("connect_offsets_http_requests_total", **labels)
        - before.value("connect_offsets_http_requests_total", **labels)
        == 3
    )
    assert (
        after.value("connect_offsets_http_request_duration_seconds_count", **labels)
        - before.value("connect_offsets_http_request_duration_seconds_count", **labels)
        == 3
    )
    assert (
        after.value("connect_offsets_reader_records_read_total")
        - before.value("connect_offsets_reader_records_read_total")
        == 4
    )  # 2 records, then 1 and 1: a dry run writes nothing
    # The log timed its own part of each write (its lock, commit and fsync): one transaction per
    # request, as they came one at a time, carrying those 4 records.
    for metric, made in (
        ("connect_offsets_log_write_duration_seconds_count", 3),
        ("connect_offsets_log_write_duration_seconds_bucket", 3),
        ("connect_offsets_log_written_records_total", 4),
    ):
        labels_of = {"le": "+Inf"} if metric.endswith("_bucket") else {}
        assert after.value(metric, **labels_of) - before.value(metric, **labels_of) == made, metric
    assert after.value("connect_offsets_log_write_duration_seconds_sum") > before.value(
        "connect_offsets_log_write_duration_seconds_sum"
    )
    assert not any(
        name in dict(labels).get("route", "") for labels in after.series("connect_offsets_http_requests_total")
    )


def test_the_reader_lag_reaches_zero_and_end_offsets_follow_the_writes(observed: DaemonProcess) -> None:
    name = unique("lagless")
    start = httpx.get(f"{observed.url}/status").json()
    assert patch(observed, name, offsets(7, "a", "b", "c", "d"), create="true").status_code == 200
    deadline = time.monotonic() + 10
    status = httpx.get(f"{observed.url}/status").json()
    while status["lag_total"] != 0 or status["records_read"] < start["records_read"] + 4:
        assert time.monotonic() < deadline, f"reader did not catch up: {status}"
        time.sleep(0.05)
        status = httpx.get(f"{observed.url}/status").json()
    assert sum(status["end_offsets"].values()) == sum(start["end_offsets"].values()) + 4
    assert status["end_offsets"] == status["positions"]
    reader = status["reader"]
    assert reader["alive"] is True and reader["records_dropped"] == 0 and reader["last_error"] is None
    assert reader["last_poll_at"] is not None and reader["last_records_at"] is not None
    assert status["history"]["enabled"] is True and status["history"]["mode"] == "writing"
    assert status["view"]["listener_failures"] == 0
    # The log's own part of the writes: one transaction with the 4 records, none slow.
    writes, before = status["writes"], start["writes"]
    assert (writes["writes"] - before["writes"], writes["records"] - before["records"]) == (1, 4)
    assert writes["mean_ms"] > 0 and writes["slow_writes"] == 0
    assert writes["last_slow_at"] is None and writes["last_slow_s"] is None

    samples = scrape(observed.url)
    lags = samples.series("connect_offsets_reader_lag")
    assert len(lags) == len(status["end_offsets"]) and set(lags.values()) == {0.0}
    for partition, end in status["end_offsets"].items():
        assert samples.get("connect_offsets_reader_end_offset", partition=partition) == end
    assert samples.get("connect_offsets_reader_alive") == 1 and samples.get("connect_offsets_ready") == 1
    assert time.time() - (samples.get("connect_offsets_reader_last_poll_timestamp_seconds") or 0) < 10
    assert samples.get("connect_offsets_history_queued_records") == 0


def test_every_write_has_one_audit_line_with_who_from_where_and_what(observed: DaemonProcess) -> None:
    name = unique("audited")
    assert patch(observed, name, offsets(1, "a", "b"), create="true").status_code == 200
    assert httpx.delete(f"{observed.url}/connectors/{name}/offsets", params={"dry_run": "true"}).status_code == 200
    claim = httpx.post(f"{observed.url}/connectors/{name}/claim", json={"owner": "job-1"})
    assert claim.status_code == 200
    release = httpx.delete(f"{observed.url}/connectors/{name}/claim", params={"epoch": claim.json()["epoch"]})
    assert release.status_code == 200

    alter, reset, claimed, released = lines_about(observed, "emulator.audit", name, 4)
    for line in (alter, reset, claimed, released):
        assert line["level"] == "INFO" and line["event"] == "audit"
        assert line["principal"] == "anonymous" and line["mechanism"] == "none"
        assert line["remote"].startswith("127.0.0.1:") and line["status"] == 200
    assert (alter["operation"], alter["dry_run"], alter["result"]) == ("PATCH", False, "ok")
    assert alter["partitions"] == ['{"file":"a"}', '{"file":"b"}'] and alter["records"] == 2
    assert (reset["operation"], reset["dry_run"], reset["result"]) == ("DELETE", True, "dry_run")
    assert sorted(json.loads(p)["file"] for p in reset["partitions"]) == ["a", "b"]
    assert (claimed["operation"], claimed["owner"], claimed["epoch"]) == ("claim", "job-1", 1)
    assert (released["operation"], released["epoch"]) == ("release", 1)


def test_rollbacks_and_imports_are_audited_too(observed: DaemonProcess) -> None:
    name = unique("rolled")
    assert patch(observed, name, offsets(1, "a"), create="true").status_code == 200
    mark = int(time.time() * 1000)
    time.sleep(0.01)
    assert patch(observed, name, offsets(2, "a", "b")).status_code == 200
    rollback = httpx.post(
        f"{observed.url}/connectors/{name}/offsets/rollback",
        params={"to": str(mark), "dry_run": "true"},
        headers={"content-type": "application/json"},  # writes need it (a 415 otherwise), bodies or not
    )
    assert rollback.status_code == 200 and len(rollback.json()["changes"]) == 2
    key = base64.b64encode(f'["{name}",{{"file":"c"}}]'.encode()).decode()
    value = base64.b64encode(b'{"pos":3}').decode()
    imported = httpx.post(f"{observed.url}/offsets/records", json={"records": [{"key": key, "value": value}]})
    assert imported.status_code == 200 and imported.json()["written"] == 1

    lines = lines_about(observed, "emulator.audit", name, 3)
    (rolled,) = [line for line in lines if line["operation"] == "rollback"]
    assert (rolled["dry_run"], rolled["result"], rolled["records"]) == (True, "dry_run", 2)
    assert sorted(json.loads(p)["file"] for p in rolled["partitions"]) == ["a", "b"]
    deadline = time.monotonic() + 10
    while not (
        found := [
            line
            for line in log_lines(observed)
            if line.get("operation") == "import" and name in line.get("connectors", [])
        ]
    ):
        assert time.monotonic() < deadline, "no audit line for the import"
        time.sleep(0.05)
    (imported_line,) = found
    assert (imported_line["connector"], imported_line["written"], imported_line["partitions"]) == (
        None,
        1,
        ['{"file":"c"}'],
    )
    assert imported_line["principal"] == "anonymous" and imported_line["status"] == 200


def test_audit_partitions_are_always_listed_as_json_texts_so_the_field_keeps_one_type(
    observed: DaemonProcess,
) -> None:
    """A partition too long to list whole is listed as text (its start and length): its neighbours
    are texts too, each the partition's compact JSON, so a collector's mapping of ``partitions``
    (Elasticsearch's) never meets objects on one line and strings on the next. The text line shows
    the same texts, unescaped."""
    name = unique("typed")
    body = [
        {"partition": {"file": "a"}, "offset": {"pos": 1}},
        {"partition": {"file": "z" * 1_000}, "offset": {"pos": 1}},
    ]
    assert patch(observed, name, body, create="true", dry_run="true").status_code == 200
    (line,) = lines_about(observed, "emulator.audit", name, 1)
    short, cut = line["partitions"]
    assert json.loads(short) == {"file": "a"}
    assert isinstance(cut, str) and cut.startswith('{"file":"zzz') and cut.endswith("… (1,011 characters)")
    assert f"2 partition(s) [{short}, {cut}]" in line["message"]


def test_an_audit_line_stays_small_whatever_the_request_names(observed: DaemonProcess) -> None:
    """One 1 MB partition made a 2 MB audit line (the partition twice: in the text and the fields),
    which log shippers cut or drop, audit record and all. A long partition is listed by its start
    and its length, and an import's connectors by the first 20 and a count."""
    name = unique("huge")
    huge = {"file": "z" * 1_000_000}
    assert (
        patch(observed, name, [{"partition": huge, "offset": {"pos": 1}}], create="true", dry_run="true").status_code
        == 200
    )
    (line,) = lines_about(observed, "emulator.audit", name, 1)
    assert len(json.dumps(line)) < 4_000, len(json.dumps(line))
    (listed,) = line["partitions"]
    assert listed.startswith('{"file":"zzz') and listed.endswith("(1,000,011 characters)"), listed[-60:]
    assert "(1,000,011 characters)" in line["message"]

    names = [f"{name}-{i:02}" for i in range(25)]
    value = base64.b64encode(b'{"pos":3}').decode()
    records = [{"key": base64.b64encode(f'["{n}",{{"file":"c"}}]'.encode()).decode(), "value": value} for n in names]
    assert httpx.post(f"{observed.url}/offsets/records", json={"records": records}).status_code == 200
    deadline = time.monotonic() + 10
    while not (
        found := [
            x for x in log_lines(observed) if x.get("operation") == "import" and names[0] in x.get("connectors", [])
        ]
    ):
        assert time.monotonic() < deadline, "no audit line for the import"
        time.sleep(0.05)
    (imported,) = found
    assert (len(imported["connectors"]), imported["connectors_count"], imported["partition_count"]) == (20, 25, 25)
    assert writes(scrape(observed.url), names[24], "import", "ok") == 1, "the metrics count every connector"


def test_the_access_log_names_route_templates_and_client_mistakes_are_not_errors(observed: DaemonProcess) -> None:
    name = unique("mistaken")
    assert patch(observed, name, offsets(1, "a"), create="true").status_code == 200
    assert patch(observed, name, [{"partition": {"file": "a"}, "offset": {"pos": [1]}}]).status_code == 500
    mistake = httpx.patch(
        f"{observed.url}/connectors/{name}/offsets", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert mistake.status_code == 400
    assert httpx.get(f"{observed.url}/connectors/{name}/nothing-here").status_code == 404

    deadline = time.monotonic() + 10
    while True:
        access = [line for line in log_lines(observed) if line["logger"] == "emulator.access"]
        refused = sum(1 for a in access if a["status"] in (400, 500) and a["route"] == WRITE_ROUTE)
        if refused >= 2 and any(a["route"] == "unmatched" and a["status"] == 404 for a in access):
            break  # a line is written once the answer has left, so it may come a moment after it
        assert time.monotonic() < deadline, "access lines of the refused requests never appeared"
        time.sleep(0.05)
    for line in access:
        assert {"method", "route", "status", "duration_ms", "principal", "remote"} <= set(line)
        assert name not in line["message"] and name not in line["route"]  # templates, never raw paths
    kinds = {(a["status"], a["error_kind"]) for a in access if a["route"] == WRITE_ROUTE}
    assert {(500, "invalid_offset_format"), (400, "invalid_request")} <= kinds
    assert [line for line in log_lines(observed) if line["level"] in ("ERROR", "CRITICAL")] == []


def test_the_console_and_the_api_docs_are_counted_under_their_routes_not_as_unmatched(
    observed: DaemonProcess,
) -> None:
    """The console's page and files and the API docs are Starlette routes and mounts, which leave no
    route in the request's scope: they were all counted and logged as ``unmatched`` (soak QA)."""
    routes = {"/ui": "/ui", "/ui/static/app.js": "/ui/static/{path}", "/docs": "/docs"}
    before = scrape(observed.url)
    for path in routes:
        assert httpx.get(observed.url + path).status_code == 200, path
    after = scrape(observed.url)
    for path, route in routes.items():
        labels = {"method": "GET", "route": route, "status": "200"}
        counted = after.value("connect_offsets_http_requests_total", **labels)
        assert counted == before.value("connect_offsets_http_requests_total", **labels) + 1, path
    unmatched = {"method": "GET", "route": "unmatched", "status": "200"}
    assert after.value("connect_offsets_http_requests_total", **unmatched) == 0


def test_a_write_refused_before_routing_is_counted_logged_and_audited_under_its_route(
    observed: DaemonProcess,
) -> None:
    """The content-type check (like authentication) answers before the router runs; the refusal is
    still the route's, so it is counted and logged under the template and audited like any write."""
    name = unique("refused-early")
    assert patch(observed, name, offsets(1, "a"), create="true").status_code == 200
    labels = {"method": "PATCH", "route": WRITE_ROUTE, "status": "415"}
    before = scrape(observed.url).value("connect_offsets_http_requests_total", **labels)
    refused = httpx.patch(
        f"{observed.url}/connectors/{name}/offsets", content=b'{"offsets":[]}', headers={"content-type": "text/plain"}
    )
    assert refused.status_code == 415
    assert scrape(observed.url).value("connect_offsets_http_requests_total", **labels) == before + 1
    created, audit = lines_about(observed, "emulator.audit", name, 2)
    assert (created["status"], audit["operation"], audit["status"]) == (200, "PATCH", 415)
    assert audit["result"] == "unsupported_media_type"
    deadline = time.monotonic() + 10
    while not [a for a in log_lines(observed) if a["logger"] == "emulator.access" and a["status"] == 415]:
        assert time.monotonic() < deadline, "no access line for the refused write"
        time.sleep(0.05)
    (access,) = [a for a in log_lines(observed) if a["logger"] == "emulator.access" and a["status"] == 415]
    assert (access["route"], access["error_kind"]) == (WRITE_ROUTE, "unsupported_media_type")


def test_a_method_no_route_has_is_neither_audited_nor_counted_as_a_write(observed: DaemonProcess) -> None:
    """``PUT /connectors`` and ``POST …/offsets`` match a route's path but none of its methods: the
    answer is 405 and nothing could have been modified, so no audit line and no
    ``connect_offsets_writes_total`` series (they were counted under operation ``PUT /connectors``);
    the request itself is still in the access log and the HTTP metrics, under the route it matched."""
    name = unique("wrong-method")
    assert patch(observed, name, offsets(1, "a"), create="true").status_code == 200
    before = scrape(observed.url)
    assert httpx.put(f"{observed.url}/connectors", json={}).status_code == 405
    assert httpx.post(f"{observed.url}/connectors/{name}/offsets", json={}).status_code == 405
    assert patch(observed, name, offsets(2, "a")).status_code == 200  # a write after them, to wait for

    created, altered = lines_about(observed, "emulator.audit", name, 2)
    assert (created["operation"], altered["operation"]) == ("PATCH", "PATCH")
    after = scrape(observed.url)
    operations = set(after.label_values("connect_offsets_writes_total", "operation"))
    assert not {op for op in operations if op.startswith(("PUT ", "POST /connectors/{connector}/offsets"))}, operations
    assert [
        line for line in log_lines(observed) if line["logger"] == "emulator.audit" and line.get("status") == 405
    ] == []
    labels = {"method": "PUT", "route": "/connectors", "status": "405"}
    assert (
        after.value("connect_offsets_http_requests_total", **labels)
        == before.value("connect_offsets_http_requests_total", **labels) + 1
    )


@pytest.mark.slow
def test_a_write_without_valid_credentials_is_audited_with_its_connector(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    _, line = mint("writer", ["write:*"])
    (tmp_path / "tokens").write_text(line + "\n")
    daemon = daemon_factory("--tokens-file", str(tmp_path / "tokens"), "--log-format", "json")
    name = unique("unauthenticated")
    url = f"{daemon.url}/connectors/{name}/offsets"
    body = {"offsets": offsets(1, "a")}
    assert httpx.patch(url, json=body).status_code == 401  # no credentials: refused by the route's policy
    assert httpx.patch(url, json=body, headers={"authorization": "Bearer not-a-token"}).status_code == 401
    without, wrong = lines_about(daemon, "emulator.audit", name, 2)  # the wrong one: refused before routing
    for audit in (without, wrong):
        assert (audit["operation"], audit["status"], audit["principal"]) == ("PATCH", 401, "anonymous")
    access = [a for a in log_lines(daemon) if a["logger"] == "emulator.access" and a["status"] == 401]
    assert [a["route"] for a in access] == [WRITE_ROUTE, WRITE_ROUTE]


def test_fenced_writes_dropped_sequences_and_claims_are_counted_per_connector(observed: DaemonProcess) -> None:
    name = unique("fenced")
    assert patch(observed, name, offsets(1, "a"), create="true").status_code == 200
    first = httpx.post(f"{observed.url}/connectors/{name}/claim", json={"owner": "old"}).json()["epoch"]
    second = httpx.post(f"{observed.url}/connectors/{name}/claim", json={"owner": "new"}).json()["epoch"]
    assert patch(observed, name, offsets(2, "a"), claim_epoch=str(first)).status_code == 409
    sequence = {"claim_epoch": str(second), "sequence_source": "task-0"}
    assert patch(observed, name, offsets(3, "a", "b"), **sequence, sequence="5").status_code == 200
    stale = patch(observed, name, offsets(2, "a", "b"), **sequence, sequence="4")
    assert stale.status_code == 200 and len(stale.json()["dropped"]) == 2
    dry = patch(observed, name, offsets(2, "a", "b"), **sequence, sequence="4", dry_run="true").json()
    assert dry["dropped"] == stale.json()["dropped"], "a dry run answers what the write would drop, and why"
    assert dry["message"].endswith("2 partition(s) would be dropped: the commit sequence is stale (see 'dropped')."), (
        dry
    )

    samples = scrape(observed.url)
    assert samples.value("connect_offsets_fenced_writes_total", connector=name) == 1
    assert writes(samples, name, "PATCH", "fenced") == 1
    assert samples.value("connect_offsets_dropped_sequences_total", connector=name) == 2, "a dry run drops nothing"
    assert samples.value("connect_offsets_claims_total", connector=name, operation="claim", result="ok") == 2
    audited = lines_about(observed, "emulator.audit", name, 6)
    (line,) = [a for a in audited if a.get("dropped_sequences") and not a["dry_run"]]
    assert line["dropped_sequences"] == 2 and line["claim_epoch"] == str(second)


def test_the_metrics_port_serves_the_same_registry(observed: DaemonProcess) -> None:
    metrics_url: str = observed.metrics_url  # type: ignore[attr-defined]
    main, separate = scrape(observed.url), scrape(metrics_url, "/metrics")
    assert separate.get("connect_offsets_build_info", version=_version()) == 1
    assert separate.get("connect_offsets_reader_caught_up") == main.get("connect_offsets_reader_caught_up") == 1
    assert separate.value("connect_offsets_http_requests_total", method="GET", route="/metrics", status="200") >= 1


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:9464", "127.0.0.1.nip.io"])
def test_the_metrics_port_refuses_a_foreign_host_header(observed: DaemonProcess, host: str) -> None:
    """A web page rebinding its own name to 127.0.0.1 must not read metrics that name every connector."""
    metrics_url: str = observed.metrics_url  # type: ignore[attr-defined]
    refused = httpx.get(f"{metrics_url}/metrics", headers={"Host": host})
    assert refused.status_code == 400 and "--allowed-hosts" in refused.text
    assert "connect_offsets" not in refused.text
    assert httpx.get(f"{metrics_url}/metrics", headers={"Host": "localhost"}).status_code == 200


@pytest.mark.parametrize("version", ["1.1", "1.0"])
def test_the_metrics_port_refuses_a_request_without_a_host_header(observed: DaemonProcess, version: str) -> None:
    metrics_url: str = observed.metrics_url  # type: ignore[attr-defined]
    parsed = httpx.URL(metrics_url)
    with socket.create_connection((parsed.host, parsed.port), timeout=10) as sock:
        sock.sendall(f"GET /metrics HTTP/{version}\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.split(b"\r\n", 1)[0].split()[1] == b"400", answer[:200]
    assert b"connect_offsets" not in answer


def test_the_startup_heap_is_exempt_from_collection_and_collections_are_timed(observed: DaemonProcess) -> None:
    """A full collection over the startup heap (imports, FastAPI's and pydantic's objects) held every
    request in flight for 35–45 ms; the daemon exempts what it holds at startup and once the log is
    read (``emulator.server.heap``), and times every collection so a pause can be told from a slow
    broker."""
    samples = scrape(observed.url)
    # Tens of thousands of objects: the FastAPI app alone is more than 50,000.
    assert samples.value("connect_offsets_gc_frozen_objects") > 50_000
    # The full collection run just before the first freeze was timed: pauses are observed from startup.
    assert samples.value("connect_offsets_gc_pause_seconds_count", generation="2") >= 1
    assert samples.value("connect_offsets_gc_pause_seconds_sum", generation="2") > 0
    for generation in "012":  # every generation has its series, collected or not yet
        assert samples.get("connect_offsets_gc_pause_seconds_count", generation=generation) is not None


@pytest.mark.slow
def test_without_the_access_log_writes_are_still_audited_in_text_lines(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    daemon = daemon_factory("--no-access-log")
    name = unique("quiet")
    assert patch(daemon, name, offsets(1, "a"), create="true").status_code == 200
    assert httpx.get(f"{daemon.url}/connectors/{name}/offsets").status_code == 200
    deadline = time.monotonic() + 10
    while f"PATCH {name} by anonymous from 127.0.0.1:" not in daemon.log_path.read_text():
        assert time.monotonic() < deadline, daemon.log_tail()
        time.sleep(0.05)
    text = daemon.log_path.read_text()
    assert " INFO emulator.audit: PATCH " in text and "200 ok, 1 partition(s)" in text
    assert "emulator.access" not in text


def test_a_connector_name_cannot_forge_a_log_line_or_drive_the_terminal(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """The audit line quoted the connector name raw, and a refused request is audited too: a DELETE
    without credentials naming ``x<LF>2026-… INFO emulator.audit: DELETE payments by alice …`` wrote
    a whole forged audit line into the default text log (security QA, HIGH). Every line is now one
    event: the name in Python's quoted form, every unprintable character of any message escaped."""
    _, line = mint("writer", ["write:*"])
    (tmp_path / "tokens").write_text(line + "\n")
    daemon = daemon_factory("--tokens-file", str(tmp_path / "tokens"))  # text lines, the default
    forged = "2026-11-29 12:00:00,000 INFO emulator.audit: DELETE payments by alice from 10.0.0.9:1: 200 ok"
    name = f"x\n{forged}"
    assert httpx.delete(f"{daemon.url}/connectors/{quote(name, safe='')}/offsets").status_code == 401
    terminal = "payments\x1b[2J\r\u2028"
    assert httpx.delete(f"{daemon.url}/connectors/{quote(terminal, safe='')}/offsets").status_code == 401
    # The forged text holds " INFO emulator.audit: DELETE " itself: wait for the second line by its own words.
    until(lambda: "DELETE 'payments\\x1b" in daemon.log_tail(200), "both refusals audited")
    text = daemon.log_path.read_text(encoding="utf-8")
    assert not [each for each in text.splitlines() if each.startswith(forged)], "a forged line"
    assert f"DELETE {name!r} by anonymous from 127.0.0.1:" in text
    assert "DELETE 'payments\\x1b[2J\\r\\u2028' by anonymous" in text
    assert "\x1b" not in text and "\r" not in text and "\u2028" not in text


def test_a_connector_named_with_half_a_surrogate_pair_is_counted_and_metrics_still_scrape(
    observed: DaemonProcess,
) -> None:
    """Connect's data may name a connector with half a surrogate pair (Jackson reads ``\\ud800`` in a
    key), and an import writes such a key as it is. As a label it is no UTF-8, and every scrape of
    ``/metrics`` answered 500 from then on (found by a CI run where another test had imported one
    into the session's daemon). It is counted under its escaped form."""
    name = unique("half-pair")
    key = base64.b64encode(f'["{name}\\ud800",{{"file":"a"}}]'.encode()).decode()
    value = base64.b64encode(b'{"pos":1}').decode()
    imported = httpx.post(f"{observed.url}/offsets/records", json={"records": [{"key": key, "value": value}]})
    assert imported.status_code == 200 and imported.json()["written"] == 1, imported.text
    answer = httpx.get(f"{observed.url}/metrics")
    assert answer.status_code == 200, answer.text
    escaped = f"{name}\\ud800"  # the six characters of the escape, not the code point
    samples = scrape(observed.url)
    assert writes(samples, escaped, "import", "ok") == 1


def test_a_dry_run_on_a_name_that_does_not_exist_makes_no_series(observed: DaemonProcess) -> None:
    """``?dry_run=true&create=true`` answers 200 for any name and writes nothing: counting it under
    its name let any writer create series at will (security QA, MEDIUM). Counted under ``""`` as
    the writes to connectors that do not exist are."""
    stranger = unique("dry-stranger")
    before = scrape(observed.url)
    assert patch(observed, stranger, offsets(1, "a"), create="true", dry_run="true").status_code == 200
    after = scrape_until(
        observed.url,
        lambda s: writes(s, "", "PATCH", "dry_run") > writes(before, "", "PATCH", "dry_run"),
        "the dry run counted",
    )
    assert writes(after, "", "PATCH", "dry_run") - writes(before, "", "PATCH", "dry_run") == 1
    assert stranger not in after.label_values("connect_offsets_writes_total", "connector")
    assert stranger not in httpx.get(f"{observed.url}/connectors").json()


@pytest.mark.slow
def test_at_warning_level_no_line_is_written_and_every_write_is_still_counted(daemon_factory: DaemonFactory) -> None:
    """The access and audit lines are built only when INFO is on; the metrics never depend on it."""
    daemon = daemon_factory("--log-level", "WARNING")
    name = unique("warning-level")
    assert patch(daemon, name, offsets(1, "a"), create="true").status_code == 200
    assert patch(daemon, name, offsets(2, "a"), dry_run="true").status_code == 200
    samples = scrape(daemon.url)
    assert writes(samples, name, "PATCH", "ok") == 1
    assert writes(samples, name, "PATCH", "dry_run") == 1
    labels = {"method": "PATCH", "route": WRITE_ROUTE, "status": "200"}
    assert samples.value("connect_offsets_http_requests_total", **labels) == 2
    text = daemon.log_path.read_text()
    assert "emulator.audit" not in text and "emulator.access" not in text, daemon.log_tail()


def _version() -> str:
    from emulator import __version__

    return __version__


@pytest.mark.slow  # a daemon process, and two writes that wait out their 1 s deadline
def test_a_reset_or_rollback_that_times_out_is_audited_with_the_partitions_it_attempted(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """A DELETE or rollback names no partitions in its request: they were noted from its answer, so
    one that failed or timed out (503 ``write_outcome_unknown`` too: it may have been applied, every
    partition gone) was audited as "0 partition(s)". The service notes them as it plans the write."""
    data = tmp_path / "data"
    daemon = daemon_factory("--data-dir", str(data), "--write-timeout", "1s", "--log-format", "json")
    name = unique("timedout")
    assert patch(daemon, name, offsets(1, "a"), create="true").status_code == 200
    mark = int(time.time() * 1000)
    time.sleep(0.01)
    assert patch(daemon, name, offsets(2, "a", "b", "c")).status_code == 200
    other = sqlite3.connect(data / "connect-offsets.sqlite3", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's write in progress: the writes time out
        reset = httpx.delete(f"{daemon.url}/connectors/{name}/offsets", timeout=30)
        rollback = httpx.post(
            f"{daemon.url}/connectors/{name}/offsets/rollback",
            params={"to": str(mark)},
            headers={"content-type": "application/json"},
            timeout=30,
        )
        other.execute("COMMIT")
    finally:
        other.close()
    for answer in (reset, rollback):
        assert answer.status_code == 503 and answer.headers["X-Connect-Offsets-Error"] == "log_timeout", answer.text

    lines = lines_about(daemon, "emulator.audit", name, 4)
    (deleted,) = [line for line in lines if line["operation"] == "DELETE"]
    (rolled,) = [line for line in lines if line["operation"] == "rollback"]
    assert (deleted["status"], deleted["result"], deleted["partition_count"]) == (503, "log_timeout", 3)
    assert sorted(json.loads(p)["file"] for p in deleted["partitions"]) == ["a", "b", "c"]
    assert (rolled["status"], rolled["result"], rolled["partition_count"]) == (503, "log_timeout", 3)
    # a and its value, b and c deleted
    assert sorted(json.loads(p)["file"] for p in rolled["partitions"]) == ["a", "b", "c"]
