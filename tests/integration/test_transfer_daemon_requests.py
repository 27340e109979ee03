"""An import through a daemon larger than the daemon's ``--max-body-bytes``: the CLI sends it in several
``POST /offsets/records`` requests (``emulator.transfer.locations.daemon``) instead of getting a 413.

The daemons here take bodies of at most 64 KiB; the files imported are several times that. The CLI's
own budget per request (8 MiB) is larger than that, so its first request is refused with 413 and the
rest goes in requests under the limit the daemon named; ``DaemonLocation(request_bytes=…)`` shows the
packing without any 413.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.formats import standalone
from emulator.formats.model import RawRecord
from emulator.transfer import TransferOptions, transfer
from emulator.transfer.locations.daemon import DaemonLocation
from emulator.transfer.locations.files import StandaloneLocation
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.integration.auth_helpers import PASSWORDS, basic, write_security_files

LIMIT = "64KiB"
SMALL, BIG = 300, 3000
"""Records of each small connector and of the one connector larger than a request (~80 bytes each)."""


def records_of(name: str, count: int, position: int = 1) -> list[RawRecord]:
    return [
        RawRecord(f'["{name}",{{"file":"/data/{name}/{i}.txt"}}]'.encode(), f'{{"position":{position}}}'.encode())
        for i in range(count)
    ]


def import_file(tmp_path: Path, *groups: list[RawRecord]) -> tuple[Path, list[RawRecord]]:
    records = [r for group in groups for r in group]
    path = tmp_path / "in.offsets"
    standalone.write_file(path, records)
    return path, records


def cli(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--quiet", timeout_s=120, env=env)


def report_of(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.fixture
def small_daemon(daemon_factory: DaemonFactory) -> DaemonProcess:
    return daemon_factory("--max-body-bytes", LIMIT)


@pytest.mark.slow
def test_an_import_larger_than_the_daemons_limit_lands_whole_in_several_requests(
    small_daemon: DaemonProcess, tmp_path: Path
) -> None:
    path, records = import_file(
        tmp_path, records_of("chunk-a", SMALL), records_of("chunk-big", BIG), records_of("chunk-c", SMALL)
    )
    assert path.stat().st_size > 4 * 64 * 1024, "the file alone is several times the daemon's limit"
    args = ("import", "--from", f"standalone:{path}", "--url", small_daemon.url, "--json")
    whole = {"added": len(records), "changed": 0, "removed": 0, "unchanged": 0}

    dry = report_of(cli(*args, "--dry-run"))
    assert dry["written"] == 0 and dry["diff"]["summary"] == whole
    assert small_daemon.client().records() == {}, "a dry run writes nothing"

    done = report_of(cli(*args))
    assert done["diff"]["summary"] == whole == dry["diff"]["summary"], "a dry run reports what the run does"
    assert (
        done["diff"]["connectors"]
        == dry["diff"]["connectors"]
        == {
            "chunk-a": {"added": SMALL, "changed": 0, "removed": 0, "unchanged": 0},
            "chunk-big": {"added": BIG, "changed": 0, "removed": 0, "unchanged": 0},
            "chunk-c": {"added": SMALL, "changed": 0, "removed": 0, "unchanged": 0},
        }
    )
    assert done["written"] == len(records) == len(done["diff"]["entries"])
    assert small_daemon.client().records() == {r.key: r.value for r in records}, "every record landed"
    notes = "\n".join(done["notes"])
    assert "refused a body of" in notes and "its limit is 65,536 bytes" in notes
    assert "the records of connector chunk-big did not fit in one request" in notes
    assert "chunk-a did not" not in notes and "chunk-c did not" not in notes, "small connectors go whole"

    again = report_of(cli(*args))
    assert again["written"] == 0
    assert again["diff"]["summary"] == {"added": 0, "changed": 0, "removed": 0, "unchanged": len(records)}


@pytest.mark.slow
def test_a_diff_limit_holds_over_all_requests(small_daemon: DaemonProcess, tmp_path: Path) -> None:
    path, records = import_file(tmp_path, records_of("limit-a", SMALL), records_of("limit-big", BIG))
    result = report_of(
        cli("import", "--from", f"standalone:{path}", "--url", small_daemon.url, "--json", "--diff-limit", "2")
    )
    assert result["written"] == len(records)
    listed = [e["connector"] for e in result["diff"]["entries"]]
    assert sorted(listed) == ["limit-a", "limit-a", "limit-big", "limit-big"]
    assert result["diff"]["entries_omitted"] == len(records) - 4


@pytest.mark.slow
def test_requests_are_packed_by_connector_under_the_budget(small_daemon: DaemonProcess, tmp_path: Path) -> None:
    """Under the daemon's limit from the start: no 413, each request at most the budget."""
    path, records = import_file(
        tmp_path,
        records_of("pack-a", SMALL),
        records_of("pack-b", SMALL),
        records_of("pack-big", BIG),
        [RawRecord(b'"not a Connect key"', b'{"position":1}')],  # kept with --malformed keep: a group of its own
    )
    options = TransferOptions(malformed="keep")
    report = transfer(StandaloneLocation(path), DaemonLocation(small_daemon.url, request_bytes=32 * 1024), options)
    assert report.written == len(records)
    assert report.diff["summary"]["added"] == len(records)
    assert not any("refused a body" in note for note in report.notes)
    sent = [note for note in report.notes if note.startswith("sent to")]
    assert len(sent) == 1 and "requests of up to 32,768 bytes of body each" in sent[0]
    assert small_daemon.client().records() == {r.key: r.value for r in records}


