"""The embedded log's records table: large values do not slow later writes, and a log made in the
earlier layout (``WITHOUT ROWID``) is rebuilt when opened, every record kept byte for byte.

Why it matters: in the earlier layout every insert compared its key with whole rows on its way down
the B-tree, so six legal 20 MB offsets made a 30,000-partition PATCH read 3 GB and time out
(emulator/logs/embedded/storage.py says more).
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.records import LogRecord
from tests.fixtures.waits import until

EARLIER_RECORDS_TABLE = (
    "CREATE TABLE records (partition INTEGER NOT NULL, offset INTEGER NOT NULL, "
    "key BLOB, value BLOB, timestamp_ms INTEGER NOT NULL, PRIMARY KEY (partition, offset)) WITHOUT ROWID"
)
"""The table as versions before 2026-11-28 created it."""

BIG_VALUE = b'{"blob":"' + b"a" * (4 * 1024 * 1024) + b'"}'


def key(connector: str, n: int) -> bytes:
    return b'["%s",{"file":"/data/%d.txt"}]' % (connector.encode(), n)


def read_all(log: EmbeddedOffsetLog) -> list[LogRecord]:
    records: list[LogRecord] = []
    log.start_reading(records.extend)
    until(lambda: log.progress().caught_up, "the replay to catch up")
    return records


def bytes_read_by_this_process() -> int:
    """``rchar``: every byte this process's read calls returned, from the page cache or the disk."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def log(data_dir: Path) -> Iterator[EmbeddedOffsetLog]:
    opened = EmbeddedOffsetLog(data_dir, partitions=5)
    opened.open()
    yield opened
    opened.close()


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io to count bytes read")
def test_writes_after_a_few_large_values_read_about_what_they_write_not_the_large_values(
    log: EmbeddedOffsetLog,
) -> None:
    for n in range(6):
        log.append([(key("big", n), BIG_VALUE)])
    before = bytes_read_by_this_process()
    for batch in range(20):
        log.append([(key("small", batch * 100 + i), b'{"position":%d}' % i) for i in range(100)])
    read = bytes_read_by_this_process() - before
    # 2,000 small records: the earlier layout read the 4 MiB values again and again (gigabytes).
    assert read < 64 * 1024 * 1024, f"{read:,} bytes read for 2,000 small writes"


def make_earlier_layout(data_dir: Path, records: list[tuple[bytes, bytes | None]]) -> None:
    """A log as an earlier version left it: written by today's log, then its table rebuilt the old way."""
    log = EmbeddedOffsetLog(data_dir, partitions=5)
    log.open()
    log.append(records)
    log.close()
    conn = sqlite3.connect(data_dir / "connect-offsets.sqlite3", isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ALTER TABLE records RENAME TO records_now")
        conn.execute(EARLIER_RECORDS_TABLE)
        conn.execute("INSERT INTO records SELECT partition, offset, key, value, timestamp_ms FROM records_now")
        conn.execute("DROP TABLE records_now")
        conn.execute("COMMIT")
    finally:
        conn.close()


def records_table_sql(data_dir: Path) -> str:
    conn = sqlite3.connect(data_dir / "connect-offsets.sqlite3")
    try:
        (sql,) = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'records'").fetchone()
        return str(sql)
    finally:
        conn.close()


def test_a_log_in_the_earlier_layout_is_rebuilt_when_opened_keeping_every_record(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    written: list[tuple[bytes, bytes | None]] = [(key("c", i % 37), b'{"position":%d}' % i) for i in range(500)]
    written += [(key("c", 3), None), (key("c", 4), b""), (key("big", 0), BIG_VALUE)]
    make_earlier_layout(data_dir, written)
    assert "WITHOUT ROWID" in records_table_sql(data_dir)

    with caplog.at_level(logging.INFO, logger="emulator.logs.embedded.storage"):
        log = EmbeddedOffsetLog(data_dir, partitions=5)
        log.open()
    try:
        assert "WITHOUT ROWID" not in records_table_sql(data_dir)
        assert any(
            "records rebuilt in the current layout" in r.getMessage() and "503 records" in r.getMessage()
            for r in caplog.records
        )
        replayed = read_all(log)
        assert Counter((r.key, r.value) for r in replayed) == Counter(written)
        assert sum(1 for r in replayed if r.value is None) == 1 and sum(1 for r in replayed if r.value == b"") == 1
        # Offsets go on from where the earlier layout left them: no offset is handed out twice.
        ends = {p: max(r.offset for r in replayed if r.partition == p) for p in {r.partition for r in replayed}}
        (after,) = log.append([(key("c", 0), b'{"position":9999}')])
        assert after.offset == ends.get(after.partition, -1) + 1
    finally:
        log.close()


def test_a_log_in_the_current_layout_is_opened_as_it_is(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = EmbeddedOffsetLog(data_dir, partitions=5)
    log.open()
    log.append([(key("c", 1), b'{"position":1}')])
    log.close()
    with caplog.at_level(logging.INFO, logger="emulator.logs.embedded.storage"):
        reopened = EmbeddedOffsetLog(data_dir, partitions=5)
        reopened.open()
    reopened.close()
    assert not any("rebuilt" in r.getMessage() for r in caplog.records)
    assert "WITHOUT ROWID" not in records_table_sql(data_dir)


def test_the_rebuild_is_announced_before_it_starts_not_blamed_on_another_process(data_dir: Path) -> None:
    """The upgrade QA saw ``/readyz`` say, for the seconds a 481 MB log's rebuild took, that the log
    waited for "SQLite's write lock, which another process holds": there was no other process."""
    make_earlier_layout(data_dir, [(key("c", i), b'{"position":%d}' % i) for i in range(50)])
    heard: list[str] = []
    log = EmbeddedOffsetLog(data_dir, partitions=5, on_startup_wait=heard.append)
    log.open()
    log.close()
    assert len(heard) == 1, heard
    assert "is rebuilding its records in the current layout, once after an upgrade from a version before" in heard[0]
    assert "it needs about twice that in free disk space while it runs" in heard[0]


def test_a_rebuild_the_file_size_limit_stops_says_what_it_needs_and_changes_nothing(data_dir: Path) -> None:
    """Under ``ulimit -f`` the copy failed as a bare "disk I/O error"; in a process of its own, as the
    limit applies to the whole process."""
    make_earlier_layout(data_dir, [(key("big", n), BIG_VALUE) for n in range(4)])
    size = (data_dir / "connect-offsets.sqlite3").stat().st_size
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog\n"
        "from emulator.model.errors import LogConfigError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({size // 2}, resource.RLIM_INFINITY))\n"
        "try:\n"
        f"    EmbeddedOffsetLog(Path({str(data_dir)!r}), partitions=5).open()\n"
        "except LogConfigError as e:\n"
        "    print(e)\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "rebuilding the records table in the current layout" in done.stdout, done.stdout
    assert "failed: disk I/O error; nothing was changed" in done.stdout, done.stdout
    assert f"it needs about twice the log file's {size:,} bytes in free disk space" in done.stdout, done.stdout
    assert "WITHOUT ROWID" in records_table_sql(data_dir), "the failed rebuild changed the table"
