"""The daemon compacts its embedded log by itself, as Kafka's cleaner compacts the offsets topic.

Without it the log kept every commit forever (a Connect task commits every minute), and the only
way to shrink it was a line of Python. The compactor checks every ``--compaction-interval`` and
compacts once the log holds twice the records its last compaction left (and at least 100,000), so
it runs about as often as the log doubles, never on a small log, and never over and over on a log
with nothing to remove. Readers see the same final state: the latest record of every key stays.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.embedded.compaction import CompactionPolicy, CompactionReport, Compactor
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.records import LogRecord
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.waits import until
from tests.integration.scrape import parse


def commits(connector: str, keys: int, rounds: int, start: int = 0) -> list[tuple[bytes, bytes | None]]:
    """``rounds`` commits of each of ``keys`` partitions: positions start, start + 1, ..."""
    return [
        (encode_key(connector, {"file": f"f{k}"}), encode_offset({"position": start + r}))
        for r in range(rounds)
        for k in range(keys)
    ]


def seed(data: Path, entries: list[tuple[bytes, bytes | None]]) -> None:
    """Write ``entries`` to a two-partition embedded log at ``data``, as Connect would, no daemon running."""
    log = EmbeddedOffsetLog(data, partitions=2, synchronous="NORMAL")
    log.open()
    log.append(entries, 30)
    log.close()


def archived_by_a_daemon(daemon_factory: DaemonFactory, data: Path) -> None:
    """A daemon on ``data`` reads the log, archives all of it, and stops cleanly."""
    daemon_factory("--data-dir", str(data), "--offsets-partitions", "2", "--compaction-interval", "never").stop()


def test_the_compactor_compacts_once_the_log_has_doubled_and_the_readers_state_is_unchanged(tmp_path: Path) -> None:
    """The policy, one check at a time (the daemon's thread runs ``check`` every interval: the test
    below), each after the reader has read everything, since records it has not read are kept."""
    connector = f"compacted-{time.monotonic_ns()}"
    seen: dict[bytes, bytes | None] = {}

    def sink(records: list[LogRecord]) -> None:
        for record in records:
            seen[record.key] = record.value

    log = EmbeddedOffsetLog(tmp_path, partitions=2, synchronous="NORMAL")
    compactor = Compactor(log.description, log.record_count, log.compact, 60.0, CompactionPolicy(min_records=50))
    written: list[tuple[bytes, bytes | None]] = []

    def append(entries: list[tuple[bytes, bytes | None]]) -> CompactionReport | None:
        log.append(entries, 30)
        written.extend(entries)
        log.read_to_end(10)
        return compactor.check()

    log.open()
    log.start_reading(sink)
    try:
        assert append(commits(connector, keys=10, rounds=4)) is None, "compacted 40 records, below the minimum"
        assert log.record_count() == 40

        first = append(commits(connector, keys=30, rounds=10, start=4))  # 340 records, 30 keys
        assert first is not None and (first.records_before, first.records_after) == (340, 30)

        assert append(commits(connector, keys=20, rounds=1, start=14)) is None, "compacted 50: not twice 30"
        assert log.record_count() == 50

        again = append(commits(connector, keys=10, rounds=1, start=15))  # 60: twice what the last one left
        assert again is not None and (again.records_before, again.records_after) == (60, 30)
    finally:
        log.close()

    latest = dict(written)
    assert len(latest) == 30
    assert seen == latest, "the reader's state is the latest record of every key"
    with sqlite3.connect(log.path) as conn:
        kept = dict(conn.execute("SELECT key, value FROM records").fetchall())
    assert kept == latest


@pytest.mark.parametrize("made_by", ["a version that never compacted", "this version"])
def test_the_first_compaction_of_a_log_an_older_version_kept_whole_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, made_by: str
) -> None:
    """Versions before 2026-11-27 never compacted the embedded log; an upgraded daemon compacts such
    a log at its first check after the interval. An operator who relied on the log keeping every
    record learns it from a WARNING once, not from an INFO line among many; a log this version made
    (and every later compaction) stays at INFO."""
    log = EmbeddedOffsetLog(tmp_path, partitions=1, synchronous="NORMAL")
    log.open()
    if made_by != "this version":
        with log._writing.held() as conn:  # as an older version created it: no compacting_since_ms
            conn.execute("DELETE FROM meta WHERE key = 'compacting_since_ms'")
    compactor = Compactor(log.description, log.record_count, log.compact, 60.0, CompactionPolicy(min_records=10))
    try:
        with caplog.at_level("INFO", logger="emulator.logs.embedded.compaction"):
            log.append(commits("upgraded", keys=5, rounds=4), 30)
            first = compactor.check()
            log.append(commits("upgraded", keys=5, rounds=4, start=4), 30)
            again = compactor.check()
    finally:
        log.close()
    assert first is not None and first.removed == 15 and again is not None and again.removed == 20
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    if made_by == "this version":
        assert warnings == []
    else:
        (warning,) = warnings
        assert "compacted for the first time: 15 superseded records removed" in warning
        assert "kept whole by a version before 2026-11-27" in warning and "--compaction-interval never" in warning


@pytest.mark.slow  # 100,010 records written, replayed by a daemon and compacted by it
def test_the_daemon_compacts_at_its_interval_once_it_holds_100000_records(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    seeded = EmbeddedOffsetLog(data, synchronous="NORMAL")
    seeded.open()
    connector = f"big-{time.monotonic_ns()}"
    for start in range(0, 100, 10):  # 100,000 commits of 1,000 partitions, 10,000 at a time
        seeded.append(commits(connector, keys=1_000, rounds=10, start=start), 60)
    seeded.close()

    daemon = daemon_factory("--data-dir", str(data), "--compaction-interval", "1s")
    # A second daemon on the directory serves the archive read-only and leaves compacting to the
    # first, which alone knows what its archive still has to read (docs/operations.md).
    other = daemon_factory("--data-dir", str(data), "--compaction-interval", "1s")
    # One without history does not know of the archive but finds its writer's lock where it would be.
    unarchived = daemon_factory("--data-dir", str(data), "--compaction-interval", "1s", "--no-history")
    until(lambda: "compacted embedded://" in daemon.log_tail(20), "the daemon's compaction", 30)
    for each in (other, unarchived):
        left = httpx.get(f"{each.url}/status", timeout=30).json()["compaction"]
        assert left["compactions"] == 0 and "another process writes this log's history archive" in (
            left["left_to_another_process"] or ""
        ), left
        assert "compacted embedded://" not in each.log_tail(200)
    line = next(line for line in daemon.log_tail(50).splitlines() if "compacted embedded://" in line)
    assert re.search(r": 100000 -> 1000 records in [0-9.]+ s$", line), line
    offsets = httpx.get(f"{daemon.url}/connectors/{connector}/offsets", timeout=30).json()["offsets"]
    assert len(offsets) == 1_000 and {o["offset"]["position"] for o in offsets} == {99}

    compaction = httpx.get(f"{daemon.url}/status", timeout=30).json()["compaction"]
    assert compaction["interval_s"] == 1.0 and compaction["compactions"] == 1
    assert (compaction["last_records_before"], compaction["last_records_after"]) == (100_000, 1_000)
    assert compaction["records_removed"] == 99_000 and compaction["last_error"] is None
    assert compaction["left_to_another_process"] is None
    metrics = parse(httpx.get(f"{daemon.url}/metrics", timeout=30))
    assert metrics.get("connect_offsets_log_compactions_total") == 1
    assert metrics.get("connect_offsets_log_compaction_removed_records_total") == 99_000
    assert (metrics.get("connect_offsets_log_compaction_last_timestamp_seconds") or 0) > time.time() - 60


@pytest.mark.slow
def test_connect_offsets_compact_compacts_a_log_no_daemon_serves_and_names_a_missing_one(tmp_path: Path) -> None:
    data = tmp_path / "copy"
    log = EmbeddedOffsetLog(data, partitions=3, name="backup", synchronous="NORMAL")
    log.open()
    log.append(commits("copied", keys=40, rounds=5), 30)  # 200 records of 40 keys
    log.close()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("compact", *args)

    done = cli("--data-dir", str(data), "--name", "backup")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"embedded://.*/backup\.sqlite3: 200 -> 40 records \(160 removed\) in [0-9.]+ s\n", done.stdout)
    with sqlite3.connect(data / "backup.sqlite3") as conn:
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 40

    missing = cli("--data-dir", str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    where = tmp_path / "nowhere" / "connect-offsets.sqlite3"
    assert missing.stderr == f"error: no embedded log at {where} (--data-dir, --offsets-topic)\n"
    assert not (tmp_path / "nowhere").exists(), "a log was created where none was"


def test_connect_offsets_compact_reads_the_daemons_variables(tmp_path: Path) -> None:
    """QA 21 #4: ``compact`` had flags of its own and ignored ``CONNECT_OFFSETS_DATA_DIR`` and
    ``CONNECT_OFFSETS_OFFSETS_TOPIC``, which ``serve`` reads (docs/configuration.md: every setting is
    a flag and a variable): in a daemon's environment it looked for ./data/connect-offsets.sqlite3.
    It now shares serve's declarations; a flag still wins over its variable, as everywhere."""
    data = tmp_path / "served-here"
    log = EmbeddedOffsetLog(data, partitions=2, name="my-offsets", synchronous="NORMAL")
    log.open()
    log.append(commits("env", keys=10, rounds=3), 30)
    log.close()
    env = {**os.environ, "CONNECT_OFFSETS_DATA_DIR": str(data), "CONNECT_OFFSETS_OFFSETS_TOPIC": "my-offsets"}

    done = run_cli("compact", env=env)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"embedded://.*/my-offsets\.sqlite3: 30 -> 10 records \(20 removed\) in [0-9.]+ s\n", done.stdout
    )

    flag_wins = run_cli("compact", "--data-dir", str(tmp_path / "nowhere"), env=env)
    assert flag_wins.returncode == 2
    assert flag_wins.stderr == (
        f"error: no embedded log at {tmp_path / 'nowhere' / 'my-offsets.sqlite3'} (--data-dir, --offsets-topic) "
        "(--offsets-topic came from CONNECT_OFFSETS_OFFSETS_TOPIC)\n"
    )


