"""The daemon compacts its embedded log by itself, as Kafka's cleaner compacts the offsets topic.

Without it the log kept every commit forever (a Connect task commits every minute), and the only
way to shrink it was a line of Python. The compactor checks every ``--compaction-interval`` and
compacts once the log holds twice the records its last compaction left (and at least 100,000), so
it runs about as often as the log doubles, never on a small log, and never over and over on a log
with nothing to remove. Readers see the same final state: the latest record of every key stays.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.records import LogRecord
from tests.fixtures.daemon import DaemonFactory


def until(predicate: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {timeout_s} s"
        time.sleep(0.02)


def commits(connector: str, keys: int, rounds: int, start: int = 0) -> list[tuple[bytes, bytes | None]]:
    """``rounds`` commits of each of ``keys`` partitions: positions start, start + 1, ..."""
    return [
        (encode_key(connector, {"file": f"f{k}"}), encode_offset({"position": start + r}))
        for r in range(rounds)
        for k in range(keys)
    ]


def test_the_compactor_compacts_once_the_log_has_doubled_and_the_readers_state_is_unchanged(tmp_path: Path) -> None:
    connector = f"compacted-{time.monotonic_ns()}"
    seen: dict[bytes, bytes | None] = {}

    def sink(records: list[LogRecord]) -> None:
        for record in records:
            seen[record.key] = record.value

    log = EmbeddedOffsetLog(
        tmp_path, partitions=2, synchronous="NORMAL", compaction_interval_s=0.05, compaction_min_records=50
    )
    written: list[tuple[bytes, bytes | None]] = []

    def append(entries: list[tuple[bytes, bytes | None]]) -> None:
        log.append(entries, 30)
        written.extend(entries)

    log.open()
    try:
        append(commits(connector, keys=10, rounds=4))  # 40 records of 10 keys: below the minimum of 50
        log.start_reading(sink)
        time.sleep(0.3)  # six checks
        assert log.record_count() == 40, "compacted a log below the minimum"

        append(commits(connector, keys=30, rounds=10, start=4))  # 340 records, 30 keys
        until(lambda: log.record_count() == 30, "compacted to one record per key")

        append(commits(connector, keys=20, rounds=1, start=14))  # 50 records: less than twice 30
        time.sleep(0.3)
        assert log.record_count() == 50, "compacted before the log had doubled"

        append(commits(connector, keys=10, rounds=1, start=15))  # 60: twice what the last compaction left
        until(lambda: log.record_count() == 30, "compacted again once doubled")
        log.read_to_end(10)
    finally:
        log.close()

    latest = dict(written)
    assert len(latest) == 30
    assert seen == latest, "the reader's state is the latest record of every key"
    with sqlite3.connect(log.path) as conn:
        kept = dict(conn.execute("SELECT key, value FROM records").fetchall())
    assert kept == latest


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

    daemon = daemon_factory("--data-dir", str(data), "--compaction-interval", "1s", "--no-history")
    until(lambda: "compacted embedded://" in daemon.log_tail(20), "the daemon's compaction", 30)
    line = next(line for line in daemon.log_tail(50).splitlines() if "compacted embedded://" in line)
    assert re.search(r": 100000 -> 1000 records in [0-9.]+ s$", line), line
    offsets = httpx.get(f"{daemon.url}/connectors/{connector}/offsets", timeout=30).json()["offsets"]
    assert len(offsets) == 1_000 and {o["offset"]["position"] for o in offsets} == {99}
