"""Which archive a log's history lives in: one per log, wherever its data directory is moved.

The archive is built as the daemon builds it (``wiring.history_archive``) over an embedded log, so
these tests state what an operator sees: a data directory moved with ``mv`` keeps its history, and
an archive an earlier version made (named after the SQLite file's path) is taken over as it is.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from emulator.history.archive import HistoryArchive
from emulator.history.directory import log_slug
from emulator.history.origins import OriginRegistry, write_origin
from emulator.history.query import HistoryReader, list_logs, read_history
from emulator.history.tracked_log import TrackedLog
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.records import Position
from emulator.server import wiring
from emulator.server.settings import Settings
from emulator.view.offset_view import OffsetView

LOG_FILE = "connect-offsets.sqlite3"


@dataclass
class Daemon:
    """The log, view and archive of a daemon on ``data`` (history in ``data/history``)."""

    log: EmbeddedOffsetLog
    archive: HistoryArchive
    writer: TrackedLog

    def append(self, n: int, operation: str | None) -> None:
        entries: list[tuple[bytes, bytes | None]] = [(b'["c",{"file":"f%d"}]' % n, b'{"pos":%d}' % n)]
        if operation is None:
            positions = self.log.append(entries)  # Connect's write, not the daemon's
        else:
            with write_origin(operation, "c"):
                positions = self.writer.append(entries)
        self.wait_applied(positions)

    def wait_applied(self, positions: list[Position]) -> None:
        deadline = time.monotonic() + 10
        while not all(self.log.progress().positions.get(p.partition, 0) > p.offset for p in positions):
            assert time.monotonic() < deadline, f"view did not apply {positions}"
            time.sleep(0.005)

    def rows(self) -> list[dict[str, Any]]:
        assert self.archive.sync(10)
        rows = HistoryReader(self.archive.directory, self.archive).rows()
        return sorted(rows, key=lambda r: bytes(r["key"]))  # written in the order of their keys

    def close(self) -> None:
        self.log.close()
        self.archive.close()


@pytest.fixture
def started() -> Iterator[list[Daemon]]:
    daemons: list[Daemon] = []
    yield daemons
    for daemon in daemons:
        daemon.close()


def start(data: Path, started: list[Daemon]) -> Daemon:
    """Open the log, then its archive as ``serve`` wires it, and read the log to its end."""
    log = EmbeddedOffsetLog(data, partitions=2, synchronous="NORMAL")
    log.open()
    origins = OriginRegistry()
    archive = wiring.history_archive(Settings(data_dir=data), log, origins)
    archive.open()
    view = OffsetView()
    view.add_listener(archive.listener)
    log.start_reading(view.apply)
    daemon = Daemon(log, archive, TrackedLog(log, origins))
    started.append(daemon)
    deadline = time.monotonic() + 20
    while not log.progress().caught_up:
        assert time.monotonic() < deadline, "log never caught up"
        time.sleep(0.01)
    return daemon


def stop(daemon: Daemon, started: list[Daemon]) -> None:
    daemon.close()
    started.remove(daemon)


def stored_log_id(data: Path) -> str:
    with sqlite3.connect(data / LOG_FILE) as conn:
        (log_id,) = conn.execute("SELECT value FROM meta WHERE key = 'log_id'").fetchone()
    return str(log_id)


def test_a_data_directory_moved_to_another_path_keeps_one_history(tmp_path: Path, started: list[Daemon]) -> None:
    """``mv`` of a data directory (history inside it) used to start a new, empty archive beside the old
    one: the past re-archived as ``external``. Now the moved log is the same log to its archive."""
    before = start(tmp_path / "before", started)
    before.append(1, "PATCH")
    before.append(2, None)
    old_description = before.log.description
    archived_in = before.archive.directory.name
    stop(before, started)

    shutil.move(tmp_path / "before", tmp_path / "after")
    after = start(tmp_path / "after", started)
    rows = after.rows()
    status = after.archive.status()
    assert (status["records_archived"], status["records_skipped_replay"]) == (0, 2), "nothing archived twice"
    assert [(r["origin"], r["operation"], r["epoch"]) for r in rows] == [("daemon", "PATCH", 0), ("external", None, 0)]
    assert {r["log"] for r in rows} == {old_description}, "a row keeps the log it was written with"

    after.append(3, "PATCH")
    assert after.archive.directory.name == archived_in
    assert os.listdir(tmp_path / "after" / "history") == [archived_in], "one archive, no new one beside it"
    rows = after.rows()
    assert [(r["origin"], r["epoch"], r["log"]) for r in rows][-1] == ("daemon", 0, after.log.description)
    history = tmp_path / "after" / "history"
    assert [entry["log"] for entry in list_logs(history)] == [after.log.description]
    for name in (old_description, after.log.description, f"embedded-log:{stored_log_id(tmp_path / 'after')}"):
        assert len(list(read_history(history, log=name))) == 3, f"the archive is found by {name}"


def test_a_damaged_log_json_is_set_aside_with_an_error_not_silently_rewritten(
    tmp_path: Path, started: list[Daemon], caplog: pytest.LogCaptureFixture
) -> None:
    """``log.json`` lists the log's earlier descriptions (``earlier``: how a query naming the log by its
    old path finds the archive). A damaged one used to be rewritten without it, silently. Now the start
    logs an ERROR naming the file and what is lost, and keeps the damaged copy as ``log.json.damaged``."""
    before = start(tmp_path / "before", started)
    before.append(1, "PATCH")
    stop(before, started)
    shutil.move(tmp_path / "before", tmp_path / "after")
    after = start(tmp_path / "after", started)  # the marker now lists the old path under "earlier"
    directory = after.archive.directory
    stop(after, started)
    marker = directory / "log.json"
    assert json.loads(marker.read_text())["earlier"]
    damaged = marker.read_bytes()[:-9]  # cut short: no longer JSON
    marker.write_bytes(damaged)

    caplog.set_level(logging.ERROR, logger="emulator.history.directory")
    again = start(tmp_path / "after", started)
    again.append(2, "PATCH")
    assert (directory / "log.json.damaged").read_bytes() == damaged, "the damaged copy is kept, not overwritten"
    assert json.loads(marker.read_text())["log"] == again.log.description, "a readable marker again"
    (line,) = [r.getMessage() for r in caplog.records if "log.json" in r.getMessage()]
    assert str(marker) in line and "is damaged (not JSON" in line and "set aside as log.json.damaged" in line
    assert "earlier descriptions" in line and "no longer finds this archive" in line
    stop(again, started)

    marker.write_text('["not", "an object"]\n', encoding="utf-8")  # damaged again: the first copy stays
    start(tmp_path / "after", started)
    assert (directory / "log.json.damaged").read_bytes() == damaged
    assert (directory / "log.json.damaged.1").read_text() == '["not", "an object"]\n'


def _made_by_an_earlier_version(data: Path) -> tuple[str, list[str]]:
    """A log and its archive as a version before 2026-11-28 left them: no id in the log's file, the
    archive named after the file's path, its marker and state naming that path. Returns the path's
    description and the archive's origins."""
    log = EmbeddedOffsetLog(data, partitions=2, synchronous="NORMAL")
    log.open()
    origins = OriginRegistry()
    archive = HistoryArchive(data / "history", log.description, origins=origins, rotate_bytes=1)
    archive.open()
    view = OffsetView()
    view.add_listener(archive.listener)
    log.start_reading(view.apply)
    daemon = Daemon(log, archive, TrackedLog(log, origins))
    daemon.append(1, "PATCH")
    daemon.append(2, "PATCH")
    daemon.append(3, None)
    written = [r["origin"] for r in daemon.rows()]
    daemon.close()
    with sqlite3.connect(data / LOG_FILE) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'log_id'")
    (archive.directory / "log.json").write_text(json.dumps({"log": log.description}) + "\n", encoding="utf-8")
    return log.description, written


