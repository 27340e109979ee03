"""The ``connect-offsets`` CLI against a running daemon: tables, --json, and clear errors."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from emulator.codec.keys import encode_key
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess, free_port


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, stdin=stdin)


@pytest.mark.slow
def test_alter_get_list_reset_round_trip(embedded_daemon: DaemonProcess, tmp_path: Path) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"offsets": [{"partition": {"filename": "/in.txt"}, "offset": {"position": 151}}]}))
    url = ("--url", embedded_daemon.url)

    altered = cli("alter", name, "--file", str(body), "--create", *url)
    assert altered.returncode == 0, altered.stderr
    assert "altered successfully" in altered.stdout

    table = cli("get", name, *url)
    assert table.returncode == 0
    header, row = table.stdout.splitlines()
    assert header.split() == ["PARTITION", "OFFSET"]
    assert row == '{"filename": "/in.txt"}  {"position": 151}'
    assert header.index("OFFSET") == row.index('{"position"'), "columns are aligned"

    as_json = json.loads(cli("get", name, "--json", *url).stdout)
    assert as_json == {"offsets": [{"partition": {"filename": "/in.txt"}, "offset": {"position": 151}}]}
    assert name in cli("list", *url).stdout.split()

    dry = cli("reset", name, "--dry-run", *url)
    assert dry.returncode == 0 and "Dry run" in dry.stdout and f'["{name}",{{"filename":"/in.txt"}}]' in dry.stdout
    assert cli("reset", name, "--yes", *url).returncode == 0
    assert cli("get", name, *url).stdout.strip() == "(no offsets)"


@pytest.mark.slow
def test_alter_reads_the_body_from_stdin(embedded_daemon: DaemonProcess) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    body = json.dumps({"offsets": [{"partition": {"p": 1}, "offset": {"o": 2}}]})
    assert cli("alter", name, "--file", "-", "--create", "--url", embedded_daemon.url, stdin=body).returncode == 0
    assert json.loads(cli("get", name, "--json", "--url", embedded_daemon.url).stdout)["offsets"][0]["offset"] == {
        "o": 2
    }


@pytest.mark.slow
def test_unknown_connector_is_a_clear_error_with_exit_1(embedded_daemon: DaemonProcess) -> None:
    result = cli("get", "no-such-connector-xyz", "--url", embedded_daemon.url)
    assert result.returncode == 1
    assert result.stderr.strip() == "error: Connector no-such-connector-xyz not found (HTTP 404)"


@pytest.mark.slow
def test_altering_a_connector_without_offsets_says_how_to_create_it(embedded_daemon: DaemonProcess) -> None:
    body = json.dumps({"offsets": [{"partition": {"p": 1}, "offset": {"o": 2}}]})
    result = cli("alter", "no-offsets-yet-xyz", "--file", "-", "--url", embedded_daemon.url, stdin=body)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: Connector no-offsets-yet-xyz not found (HTTP 404)",
        "hint: to give it its first offsets, add --create",
    ]


@pytest.mark.slow
def test_status_says_ready_and_what_the_daemon_holds(embedded_daemon: DaemonProcess) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    body = json.dumps({"offsets": [{"partition": {"p": 1}, "offset": {"o": 2}}]})
    assert cli("alter", name, "--file", "-", "--create", "--url", embedded_daemon.url, stdin=body).returncode == 0
    result = cli("status", "--url", embedded_daemon.url)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{embedded_daemon.url}: ready"
    rows = {line.split()[0]: line.split(None, 1)[1] for line in lines[1:]}
    assert rows["log"].startswith("embedded://")
    assert rows["read"].endswith("partitions at their end; lag 0")
    assert rows["reader"].startswith("alive; last look 20")
    assert rows["history"].startswith("writing; ")
    as_json = json.loads(cli("status", "--json", "--url", embedded_daemon.url).stdout)
    assert as_json["ready"] is True and as_json["live_keys"] >= 1


@pytest.mark.slow
def test_a_write_refused_for_a_claim_says_which_flags_answer_it(embedded_daemon: DaemonProcess) -> None:
    name, url = f"cli-{uuid.uuid4().hex[:8]}", ("--url", embedded_daemon.url)
    body = json.dumps({"offsets": [{"partition": {"p": 1}, "offset": {"o": 2}}]})
    assert cli("alter", name, "--file", "-", "--create", *url, stdin=body).returncode == 0
    assert cli("claim", name, "--owner", "ops", *url).returncode == 0
    holder = (
        f"hint: its holder 'ops' writes with --claim-epoch 1; to end that claim: "
        f"`connect-offsets release {name} --epoch 1`"
    )
    for refused in (
        cli("alter", name, "--file", "-", *url, stdin=body),
        cli("alter", name, "--file", "-", "--claim-epoch", "4", *url, stdin=body),
        cli("reset", name, "--yes", *url),
    ):
        assert refused.returncode == 1
        error, hint = refused.stderr.splitlines()
        assert error.startswith("error: ") and error.endswith(("(HTTP 400)", "(HTTP 409)")), error
        assert hint == holder
    assert cli("release", name, "--epoch", "1", *url).returncode == 0
    fenced = cli("alter", name, "--file", "-", "--claim-epoch", "1", *url, stdin=body)
    assert fenced.returncode == 1
    assert fenced.stderr.splitlines()[1] == (
        f"hint: {name} has no claim now: write without --claim-epoch, or take one with "
        f"`connect-offsets claim {name} --owner …`"
    )


@pytest.mark.slow
def test_daemon_down_is_a_clear_error_with_exit_3() -> None:
    result = cli("list", "--url", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 3
    assert "cannot reach the connect-offsets daemon" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_bad_files_are_clear_errors_with_exit_2(embedded_daemon: DaemonProcess, tmp_path: Path) -> None:
    url = ("--url", embedded_daemon.url)
    missing = cli("alter", "x", "--file", str(tmp_path / "missing.json"), *url)
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"offsets": [')
    invalid = cli("alter", "x", "--file", str(broken), *url)
    assert invalid.returncode == 2 and "is not valid JSON" in invalid.stderr
    piped = cli("alter", "x", "--file", "-", *url, stdin='{"offsets": [')
    assert piped.returncode == 2 and "error: standard input (--file -) is not valid JSON" in piped.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"partition": {}}')
    shape = cli("alter", "x", "--file", str(wrong), *url)
    assert shape.returncode == 2 and "KIP-875 body" in shape.stderr


@pytest.mark.slow
def test_claim_then_write_with_the_claim_epoch(embedded_daemon: DaemonProcess, tmp_path: Path) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    url = ("--url", embedded_daemon.url)
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"offsets": [{"partition": {"p": 1}, "offset": {"o": 1}}]}))
    assert cli("alter", name, "--file", str(body), "--create", *url).returncode == 0
    claimed = json.loads(cli("claim", name, "--owner", "operator", "--json", *url).stdout)
    assert claimed["owner"] == "operator"
    held = cli("alter", name, "--file", str(body), *url)
    assert held.returncode == 1 and "claimed by 'operator'" in held.stderr
    ok = cli("alter", name, "--file", str(body), "--claim-epoch", str(claimed["epoch"]), *url)
    assert ok.returncode == 0, ok.stderr
    assert "claimed by 'operator'" in cli("claims", name, *url).stdout
    assert cli("release", name, "--epoch", str(claimed["epoch"]), *url).returncode == 0
    assert cli("claims", name, *url).stdout.strip() == f"{name}: not claimed"


@pytest.mark.slow
def test_a_connector_name_holding_a_newline_is_listed_escaped_on_one_line(daemon_factory: DaemonFactory) -> None:
    """Connect's name validator only applies to names that come through its REST API: any tool may
    write ``["ctl\\nfake-name",…]`` to the log, and ``list`` printed ``ctl`` and a fake ``fake-name``.
    A partition's unprintable characters are JSON escapes in ``get``'s table. A daemon of its own: a
    connector that cannot be named in a URL stays in its log for good (no DELETE reaches it)."""
    embedded_daemon = daemon_factory()
    name = f"ctl-{uuid.uuid4().hex[:8]}\nfake-name"
    plain = f"cli-{uuid.uuid4().hex[:8]}"
    value = base64.b64encode(b'{"p":1}').decode()
    records = [
        {"key": base64.b64encode(encode_key(connector, {"f": "a\u2028b"})).decode(), "value": value}
        for connector in (name, plain)
    ]
    imported = httpx.post(f"{embedded_daemon.url}/offsets/records", json={"records": records})
    assert imported.status_code == 200, imported.text
    url = ("--url", embedded_daemon.url)

    listed = cli("list", *url)
    assert listed.returncode == 0, listed.stderr
    assert "fake-name" not in listed.stdout.splitlines()
    assert repr(name) in listed.stdout.splitlines()
    assert name in json.loads(cli("list", "--json", *url).stdout)  # --json: the name itself
    table = cli("get", plain, *url)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[1] == '{"f": "a\\u2028b"}  {"p": 1}'
    assert json.loads(cli("get", plain, "--json", *url).stdout)["offsets"][0]["partition"] == {"f": "a\u2028b"}
