"""Compaction of the embedded log, Kafka's log cleaner for one SQLite file: which records to remove,
and when the daemon should bother.

Which: every record of a partition whose key has a later record in that partition (offsets are kept,
so readers, which track positions, skip the gaps; the latest record of each key stays, tombstones
included). They are found with a read of their own, which holds no lock: a record superseded in that
read stays superseded (a key's later records only get higher offsets), so records written meanwhile
are never candidates and the list stays true while it is deleted. A log that is being read only
offers records its reader has passed (``compact``). The deletes then go in steps of
``DELETE_STEP`` records per transaction, so a write waits at most one step, never a partition's
whole scan (one transaction per partition held writes for 50-80 ms at 40,000 records a partition).

When: ``CompactionPolicy`` compacts once the log holds twice the records it held after the last
compaction, Kafka's ``min.cleanable.dirty.ratio`` of 0.5 read the cheap way round (a count of
records is an index scan; counting distinct keys is a sort), and never for fewer than
``MIN_RECORDS`` records, where there is nothing worth the work.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emulator.logs.embedded.storage import COMPACTING_SINCE, LogFile, immediate
from emulator.logs.embedded.writing import WritingConnection
from emulator.model.errors import LogWriteError

log = logging.getLogger(__name__)

DELETE_STEP = 2_000
"""Records deleted per transaction: each step holds the write lock for a few milliseconds."""

_NO_BOUND = 1 << 62

MIN_RECORDS = 100_000
"""Below this many records the daemon does not compact on its own (``connect-offsets`` would
replay them in well under a second)."""

_YIELD_S = 0.002
"""Pause between compaction steps. ``threading.Lock`` is not fair: without a pause the compacting
thread takes the writing lock straight back and appends wait for the whole compaction."""


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What ``compact()`` did, for logs and the CLI."""

    records_before: int
    records_after: int
    duration_s: float
    first: bool = False
    """The log was created by a version before 2026-11-27 and never compacted since
    (``storage.COMPACTING_SINCE``): those versions never compacted by themselves, so a log they kept
    whole loses its superseded records the first time a daemon of this version compacts it
    (docs/operations.md, Upgrades)."""

    @property
    def removed(self) -> int:
        return self.records_before - self.records_after


def superseded(conn: sqlite3.Connection, partition: int, below: int | None = None) -> tuple[int, list[int]]:
    """The partition's record count and the offsets of its records a later record of the same key
    supersedes, in one statement (one consistent snapshot), holding no write lock; only offsets
    ``below`` the given one when it is given (the reader's position: see ``compact``)."""
    (count,) = conn.execute("SELECT count(*) FROM records WHERE partition = ?", (partition,)).fetchone()
    rows = conn.execute(
        "SELECT offset FROM records WHERE partition = ?1 AND offset < ?2 AND key IS NOT NULL AND offset NOT IN ("
        "SELECT max(offset) FROM records WHERE partition = ?1 AND key IS NOT NULL GROUP BY key) ORDER BY offset",
        (partition, _NO_BOUND if below is None else below),
    ).fetchall()
    return int(count), [int(row[0]) for row in rows]


def compact(
    file: LogFile,
    writing: WritingConnection,
    partitions: int,
    bound: Callable[[int], int | None],
    stop: threading.Event | None = None,
) -> CompactionReport:
    """Keep only the latest record per key in each partition, as Kafka's log cleaner does.

    Offsets are kept (readers skip the gaps, since they track positions, not counts) and the
    latest record of every key stays, tombstones included: dropping one could let a reader that
    already applied the older value miss the delete, which is what Kafka's
    ``delete.retention.ms`` guards against. Safe while readers and writers run: a reader behind
    the latest record still reaches it, one past it has applied it. The records to remove are
    found by a read that holds no lock and deleted ``DELETE_STEP`` at a time, so an append waits
    for one step at most. Freed pages go back to the file system when the file was created with
    incremental vacuum. ``stop`` (the daemon's compactor closing) ends it between two steps.

    Only offsets below ``bound(partition)`` are removed (None: no bound). A log that is being read
    bounds them by its reader's position, as Kafka's cleaner never touches the active segment:
    every record reaches the reader, and so the history archive, even one superseded a moment after
    it was written; and by the records a read back still needs (``keep_records``). The bound is
    asked again before every step, since the history archive may begin a read back while a
    compaction runs.
    """
    started = time.monotonic()
    before = removed = 0
    reader = file.connect(timeout_s=30.0)
    try:
        first = reader.execute("SELECT 1 FROM meta WHERE key = ?", (COMPACTING_SINCE,)).fetchone() is None
        for p in range(partitions):
            try:
                count, offsets = superseded(reader, p, bound(p))
            except sqlite3.Error as e:
                raise LogWriteError(f"{file.description}: the compaction of partition {p} failed ({e})") from e
            before += count
            for step in range(0, len(offsets), DELETE_STEP):
                if stop is not None and stop.is_set():
                    break
                chunk = offsets[step : step + DELETE_STEP]
                limit = bound(p)
                chunk = chunk if limit is None else [o for o in chunk if o < limit]
                if chunk:
                    _delete(writing, p, chunk)
                    removed += len(chunk)
                time.sleep(_YIELD_S)
            if stop is not None and stop.is_set():
                break
    finally:
        reader.close()
    if stop is None or not stop.is_set():
        _note_compacting(writing)
        _release_free_pages(writing)
    report = CompactionReport(before, before - removed, time.monotonic() - started, first)
    log.info(
        "compacted %s: %d -> %d records in %.2f s", file.description, before, report.records_after, report.duration_s
    )
    return report


