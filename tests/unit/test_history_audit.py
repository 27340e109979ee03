"""Who made each change: the archive's audit fields, and archives written before they existed.

``data/history-v1/`` is an archive written by the code before ``principal`` and ``remote`` were added
to ``schemas/history-record.avsc`` (``make_v1_archive.py`` there says how); the new code must read
it as it is, and keep writing next to it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from emulator.cli.history import who_text
from emulator.history.archive import HistoryArchive
from emulator.history.files import ReadReport
from emulator.history.origins import OriginRegistry, write_origin
from emulator.history.query import HistoryReader, change_view, read_history
from emulator.history.schema import history_schema
from emulator.history.tracked_log import TrackedLog
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.principal import Principal, current_principal
from emulator.view.offset_view import OffsetView

V1 = Path(__file__).parent / "data" / "history-v1"
V1_IDENTITY = "embedded:///v1/v1-offsets.sqlite3"
RECORDS = [  # the records of the v1 archive, in log order: (key, value, origin, operation)
    (b'["c",{"file":"f1"}]', b'{"pos":10}', "daemon", "PATCH"),
    (b'["c",{"file":"f2"}]', b'{"pos":20}', "daemon", "PATCH"),
    (b'["c",{"file":"f1"}]', b'{"pos":11}', "external", None),
]


def copy_v1(tmp: Path) -> Path:
    root = tmp / "history"
    shutil.copytree(V1, root, ignore=shutil.ignore_patterns("*.py"))
    return root


def wait_read(log: EmbeddedOffsetLog, records: int) -> None:
    deadline = time.monotonic() + 10
    while log.progress().records_read < records:
        assert time.monotonic() < deadline, f"the reader did not deliver {records} records within 10 s"
        time.sleep(0.01)


def test_the_schema_only_adds_nullable_fields_with_a_null_default() -> None:
    fields = {f["name"]: f for f in history_schema()["fields"]}
    for name in ("principal", "remote"):
        assert fields[name]["type"] == ["null", "string"] and fields[name]["default"] is None


def test_an_archive_written_before_the_audit_fields_reads_whole_with_them_empty(tmp_path: Path) -> None:
    report = ReadReport()
    rows = list(read_history(copy_v1(tmp_path), report=report))
    assert report.damaged == [] and report.records == 3  # the old checksums still verify
    assert [(r["key"], r["value"], r["origin"], r["operation"]) for r in rows] == RECORDS
    assert all(r["principal"] is None and r["remote"] is None for r in rows)
    change = change_view(rows[0])
    assert (change["principal"], change["remote"]) == (None, None)
    assert who_text(dict(change)) == "-"


def test_a_daemon_upgraded_over_an_old_archive_keeps_it_and_names_who_writes_next(tmp_path: Path) -> None:
    # The same log as the old daemon's (same records, so the archive recognises it), the new code on top.
    log = EmbeddedOffsetLog(tmp_path / "data", partitions=3, synchronous="NORMAL", name="v1-offsets")
    log.open()
    log.append([(key, value) for key, value, _, _ in RECORDS])
    view, origins = OffsetView(), OriginRegistry()
    archive = HistoryArchive(copy_v1(tmp_path), V1_IDENTITY, origins=origins, progress=log.progress)
    archive.open()
    try:
        view.add_listener(archive.listener)
        log.start_reading(view.apply)
        wait_read(log, 3)
        token = current_principal.set(Principal("alice", "basic", ("write",), "10.0.0.7:51234"))
        try:
            with write_origin("DELETE", "c"):
                TrackedLog(log, origins).append([(b'["c",{"file":"f2"}]', None)])
        finally:
            current_principal.reset(token)
        with write_origin("rollback", "c"):  # a write outside any request: the anonymous principal
            TrackedLog(log, origins).append([(b'["c",{"file":"f2"}]', b'{"pos":20}')])
        wait_read(log, 5)
        assert archive.sync(10)
        report = ReadReport()
        rows = list(HistoryReader(archive.directory, archive, report=report).rows())
    finally:
        log.close()
        archive.close()
    assert report.damaged == [] and len(rows) == 5
    old, new = rows[:3], rows[3:]
    assert [(r["key"], r["value"], r["origin"], r["operation"]) for r in old] == RECORDS  # not archived twice
    assert [(r["operation"], r["principal"], r["remote"]) for r in new] == [
        ("DELETE", "alice", "10.0.0.7:51234"),
        ("rollback", "anonymous", None),
    ]
    assert who_text(dict(change_view(new[0]))) == "alice@10.0.0.7"


def test_the_who_column_names_the_principal_and_the_clients_host() -> None:
    assert who_text({"principal": "alice", "remote": "10.0.0.7:51234"}) == "alice@10.0.0.7"
    assert who_text({"principal": "ci", "remote": "[::1]:40000"}) == "ci@[::1]"
    assert who_text({"principal": "anonymous", "remote": None}) == "anonymous"
    assert who_text({"principal": None, "remote": None}) == "-"