@pytest.mark.slow
def test_connect_offsets_compact_refuses_a_log_a_running_daemon_archives_unless_forced(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data = tmp_path / "served"
    seed(data, commits("served", keys=10, rounds=3))
    daemon_factory("--data-dir", str(data), "--offsets-partitions", "2", "--compaction-interval", "never")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("compact", "--data-dir", str(data), *args)

    refused = cli()
    assert refused.returncode == 2, refused.stdout
    assert refused.stderr.startswith("error: a running daemon archives embedded://") and "--force" in refused.stderr
    with sqlite3.connect(data / "connect-offsets.sqlite3") as conn:
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 30, "nothing removed"
    # Another process holding SQLite's write lock: the refusal needs no lock, so it does not wait for it
    # (it waited out the lock, up to 30 s, and then refused the same).
    holder = sqlite3.connect(data / "connect-offsets.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        held = cli()
        took = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (held.returncode, held.stderr) == (2, refused.stderr)
    assert took < 5, f"{took:.1f} s: it waited for the write lock"
    elsewhere = cli("--history-dir", str(tmp_path / "other-history"))
    assert elsewhere.returncode == 0, "no daemon archives it under that history directory"
    assert cli("--force").returncode == 0


@pytest.mark.slow
def test_connect_offsets_compact_keeps_what_the_history_archive_has_not_archived_yet(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """A daemon killed before its archiver caught up leaves records the archive lacks; the next
    daemon archives them when it reads the log. ``compact`` run in between removed them for good
    (50 changes lost from history in the reporter's run): it now stops at what the archive holds."""
    data = tmp_path / "crashed"
    seed(data, commits("crashed", keys=10, rounds=3))
    archived_by_a_daemon(daemon_factory, data)  # all 30
    seed(data, commits("crashed", keys=10, rounds=3, start=3))  # written, never archived

    done = run_cli("compact", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert "30 -> " not in done.stdout and "60 -> 30 records (30 removed)" in done.stdout, done.stdout
    assert "kept every record its history archive" in done.stdout, done.stdout

    again = daemon_factory("--data-dir", str(data), "--offsets-partitions", "2", "--compaction-interval", "never")
    url = f"{again.url}/connectors/crashed/offsets/history"
    until(lambda: len(httpx.get(url, params={"limit": 1000}).json()["changes"]) == 60, "all 60 changes in history")


@pytest.mark.slow
def test_connect_offsets_compact_on_a_moved_data_directory_keeps_what_its_history_archive_has_not_archived(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """The archive follows the log's id, not its path: ``compact`` on a data directory moved since its
    daemon stopped finds the archive inside it and keeps what it lacks, as before the move (it found
    none and compacted them away)."""
    data = tmp_path / "before"
    seed(data, commits("moved", keys=10, rounds=3))
    archived_by_a_daemon(daemon_factory, data)  # all 30
    moved = tmp_path / "after"
    shutil.move(data, moved)
    seed(moved, commits("moved", keys=10, rounds=3, start=3))  # written, never archived

    done = run_cli("compact", "--data-dir", str(moved))
    assert done.returncode == 0, done.stderr
    assert "60 -> 30 records (30 removed)" in done.stdout, done.stdout
    assert "kept every record its history archive" in done.stdout, done.stdout


@pytest.mark.slow
def test_connect_offsets_compact_says_it_kept_records_only_when_the_archive_lacks_some(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """A cleanly stopped daemon archived everything: nothing was kept back, and saying otherwise sent
    an operator looking for records that were not there."""
    data = tmp_path / "stopped"
    seed(data, commits("stopped", keys=5, rounds=2))
    archived_by_a_daemon(daemon_factory, data)

    done = run_cli("compact", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert "10 -> 5 records (5 removed)" in done.stdout and "kept every record" not in done.stdout, done.stdout


def test_status_says_whom_compaction_is_left_to_as_it_is_now_not_as_at_the_last_check(tmp_path: Path) -> None:
    """A read-only daemon's ``/status`` said "another process writes this log's history archive" for
    up to --compaction-interval (10 minutes) after that process had stopped."""
    log = EmbeddedOffsetLog(tmp_path, partitions=1, synchronous="NORMAL")
    compactor = Compactor(log.description, log.record_count, log.compact, 600.0)
    writer: list[str | None] = ["another process writes this log's history archive"]
    compactor.leave_while(lambda: writer[0])
    assert compactor.status()["left_to_another_process"] == writer[0]
    writer[0] = "the process that wrote it has stopped"
    assert compactor.status()["left_to_another_process"] == writer[0], "asked at the status, not at the next check"


def test_closing_the_log_cuts_a_compaction_short_between_two_steps(tmp_path: Path) -> None:
    """A daemon that stops does not wait for a compaction to finish: the steps already taken stand,
    the rest is left for the next start."""
    log = EmbeddedOffsetLog(tmp_path, partitions=2, synchronous="NORMAL")
    log.open()
    try:
        log.append(commits("stopping", keys=10, rounds=1_000), 60)  # 10,000 records, 5 steps of 2,000 or so
        stop = threading.Event()
        stop.set()
        cut = log.compact(stop)
        assert cut.removed == 0 and log.record_count() == 10_000
        whole = log.compact()
        assert (whole.records_before, whole.records_after) == (10_000, 10)
    finally:
        log.close()


def test_a_compaction_the_disk_refuses_is_logged_and_done_at_a_later_check(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite refuses the compaction's deletes for real (``query_only`` on the log's writing
    connection answers SQLITE_READONLY, as a file made read-only does); the compactor says so once
    per check and compacts at the first check after the refusal ends."""
    connector = f"refused-{time.monotonic_ns()}"
    log = EmbeddedOffsetLog(
        tmp_path, partitions=1, synchronous="NORMAL", compaction_interval_s=0.1, compaction_min_records=100
    )
    log.open()
    log.start_reading(lambda records: None)
    try:
        log.append(commits(connector, keys=10, rounds=30), 30)
        log.read_to_end(10)
        with caplog.at_level("WARNING", logger="emulator.logs.embedded.compaction"):
            with log._writing.held() as writer:  # the log's one writing connection, as every user takes it
                writer.execute("PRAGMA query_only = 1")
            until(lambda: (log.compaction() or {}).get("last_error") is not None, "a refused compaction reported")
            status = log.compaction() or {}
            assert "readonly" in status["last_error"].lower() and status["compactions"] == 0, status
            assert log.record_count() == 300, "nothing removed"
            assert any("compaction failed, next check in 0.1 s" in r.getMessage() for r in caplog.records)
            with log._writing.held() as writer:
                writer.execute("PRAGMA query_only = 0")
            until(lambda: (log.compaction() or {}).get("compactions") == 1, "compacted once the disk takes writes")
        assert log.record_count() == 10
    finally:
        log.close()