def _note_compacting(writing: WritingConnection) -> None:
    with writing.held(time.monotonic() + 30.0) as conn:
        try:
            with immediate(conn):
                conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                    (COMPACTING_SINCE, str(time.time_ns() // 1_000_000)),
                )
        except sqlite3.Error as e:
            raise writing.refused(e, "recording the compaction") from e


def _delete(writing: WritingConnection, partition: int, offsets: list[int]) -> None:
    """One compaction step: delete these superseded records in one transaction."""
    with writing.held(time.monotonic() + 30.0) as conn:
        try:
            with immediate(conn):
                conn.executemany(
                    "DELETE FROM records WHERE partition = ? AND offset = ?", [(partition, o) for o in offsets]
                )
        except sqlite3.Error as e:
            raise writing.refused(e, f"the compaction of partition {partition}") from e


def _release_free_pages(writing: WritingConnection, pages_per_step: int = 256) -> None:
    """Give pages freed by compaction back to the file system, a bounded step at a time.

    One step (256 pages) holds the write lock for a few milliseconds, so appends interleave with
    a large vacuum instead of waiting for all of it (2,000-page steps held them up to 80 ms).
    ``executescript`` because Python's ``execute`` steps the pragma only once, which frees a
    single page. The file shrinks when the WAL is copied back, hence the PASSIVE checkpoint (it
    never waits for readers).
    """
    try:
        while True:
            with writing.held() as conn:
                (free,) = conn.execute("PRAGMA freelist_count").fetchone()
                if free == 0:
                    break
                conn.executescript(f"PRAGMA incremental_vacuum({pages_per_step});")
                (left,) = conn.execute("PRAGMA freelist_count").fetchone()
                if left >= free:  # auto_vacuum is off (a file from elsewhere): nothing to release
                    break
            time.sleep(_YIELD_S)
        with writing.held() as conn:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    except sqlite3.Error as e:
        log.warning("%s: compaction done but space was not released: %s", writing.description, e)


def record_count(conn: sqlite3.Connection) -> int:
    (count,) = conn.execute("SELECT count(*) FROM records").fetchone()
    return int(count)


class CompactionPolicy:
    """Whether the log has grown enough since its last compaction to compact it again."""

    def __init__(self, min_records: int = MIN_RECORDS) -> None:
        self._min_records = min_records
        self._after_last: int | None = None  # records left by the last compaction; None before one

    def due(self, records: int) -> bool:
        if records < self._min_records:
            return False
        return self._after_last is None or records >= 2 * self._after_last

    def compacted(self, report: CompactionReport) -> None:
        self._after_last = report.records_after


class Compactor:
    """The daemon's compaction thread: every ``interval_s``, count the records and compact when the
    policy says the log has doubled. A compaction that fails (a full disk) is logged and tried at
    the next check; ``close`` interrupts one in progress between two steps."""

    def __init__(
        self,
        description: str,
        count: Callable[[], int],
        compact: Callable[[threading.Event], CompactionReport],
        interval_s: float,
        policy: CompactionPolicy | None = None,
    ) -> None:
        self._description = description
        self._count = count
        self._compact = compact
        self._interval_s = interval_s
        self._policy = policy or CompactionPolicy()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="embedded-log-compactor", daemon=True)
        self._compactions = 0
        self._removed = 0
        self._last: CompactionReport | None = None
        self._last_at: float | None = None  # wall clock, when the last compaction ended
        self._last_error: str | None = None
        self._left_to: str | None = None
        self._to_whom: Callable[[], str | None] | None = None

    def leave_while(self, to_whom: Callable[[], str | None]) -> None:
        """Skip every check at which ``to_whom()`` says why another process compacts
        (``OffsetLog.leave_compaction``); asked at once too, for ``status``."""
        self._to_whom = to_whom
        self._ask()

    def _ask(self) -> str | None:
        left_to = None if self._to_whom is None else self._to_whom()
        if left_to != self._left_to:
            if left_to is not None:
                log.info("%s: not compacted by this process: %s", self._description, left_to)
            self._left_to = left_to
        return left_to

    def status(self) -> dict[str, Any]:
        """For ``/status`` and ``/metrics``: how often it compacted, the last one, the last failure,
        and whom compaction is left to, asked now (between two checks the archive's writer may have
        stopped: ``/status`` said for up to an interval that another process compacts)."""
        self._ask()
        last = self._last
        return {
            "interval_s": self._interval_s,
            "compactions": self._compactions,
            "records_removed": self._removed,
            "last_at": self._last_at,
            "last_records_before": None if last is None else last.records_before,
            "last_records_after": None if last is None else last.records_after,
            "last_duration_s": None if last is None else round(last.duration_s, 3),
            "last_error": self._last_error,
            "left_to_another_process": self._left_to,
        }

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10.0)

    def check(self) -> CompactionReport | None:
        """One check: compact if the policy says so; the report, or None when it was not due or is
        left to another process."""
        if self._ask() is not None or not self._policy.due(self._count()):
            return None
        report = self._compact(self._stop)
        if self._stop.is_set():
            return report  # cut short by close: neither the policy nor the counts learn from half of one
        self._policy.compacted(report)
        if report.first and report.removed:
            log.warning(
                "%s: compacted for the first time: %d superseded records removed, the latest of every key kept "
                "(it was kept whole by a version before 2026-11-27, which never compacted by itself; the history "
                "archive, when on, holds every removed record; --compaction-interval never keeps them in the log)",
                self._description,
                report.removed,
            )
        self._compactions += 1
        self._removed += report.removed
        self._last, self._last_at = report, time.time()
        return report

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.check()
            except Exception as exc:  # a refused disk, a locked file: the next check tries again
                self._last_error = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: {exc}"
                log.warning("%s: compaction failed, next check in %g s: %s", self._description, self._interval_s, exc)