def test_an_archive_an_earlier_version_named_after_the_path_is_taken_over_without_a_rebuild(
    tmp_path: Path, started: list[Daemon], caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    description, written = _made_by_an_earlier_version(data)
    assert written == ["daemon", "daemon", "external"]
    caplog.set_level(logging.INFO)

    daemon = start(data, started)
    names = os.listdir(data / "history")
    assert len(names) == 1 and names != [log_slug(description)], "renamed, not copied or started anew"
    identity = f"embedded-log:{stored_log_id(data)}"
    assert names == [log_slug(identity)]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "no rebuild of the watermark"
    taken = [r.getMessage() for r in caplog.records if "named by an earlier version" in r.getMessage()]
    assert len(taken) == 1 and log_slug(description) in taken[0] and log_slug(identity) in taken[0]
    rows = daemon.rows()
    status = daemon.archive.status()
    assert (status["records_archived"], status["records_skipped_replay"], status["epoch"]) == (0, 3, 0)
    assert [r["origin"] for r in rows] == written
    state = json.loads((daemon.archive.directory / "state.json").read_text(encoding="utf-8"))
    marker = json.loads((daemon.archive.directory / "log.json").read_text(encoding="utf-8"))
    assert state["log"] == identity and marker == {"log": description, "archive": identity}
    assert len(list(read_history(data / "history", log=description))) == 3, "still found by its old name"


@pytest.mark.slow
def test_an_earlier_versions_archive_its_daemon_still_writes_is_left_where_it_is(
    tmp_path: Path, started: list[Daemon], caplog: pytest.LogCaptureFixture
) -> None:
    """Renaming the directory under a running daemon of the earlier version would break its writes:
    this one serves that archive read-only, as before, and says why."""
    data = tmp_path / "data"
    description, _ = _made_by_an_earlier_version(data)
    legacy = data / "history" / log_slug(description)
    fd = os.open(legacy / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # that daemon's writer's lock
        daemon = start(data, started)
        assert daemon.archive.directory == legacy and daemon.archive.read_only
        assert os.listdir(data / "history") == [legacy.name]
        assert any("a running process writes it" in r.getMessage() for r in caplog.records)
    finally:
        os.close(fd)


def test_a_log_created_anew_where_one_was_lost_goes_on_in_its_archive_in_a_new_epoch(
    tmp_path: Path, started: list[Daemon], caplog: pytest.LogCaptureFixture
) -> None:
    """The SQLite file deleted and created anew (another id): as while archives were named by path,
    the archive goes on with the new log in a new epoch, so that ``--epoch`` and rollbacks reach what
    the lost log held; a new archive beside it would have left that history to ``read_history`` alone."""
    data = tmp_path / "data"
    lost = start(data, started)
    lost.append(1, "PATCH")
    lost.append(2, "PATCH")
    old_id = stored_log_id(data)
    stop(lost, started)
    for name in os.listdir(data):
        if name.startswith(LOG_FILE):
            (data / name).unlink()

    again = start(data, started)
    new_id = stored_log_id(data)
    assert new_id != old_id
    again.append(3, "PATCH")
    assert os.listdir(data / "history") == [log_slug(f"embedded-log:{new_id}")], "renamed, no second archive"
    assert [(r["epoch"], r["origin"]) for r in again.rows()] == [(0, "daemon"), (0, "daemon"), (1, "daemon")]
    (warning,) = [r.getMessage() for r in caplog.records if "created anew" in r.getMessage()]
    assert f"embedded-log:{old_id}" in warning and "--epoch" in warning
    assert not [r for r in caplog.records if "rebuilding the watermark" in r.getMessage()], "state taken over"
    assert any("Starting epoch 1" in r.getMessage() for r in caplog.records), "the archiver's own ERROR says so"


def test_the_archive_of_a_log_moved_away_is_not_taken_by_a_log_at_another_path(
    tmp_path: Path, started: list[Daemon]
) -> None:
    """Only the place a log was last seen hands its archive over: a new log elsewhere on the same
    --history-dir starts its own."""
    history = tmp_path / "history"
    first = EmbeddedOffsetLog(tmp_path / "one", partitions=2, synchronous="NORMAL")
    first.open()
    one = HistoryArchive(history, first.description, archive_identity=first.archive_identity)
    one.open()
    one.close()
    first.close()
    second = EmbeddedOffsetLog(tmp_path / "two", partitions=2, synchronous="NORMAL")
    second.open()
    try:
        two = HistoryArchive(history, second.description, archive_identity=second.archive_identity)
        two.open()
        two.close()
    finally:
        second.close()
    assert sorted(os.listdir(history)) == sorted([one.directory.name, two.directory.name])
    assert one.directory != two.directory


def test_two_daemons_starting_together_on_an_earlier_versions_archive_end_in_one_directory(tmp_path: Path) -> None:
    """The second finds the directory's lock held for a moment by the first, which renames it: it
    follows the rename instead of taking the first for a daemon of the earlier version."""
    from emulator.history.adoption import adopt

    root = tmp_path / "history"
    legacy = root / log_slug("embedded:///a")
    legacy.mkdir(parents=True)
    fd = os.open(legacy / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the first daemon, mid-way through its rename
    renamer = threading.Timer(0.3, lambda: (os.rename(legacy, root / log_slug("embedded-log:x")), os.close(fd)))
    renamer.start()
    try:
        location = adopt(root, "embedded-log:x", "embedded:///a")
    finally:
        renamer.join()
    assert location.directory == root / log_slug("embedded-log:x") and location.identity == "embedded-log:x"
    assert os.listdir(root) == [log_slug("embedded-log:x")]
