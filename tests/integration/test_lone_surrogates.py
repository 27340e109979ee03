"""Half a surrogate pair in a partition or an offset: Connect's data, served and kept whole.

Jackson reads ``"\\ud800"`` into a Java String holding a lone surrogate and ``JsonConverter`` writes
it back as ``\\uD800`` (tests/compat/test_oracle_selfcheck.py), so a connector can commit such an
offset and Connect reads it. Python's UTF-8 encoder refuses the character: before
``emulator.codec.surrogates`` the GET answered 500, the history archive wrote bytes no Avro reader
accepts (every later change of every connector unreadable, also after a restart), the console's
reads answered 500 and the CLI's `get` and `export` ended in tracebacks.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import fastavro
import httpx
import pytest

from emulator.client.http import OffsetsClient
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess

pytestmark = pytest.mark.slow

BODY = b'{"offsets":[{"partition":{"file":"\\ud800"},"offset":{"pos":"x\\udc00"}}]}'
WRITTEN = {"partition": {"file": "\ud800"}, "offset": {"pos": "x\udc00"}}


def patch(url: str, connector: str, body: bytes) -> httpx.Response:
    return httpx.patch(
        f"{url}/connectors/{connector}/offsets?create=true",
        content=body,
        headers={"content-type": "application/json"},
        timeout=30,
    )


def test_a_lone_surrogate_is_served_archived_exported_and_printed(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    daemon = daemon_factory("--data-dir", str(data))
    assert patch(daemon.url, "odd", BODY).status_code == 200
    assert patch(daemon.url, "after", b'{"offsets":[{"partition":{"f":"1"},"offset":{"p":1}}]}').status_code == 200

    answer = httpx.get(f"{daemon.url}/connectors/odd/offsets", timeout=30)
    assert answer.status_code == 200, answer.text
    assert b'"\\uD800"' in answer.content, "escaped as Jackson escapes it"
    assert answer.json() == {"offsets": [WRITTEN]}

    for path in ("/ui/api/connectors", "/ui/api/connectors/odd"):
        assert httpx.get(daemon.url + path, timeout=30).status_code == 200, path
    changes = httpx.get(f"{daemon.url}/connectors/after/offsets/history", timeout=30).json()["changes"]
    assert [c["offset"] for c in changes] == [{"p": 1}], "a later change of another connector is archived"

    env_url = ("--url", daemon.url)
    shown = run_cli("get", "odd", *env_url)
    assert shown.returncode == 0, shown.stderr
    assert '"\\ud800"' in shown.stdout and "Traceback" not in shown.stderr
    for target in ("odd.json", "odd.avro", "odd.offsets", "odd.jsonl"):
        exported = run_cli("export", "--to", str(tmp_path / target), *env_url)
        assert exported.returncode == 0, f"{target}: {exported.stderr}"
    back = run_cli("import", "--from", str(tmp_path / "odd.json"), "--dry-run", *env_url)
    assert back.returncode == 0 and "connector odd: 0 added, 0 changed, 0 removed, 1 unchanged" in back.stdout

    daemon.stop()
    rows = [row for f in sorted((data / "history").rglob("history-*")) for row in fastavro.reader(f.open("rb"))]
    partitions = [json.loads(row["partition_json"]) for row in rows if row["connector"] == "odd"]
    assert partitions == [WRITTEN["partition"]], "every row valid UTF-8, readable by any Avro reader"
    assert [row["connector"] for row in rows] == ["odd", "after"]


def test_a_claim_owner_must_be_text_utf8_can_carry(embedded_daemon: DaemonProcess) -> None:
    answer = httpx.post(
        f"{embedded_daemon.url}/connectors/owner-odd/claim",
        content=b'{"owner":"\\ud800"}',
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 400
    assert "half a UTF-16 surrogate pair" in answer.json()["message"]


def test_the_clients_send_what_a_file_holds(embedded_daemon: DaemonProcess) -> None:
    """`alter --file` with a lone surrogate ended in a traceback: httpx could not encode the body."""
    name = f"odd-cli-{uuid.uuid4().hex[:8]}"
    written = run_cli("alter", name, "--file", "-", "--create", "--url", embedded_daemon.url, stdin=BODY.decode())
    assert written.returncode == 0, written.stderr
    assert embedded_daemon.client().offsets(name) == [WRITTEN]


def test_a_rollback_of_the_name_spelt_like_the_escape_leaves_the_surrogates_connector_alone(
    embedded_daemon: DaemonProcess,
) -> None:
    """The archive keeps a name holding half a surrogate pair as its backslash escape (Avro strings
    are UTF-8), which another name spells literally, and the queries matched on that field alone: a
    rollback of the literal name, a connector with no history at all, rewrote the other connector's
    offsets (200, 'rolled back ... (1 record(s))'), and its history listed the other's changes."""
    uid = uuid.uuid4().hex[:8]
    raw_key = f'["half-{uid}\\ud800",{{"f":1}}]'.encode()  # ASCII: JSON's escape, the lone surrogate
    literal = quote(f"half-{uid}\\ud800", safe="")  # a backslash and "ud800": any URL carries it
    with OffsetsClient(embedded_daemon.url) as client:
        client.import_records([(raw_key, b'{"p":1}')])
        before = time.time_ns() // 1_000_000
        time.sleep(0.05)
        client.import_records([(raw_key, b'{"p":2}')])
        history = httpx.get(f"{embedded_daemon.url}/connectors/{literal}/offsets/history", timeout=30)
        assert history.status_code == 404, history.text
        rollback = httpx.post(
            f"{embedded_daemon.url}/connectors/{literal}/offsets/rollback",
            params={"to": str(before)},
            content=b"{}",
            headers={"content-type": "application/json"},
            timeout=30,
        )
        assert rollback.status_code == 404, rollback.text
        assert client.records()[raw_key] == b'{"p":2}', "the surrogate's connector was not rolled back"
