"""Nothing the CLI prints that came from the daemon or from data can drive the operator's terminal.

Anyone who can write the offsets topic (or hand over an offsets file) chooses the bytes of connector
names, keys and values, and the daemon quotes them in its error texts. Printed raw, an ESC sequence
clears the screen, recolours it or sets the window title, a ``\\r`` overwrites the line being read,
a C1 CSI (U+009B) does the same on terminals that take 8-bit controls. Every such character is now
escaped (``emulator.codec.shown.shown_text``; in ``--json`` as a JSON escape, the same JSON to a
parser); the only raw control left is the newline that ends each of the CLI's own lines.

Real processes throughout: the CLI as a user's shell runs it, against the session's daemon.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from emulator.formats import standalone
from emulator.formats.model import RawRecord
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonProcess

HOSTILE = "\x1b[2J\x1b]0;owned\x07\r\x9b31m\u202e"
"""Clear the screen, set the window title, go back to the line's start, a C1 CSI, a right-to-left override."""


def _controls(text: str) -> list[str]:
    """The characters of ``text`` that a terminal would act on, the CLI's own newlines aside."""
    return [c for c in text if not c.isprintable() and c != "\n"]


def test_a_refused_import_names_a_hostile_record_without_its_controls(tmp_path: Path) -> None:
    """A direct import refuses a key Connect ignores and quotes it in the error: the key's ESC, BEL,
    CR, CSI and override bytes are shown escaped (before, they reached the terminal as they were)."""
    name = f"ctl-import-{uuid.uuid4().hex[:8]}"
    source = tmp_path / "hostile.offsets"
    standalone.write_file(source, [RawRecord(f'["{name}{HOSTILE}",{{"f":1}}]'.encode(), b'{"position":1}')])
    done = run_cli("import", "--from", f"standalone:{source}", "--to", f"embedded:{tmp_path / 'data'}", "--dry-run")
    assert done.returncode == 2, done.stderr
    assert "keys Connect ignores" in done.stderr, done.stderr
    assert _controls(done.stderr) == [], done.stderr
    assert f"{name}\\x1b[2J\\x1b]0;owned\\x07\\r\\x9b31m\\u202e" in done.stderr, done.stderr


@pytest.mark.slow
def test_the_daemons_error_text_is_printed_with_its_controls_escaped(
    embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    """A file of offsets handed over for ``alter`` whose partition field name carries controls and
    whose value is a map: the daemon refuses it with Connect's own text, which quotes the field name
    as it is, and the CLI prints that message with the controls escaped (before: raw)."""
    name = f"ctl-alter-{uuid.uuid4().hex[:8]}"
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"offsets": [{"partition": {f"f{HOSTILE}": {"nested": 1}}, "offset": {"position": 1}}]}))
    done = run_cli("alter", name, "--create", "--file", str(body), "--url", embedded_daemon.url)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: Offsets may only contain primitive types"), done.stderr
    assert _controls(done.stderr) == [], done.stderr
    assert "field f\\x1b[2J\\x1b]0;owned\\x07\\r\\x9b31m\\u202e contains MAP (HTTP 500)" in done.stderr, done.stderr


@pytest.mark.slow
def test_json_output_escapes_what_json_dumps_leaves_raw_and_parses_the_same(embedded_daemon: DaemonProcess) -> None:
    """An offset holding a C1 CSI and a right-to-left override: ``get --json`` printed them raw (JSON
    escapes only C0). Now they are JSON escapes, and the output parses to the very same value."""
    name = f"ctl-json-{uuid.uuid4().hex[:8]}"
    value = f"pos{HOSTILE}"
    body = {"offsets": [{"partition": {"file": "f"}, "offset": {"position": value}}]}
    answer = httpx.patch(
        f"{embedded_daemon.url}/connectors/{name}/offsets", params={"create": "true"}, json=body, timeout=30
    )
    assert answer.status_code == 200, answer.text
    done = run_cli("get", name, "--json", "--url", embedded_daemon.url)
    assert done.returncode == 0, done.stderr
    assert _controls(done.stdout) == [], done.stdout
    assert json.loads(done.stdout)["offsets"] == body["offsets"]
    table = run_cli("get", name, "--url", embedded_daemon.url)
    assert table.returncode == 0, table.stderr
    assert _controls(table.stdout) == [], table.stdout
