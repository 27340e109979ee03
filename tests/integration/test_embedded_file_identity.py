"""The embedded log's file deleted or replaced under a running daemon: writes are refused, not lost.

SQLite keeps writing to the file it has open, deleted or not, and in WAL mode never looks whether the
path still leads to it. Before, a daemon whose data directory was removed (``rm -rf``) answered every
later PATCH 200 and ``/readyz`` 200, and its restart created an empty log: every write acknowledged
since was lost without a word. Now the log compares the device and inode at its path with the ones it
opened, before and after each group commit and every second while idle: writes answer 503
``log_storage_refused`` naming what happened and what to do, ``/readyz`` answers 503 saying why, and
reads of what was acknowledged before go on (so it can still be exported).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import httpx
import pytest

from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.claims import Fence
from emulator.model.errors import LogStorageRefused
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.waits import until

PORT = 48217


def body(partition: str, offset: object) -> dict[str, object]:
    return {"offsets": [{"partition": {"file": partition}, "offset": {"position": offset}}]}


def records(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.slow  # a daemon process
def test_a_data_directory_deleted_under_the_daemon_turns_it_unready_and_refuses_writes(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """The QA repro: ``rm -rf`` of the data directory under a serving daemon. Without a write,
    ``/readyz`` turns 503 saying the file was deleted (the idle check, every second), and
    ``connect-offsets status`` says not ready; a PATCH is refused 503 ``log_storage_refused`` with
    nothing acknowledged; the offsets acknowledged before are still read; the log says so once at ERROR."""
    data = tmp_path / "data"
    daemon = daemon_factory("--data-dir", str(data), "--no-history", port=PORT)
    http = httpx.Client(base_url=daemon.url, timeout=30)
    url = "/connectors/a/offsets"
    for i in range(3):
        assert http.patch(f"{url}?create=true", json=body("f", i)).status_code == 200
    assert http.get("/readyz").status_code == 200

    shutil.rmtree(data)

    took = until(lambda: http.get("/readyz").status_code == 503, "unready once the log's file is gone", 5)
    assert took < 1.0 + 1.0, "the file is looked at every second"
    why = http.get("/readyz").json()["unreachable"]
    assert f"{data / 'connect-offsets.sqlite3'} was deleted while this process had it open" in why
    status = run_cli("status", "--url", daemon.url)
    assert status.returncode == 1, "`connect-offsets status` exits 1 while the daemon is not ready"

    refused = http.patch(url, json=body("f", 99))
    assert refused.status_code == 503, refused.text
    assert refused.headers["X-Connect-Offsets-Error"] == "log_storage_refused"
    message = refused.json()["message"]
    assert "was deleted while this process had it open" in message
    assert "a restart would not find the writes made since" in message
    assert "export them from it (connect-offsets export)" in message and message.endswith("nothing was written")

    offsets = http.get(url).json()["offsets"]  # reads go on, from what was acknowledged
    assert [row["offset"] for row in offsets] == [{"position": 2}]
    assert daemon.log_tail(400).count("ERROR emulator.logs.embedded.file_identity:") == 1, "one ERROR line"


def test_a_log_file_replaced_under_the_log_refuses_writes_and_claims_for_good(tmp_path: Path) -> None:
    """A backup copied over the running log's file (another inode at the path): a write would go to
    the file the log has open, which a restart no longer finds. It is refused before its commit
    (nothing written to either file), and so are claims and releases; ``reachability`` says so for
    good, as the log's file at the path stays another."""
    log = EmbeddedOffsetLog(tmp_path, partitions=3)
    log.open()
    try:
        log.append([(b"k1", b"v1")])
        fence = Fence("c", log.claim("c", "me").epoch)
        backup = tmp_path / "backup.sqlite3"
        shutil.copyfile(log.path, backup)
        backup.replace(log.path)

        with pytest.raises(LogStorageRefused) as refused:
            log.append([(b"k2", b"v2")], timeout_s=5)
        assert f"{log.path} was replaced by another file" in str(refused.value)
        assert str(refused.value).endswith("nothing was written")
        with pytest.raises(LogStorageRefused):
            log.claim("d", "me")
        with pytest.raises(LogStorageRefused):
            log.release(fence)
        assert f"{log.path} was replaced by another file" in (log.reachability() or "")
        with pytest.raises(LogStorageRefused):
            log.append([(b"k3", b"v3")], timeout_s=5)
    finally:
        log.close()
    assert records(log.path) == 1  # the restored file: what it held, nothing it was answered about after


def test_a_log_file_deleted_during_a_commit_is_not_acknowledged(tmp_path: Path) -> None:
    """The files deleted between the check before ``COMMIT`` and the commit itself (here: when SQLite
    starts running the ``COMMIT``): the commit succeeds into a file no path leads to, and the write
    is refused all the same, saying it reached only the file that is gone."""
    log = EmbeddedOffsetLog(tmp_path, partitions=3)
    log.open()
    try:
        log.append([(b"k1", b"v1")])

        def delete_at_commit(statement: str) -> None:
            if statement == "COMMIT":
                for file in tmp_path.glob("connect-offsets.sqlite3*"):
                    file.unlink()

        log._writing.require().set_trace_callback(delete_at_commit)
        with pytest.raises(LogStorageRefused) as refused:
            log.append([(b"k2", b"v2")], timeout_s=5)
        assert "was deleted while this process had it open" in str(refused.value)
        assert str(refused.value).endswith("which a restart will not find: it is not acknowledged")
    finally:
        log.close()


def test_the_write_ahead_log_alone_deleted_during_a_commit_is_not_acknowledged(tmp_path: Path) -> None:
    """Only the ``-wal`` deleted as the ``COMMIT`` runs: the commit's frames land in a file no path
    leads to, and a restart would open the main file without them. The check after the commit looked
    at the main file only, so such a write was acknowledged (the crash QA found it)."""
    log = EmbeddedOffsetLog(tmp_path, partitions=3)
    log.open()
    try:
        log.append([(b"k1", b"v1")])
        wal = log.path.with_name(log.path.name + "-wal")

        def delete_wal_at_commit(statement: str) -> None:
            if statement == "COMMIT" and wal.exists():
                wal.unlink()

        log._writing.require().set_trace_callback(delete_wal_at_commit)
        with pytest.raises(LogStorageRefused) as refused:
            log.append([(b"k2", b"v2")], timeout_s=5)
        assert f"{wal} was deleted while this process had it open" in str(refused.value)
        assert str(refused.value).endswith("which a restart will not find: it is not acknowledged")
    finally:
        log.close()


def test_the_idle_check_turns_the_log_unreachable_without_a_write(tmp_path: Path) -> None:
    """Only the write-ahead log deleted (its commits not yet in the main file): no write comes, and
    ``reachability`` (``/readyz``) says within about a second that the file is gone."""
    log = EmbeddedOffsetLog(tmp_path, partitions=3)
    log.open()
    try:
        log.append([(b"k1", b"v1")])
        assert log.reachability() is None
        wal = log.path.with_name(log.path.name + "-wal")
        wal.unlink()
        until(lambda: log.reachability() is not None, "unreachable once the write-ahead log is gone", 3)
        assert f"{wal} was deleted while this process had it open" in (log.reachability() or "")
    finally:
        log.close()
