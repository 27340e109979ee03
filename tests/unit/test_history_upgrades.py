"""An operator upgrading and downgrading the daemon in place on the embedded backend (upgrade QA):
what the daemon says about an archive file of a newer format, about a read-only archive whose writer
(an earlier version) stopped, and about an earlier version's archive left beside this one's.

The daemon is built in this process (``open_storage``, the app of ``serve``) and asked through
Starlette's ``TestClient``: no port is opened.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import fastavro
import pytest
from fastapi.testclient import TestClient

from emulator.history.archive import WRITER_GONE, HistoryArchive
from emulator.history.directory import log_slug
from emulator.history.files import scan_dir
from emulator.history.origins import OriginRegistry
from emulator.history.query import read_history
from emulator.history.schema import FORMAT_KEY, HISTORY_FORMAT
from emulator.logs.base import ReadProgress
from emulator.server.settings import Settings
from emulator.server.starting import Startup
from emulator.server.wiring import close_runtime, make_app, open_storage
from tests.fixtures.waits import until
from tests.unit.test_history_archive import key, open_stack, value

JSON = {"content-type": "application/json"}


@contextmanager
def daemon(data: Path) -> Iterator[TestClient]:
    """The daemon on the embedded log in ``data`` (history on, in ``data/history``), ready."""
    runtime, history = open_storage(Settings(data_dir=data), OriginRegistry(), Startup())
    try:
        with TestClient(make_app(runtime, history, reading_started=True)) as client:
            until(lambda: client.get("/readyz").status_code == 200, "the daemon to be ready", 30)
            yield client
    finally:
        close_runtime(runtime, history)


def patch(client: TestClient, connector: str, pos: int) -> None:
    body = {"offsets": [{"partition": {"file": "a"}, "offset": {"pos": pos}}]}
    answer = client.patch(f"/connectors/{connector}/offsets", params={"create": "true"}, json=body, headers=JSON)
    assert answer.status_code == 200, answer.text


def relabel_as_newer_format(path: Path) -> None:
    """The file's records unchanged, its header naming a format newer than this version reads (as a
    later version that changed the format would write it)."""
    with path.open("rb") as f:
        reader = fastavro.reader(f)
        schema = reader.writer_schema
        metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
        rows = list(reader)
    with path.open("wb") as f:
        fastavro.writer(f, schema, rows, metadata={**metadata, FORMAT_KEY: str(HISTORY_FORMAT + 1)}, codec="deflate")


def test_a_connector_whose_rows_are_all_in_a_file_of_a_newer_format_is_not_claimed_absent(tmp_path: Path) -> None:
    """It answered a bare 404 "Connector held not found in the offsets history", and /history/status
    said nothing: only a log line named the file. Now the 404 says what could be read, names the
    file and its problem, and /history/status and /status list the file among their warnings."""
    data = tmp_path / "data"
    with daemon(data) as client:
        patch(client, "held", 1)
        patch(client, "held", 2)
        assert len(client.get("/connectors/held/offsets/history").json()["changes"]) == 2  # archived
    ((log_dir),) = [p for p in (data / "history").iterdir() if p.is_dir()]
    (file,) = scan_dir(log_dir)[1]
    assert file.kind == "closed" and file.path.name.startswith("history-0000000000_")
    relabel_as_newer_format(file.path)

    with daemon(data) as client:
        for path, params in (
            ("/connectors/held/offsets/history", {}),
            ("/connectors/held/offsets", {"as_of": "now"}),
        ):
            answer = client.get(path, params=params)
            assert answer.status_code == 404, answer.text
            message = answer.json()["message"]
            assert "not found in the offsets history" not in message, message
            assert "not found in what could be read of the offsets history" in message, message
            assert file.path.name in message, message
            assert f"written by a newer version of connect-offsets (history format {HISTORY_FORMAT + 1};" in message
            assert answer.headers["X-Offsets-History-Warning"].startswith("UNRELIABLE: 1 history archive file(s)")

        status = client.get("/history/status").json()
        (warning,) = status["warnings"]
        assert warning.startswith(f"history archive file {file.path.name} was written by a newer version"), warning
        assert client.get("/status").json()["warnings"] == [warning]

        patch(client, "other", 1)  # a connector the readable files hold: found, the file named as before
        page = client.get("/connectors/other/offsets/history").json()
        assert [c["offset"] for c in page["changes"]] == [{"pos": 1}]
        assert [Path(d["file"]).name for d in page["damaged_files"]] == [file.path.name]


def test_a_read_only_archive_of_an_earlier_version_whose_writer_stopped_says_so_in_its_warnings(
    tmp_path: Path,
) -> None:
    """A daemon of an earlier version (its archive named after the log's description) writes; one of
    this version starts beside it and serves that archive read-only where it is, not taking it over
    while it runs. Once the earlier one stopped, nothing was archived any more, but /status and
    /history/status said nothing (``warnings: []``, only ``writer_gone: true``)."""
    root = tmp_path / "history"
    description = "embedded:///srv/data/connect-offsets.sqlite3"
    earlier = HistoryArchive(root, description, tick_s=0.05)  # named after the description, as before
    earlier.open()
    assert earlier.writable
    this = HistoryArchive(  # a daemon's: it could take an archive this version named over
        root, description, archive_identity="log-id", progress=ReadProgress, reread=lambda ranges, timeout_s: iter(())
    )
    try:
        this.open()
        assert this.read_only and this.directory == earlier.directory and not this.takes_over
        assert this.warnings() == [] and not this.status()["writer_gone"]
        earlier.close()
        status = this.status()
        assert status["writer_gone"] and status["mode"] == "read-only"
        assert status["warnings"] == this.warnings() == [WRITER_GONE]
        assert "restart this daemon to take it over" in WRITER_GONE
    finally:
        this.close()
        earlier.close()


def test_an_earlier_versions_archive_left_beside_this_ones_after_a_rollback_is_named_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Upgrade, roll back below the version that names archives by the log's id (the earlier one
    starts a second archive, named after the log's description, and archives its writes there with
    who made them), upgrade again: the archive named by id was opened and the other one ignored
    without a word, its records then visible only as ``external``."""
    root = tmp_path / "history"
    old = open_stack(tmp_path)  # an archive named after the log's description: an earlier version's
    old.append([(key(1), value(1))], operation="PATCH")
    assert old.archive.sync(10)
    old.close()
    description, legacy = old.log.description, old.archive.directory
    upgraded = HistoryArchive(root, "elsewhere", archive_identity="log-id")  # this version's, named by the id
    upgraded.open()
    upgraded.close()
    stable = root / log_slug("log-id")
    assert stable.is_dir() and legacy.is_dir()

    caplog.set_level(logging.WARNING, logger="emulator.history.adoption")
    this = HistoryArchive(root, description, archive_identity="log-id")
    try:
        this.open()
        assert this.directory == stable and this.writable, "this version's archive is the one opened"
    finally:
        this.close()
    (said,) = [r.getMessage() for r in caplog.records if r.name == "emulator.history.adoption"]
    assert f"history archive {legacy}, named by an earlier version after {description}, is left beside" in said
    assert "it holds 1 archive file(s) with records from " in said
    assert f"emulator.history.read_history({str(root)!r}, log={description!r})" in said
    (row,) = read_history(root, log=description)  # as the message says: the earlier version's records
    assert row["operation"] == "PATCH" and row["origin"] != "external"