@pytest.fixture
def secured_daemon(daemon_factory: DaemonFactory, tmp_path: Path) -> tuple[DaemonProcess, dict[str, str]]:
    files = write_security_files(tmp_path / "security")
    daemon = daemon_factory("--max-body-bytes", LIMIT, *files.serve_args())
    return daemon, files.tokens


def token_env(token: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_OFFSETS_")}
    return {**clean, "CONNECT_OFFSETS_TOKEN": token}


@pytest.mark.slow
def test_a_request_refused_after_others_were_written_says_what_is_in_effect(
    secured_daemon: tuple[DaemonProcess, dict[str, str]], tmp_path: Path
) -> None:
    """The ``writer`` token may write ``orders-*`` only: the requests holding ``orders-1`` are applied,
    the one holding ``other-1`` is refused (403) after them."""
    daemon, tokens = secured_daemon
    orders, other = records_of("orders-1", BIG), records_of("other-1", SMALL)
    path, records = import_file(tmp_path, orders, other)
    args = ("import", "--from", f"standalone:{path}", "--url", daemon.url)

    dry = cli(*args, "--dry-run", env=token_env(tokens["writer"]))
    assert dry.returncode == 1, dry.stderr
    assert "in effect" not in dry.stderr, "a dry run applies nothing, whichever request was refused"

    refused = cli(*args, env=token_env(tokens["writer"]))
    assert refused.returncode == 1, refused.stderr
    said = refused.stderr
    assert "HTTP 403" in said and "other-1" in said
    found = IN_EFFECT.search(said)
    assert found is not None, said
    in_effect, total, rest = (int(found.group(i).replace(",", "")) for i in (1, 2, 3))
    assert total == len(records) and in_effect + rest == total and 0 < in_effect <= len(orders)
    held = httpx.get(f"{daemon.url}/offsets/records", auth=basic("alice"), timeout=30).json()["records"]
    assert {r["connector"] for r in held} == {"orders-1"} and len(held) == in_effect, "N records are in effect"

    alice = {**token_env(""), "CONNECT_OFFSETS_USER": "alice", "CONNECT_OFFSETS_PASSWORD": PASSWORDS["alice"]}
    del alice["CONNECT_OFFSETS_TOKEN"]
    rerun = report_of(cli(*args, "--json", env=alice))
    assert rerun["written"] == rest, "running the same command again writes the rest"
    held = httpx.get(f"{daemon.url}/offsets/records", auth=basic("alice"), timeout=30).json()["records"]
    assert len(held) == len(records)


IN_EFFECT = re.compile(
    r"the first ([\d,]+) of this write's ([\d,]+) records were written before it and are in effect, "
    r"the other ([\d,]+) were not \(running the same command again writes the rest\)"
)
