"""Raw records through the daemon (``GET``/``POST /offsets/records``) and the transfer CLI against it.

The in-process app runs over a real embedded log (the STOPPED rule needs a connector that counts as
running, which only a Connect cluster could report, so a ``ConnectorStates`` stand-in says so); the
CLI tests run against the session's real daemon process.
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from emulator.codec.murmur2 import partition_for
from emulator.formats import standalone
from emulator.formats.model import RawRecord
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.server.wiring import assemble_runtime, make_app
from emulator.view.offset_view import OffsetView
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonProcess


class RunningConnectors(NoConnectCluster):
    """As a Connect cluster would report: these connectors are running, the rest stopped."""

    def __init__(self, running: set[str]) -> None:
        self.running = running

    def is_stopped(self, connector: str) -> bool:
        return connector not in self.running


def b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode()


@pytest.fixture
def app_client(tmp_path: Path) -> Iterator[TestClient]:
    log = EmbeddedOffsetLog(tmp_path, partitions=3, synchronous="NORMAL")
    log.open()
    view = OffsetView()
    with TestClient(make_app(assemble_runtime(log, view, RunningConnectors({"busy"})))) as client:
        for _ in range(200):
            if client.get("/readyz").status_code == 200:
                break
        yield client


def post(client: TestClient, records: list[tuple[bytes, bytes | None]], **params: str) -> Any:
    body = {"records": [{"key": b64(k), "value": b64(v)} for k, v in records]}
    return client.post("/offsets/records", json=body, params=params)


def test_import_is_byte_exact_and_answers_the_diff(app_client: TestClient) -> None:
    # Non-canonical bytes (space, key order) on purpose: KIP-875 could not carry them, records can.
    odd_key = b'["src", {"b":1,"a":2}]'
    records = [(odd_key, b'{"pos": 7}'), (b'["src",{"f":"x"}]', b'{"pos":1}')]

    dry = post(app_client, records, dry_run="true")
    assert dry.status_code == 200, dry.text
    assert dry.json()["dry_run"] is True and dry.json()["written"] == 0
    assert dry.json()["diff"]["summary"] == {"added": 2, "changed": 0, "removed": 0, "unchanged": 0}
    assert app_client.get("/offsets/records").json()["records"] == [], "a dry run writes nothing"

    assert dry.json()["unread_keys"] == 1 and "1 key(s) would hold a value in bytes no converter writes" in dry.text
    done = post(app_client, records)
    assert done.status_code == 200 and done.json()["written"] == 2
    assert done.json()["unread_keys"] == 1, "the spaced key: Connect lists it, no task reads it"
    assert "no task reads these values and GET shows null" in done.json()["message"]
    listed = app_client.get("/offsets/records").json()["records"]
    assert {(base64.b64decode(r["key"]), base64.b64decode(r["value"])) for r in listed} == set(records)
    assert {r["kafka_partition"] for r in listed} == {partition_for(k, 3) for k, _ in records}
    # Read-your-writes, and Connect's view of the same bytes: listed, with the null Connect's GET
    # shows for bytes no converter writes (docs/api.md).
    offsets = app_client.get("/connectors/src/offsets").json()["offsets"]
    assert {"partition": {"b": 1, "a": 2}, "offset": None} in offsets
    assert {"partition": {"f": "x"}, "offset": {"pos": 1}} in offsets

    again = post(app_client, [(odd_key, b'{"pos": 8}'), (b'["src",{"f":"x"}]', None), (b'["src",{"f":"y"}]', None)])
    entries = {e["key"]: e for e in again.json()["diff"]["entries"]}
    assert entries[odd_key.decode()]["status"] == "changed"
    assert (entries[odd_key.decode()]["old"], entries[odd_key.decode()]["new"]) == ('{"pos": 7}', '{"pos": 8}')
    assert entries['["src",{"f":"x"}]']["status"] == "removed"
    assert entries['["src",{"f":"y"}]']["status"] == "unchanged", "deleting what is absent changes nothing"
    assert again.json()["written"] == 2


def test_a_connector_filter_lists_only_its_records(app_client: TestClient) -> None:
    post(app_client, [(b'["one",{"p":1}]', b"{}"), (b'["two",{"p":1}]', b"{}")])
    only = app_client.get("/offsets/records", params={"connector": "two"}).json()["records"]
    assert [base64.b64decode(r["key"]) for r in only] == [b'["two",{"p":1}]']
    assert only[0]["connector"] == "two"


def test_keys_connect_ignores_are_refused_unless_allowed(app_client: TestClient) -> None:
    refused = post(app_client, [(b"not json", b"{}"), (b'["ok",{"p":1}]', b"{}")])
    assert refused.status_code == 400
    assert "1 record key(s) are not Connect offsets keys" in refused.json()["message"]
    assert app_client.get("/offsets/records").json()["records"] == [], "nothing of a refused import is written"
    allowed = post(app_client, [(b"not json", b"{}")], allow_malformed="true")
    assert allowed.status_code == 200 and allowed.json()["written"] == 1
    listed = app_client.get("/offsets/records").json()["records"]
    assert [(base64.b64decode(r["key"]), r["connector"]) for r in listed] == [(b"not json", None)]


def test_a_running_connector_is_refused_with_connects_message(app_client: TestClient) -> None:
    response = post(app_client, [(b'["idle",{"p":1}]', b"{}"), (b'["busy",{"p":1}]', b"{}")])
    assert response.status_code == 400
    assert response.json()["message"].startswith("Connectors must be in the STOPPED state")
    assert "/connectors/busy/stop" in response.json()["message"]
    assert app_client.get("/offsets/records").json()["records"] == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"records": [{"key": "%%%"}]}, "not valid base64"),
        ({"records": [{"value": "e30="}]}, "must be an object with a base64 'key'"),
        ({"records": "x"}, 'must be {"records"'),
        ({"records": [], "extra": 1}, "Unrecognized field(s) ['extra']"),
    ],
)
def test_bad_bodies_are_400s(app_client: TestClient, body: Any, message: str) -> None:
    response = app_client.post("/offsets/records", json=body)
    assert response.status_code == 400
    assert message in response.json()["message"]


# --- the CLI against a real daemon process ---------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--quiet", timeout_s=120)


@pytest.mark.slow
def test_standalone_file_into_the_daemon_and_back_out(embedded_daemon: DaemonProcess, tmp_path: Path) -> None:
    name = f"xfer-{uuid.uuid4().hex[:8]}"
    other = f"xfer-{uuid.uuid4().hex[:8]}"
    records = [
        RawRecord(f'["{name}",{{"filename":"/a"}}]'.encode(), b'{"position":10}'),
        RawRecord(f'["{name}",{{"filename":"/b"}}]'.encode(), None),
        RawRecord(f'["{other}",{{"filename":"/a"}}]'.encode(), b'{"position":1}'),
    ]
    source = tmp_path / "in.offsets"
    standalone.write_file(source, records)
    url = ("--url", embedded_daemon.url)

    dry = cli("import", "--from", f"standalone:{source}", "--dry-run", "--json", *url)
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["dry_run"] is True and report["written"] == 0
    assert report["diff"]["connectors"][name] == {"added": 1, "changed": 0, "removed": 0, "unchanged": 1}

    done = cli("import", "--from", f"standalone:{source}", "--connector", name, *url)
    assert done.returncode == 0, done.stderr
    assert f"connector {name}: 1 added" in done.stdout
    assert other not in done.stdout, "--connector filters"

    out = tmp_path / "out.offsets"
    exported = cli("export", "--to", f"standalone:{out}", "--connector", name, *url)
    assert exported.returncode == 0, exported.stderr
    assert standalone.load_file(out).records == [records[0]]

    kip = tmp_path / "out.json"
    assert cli("export", "--to", str(kip), "--connector", name, *url).returncode == 0
    assert json.loads(kip.read_text()) == {
        name: {"offsets": [{"partition": {"filename": "/a"}, "offset": {"position": 10}}]}
    }

    rerun = cli("import", "--from", f"standalone:{source}", "--connector", name, "--json", *url)
    assert json.loads(rerun.stdout)["written"] == 0, "re-importing the same file is a no-op"


def test_a_damaged_file_imports_nothing_into_the_daemon(embedded_daemon: DaemonProcess, tmp_path: Path) -> None:
    name = f"xfer-{uuid.uuid4().hex[:8]}"
    data = standalone.dumps([RawRecord(f'["{name}",{{"f":{i}}}]'.encode(), b'{"o":1}') for i in range(5)])
    damaged = tmp_path / "cut.offsets"
    damaged.write_bytes(data[: len(data) - 20])
    result = cli("import", "--from", f"standalone:{damaged}", "--url", embedded_daemon.url)
    assert result.returncode == 2
    assert "truncated file" in result.stderr and "byte offset" in result.stderr
    assert "nothing was written" in result.stderr
    listed = embedded_daemon.client().connectors()
    assert name not in listed


def test_an_import_of_keys_no_task_reads_says_so(embedded_daemon: DaemonProcess, tmp_path: Path) -> None:
    """A standalone file written by another tool may hold keys in bytes no converter writes: they are
    imported as given (byte exact), and the CLI's report says that no task reads their values."""
    name = f"spaced-{uuid.uuid4().hex[:8]}"
    source = tmp_path / "in.offsets"
    standalone.write_file(
        source,
        [
            RawRecord(f'["{name}", {{"filename": "/a"}}]'.encode(), b'{"position":10}'),
            RawRecord(f'["{name}",{{"filename":"/b"}}]'.encode(), b'{"position":20}'),
        ],
    )
    done = run_cli("import", "--from", f"standalone:{source}", "--url", embedded_daemon.url, timeout_s=120)
    assert done.returncode == 0, done.stderr
    shown = done.stdout + done.stderr
    assert "1 key(s) hold a value in bytes no converter writes" in shown, shown
    rows = sorted(embedded_daemon.client().offsets(name), key=lambda row: row["partition"]["filename"])
    assert rows == [  # the daemon lists in the order the log applied them, which an import does not fix
        {"partition": {"filename": "/a"}, "offset": None},
        {"partition": {"filename": "/b"}, "offset": {"position": 20}},
    ]
