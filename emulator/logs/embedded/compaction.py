"""Compaction of the embedded log, Kafka's log cleaner for one SQLite file: which records to remove,
and when the daemon should bother.

Which: every record of a partition whose key has a later record in that partition (offsets are kept,
so readers, which track positions, skip the gaps; the latest record of each key stays, tombstones
included). They are found with a read of their own, which holds no lock: a record superseded in that
read stays superseded (a key's later records only get higher offsets), so records written meanwhile
are never candidates and the list stays true while it is deleted. A log that is being read only
offers records its reader has passed (``EmbeddedOffsetLog.compact``). The deletes then go in steps of
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

log = logging.getLogger(__name__)

DELETE_STEP = 2_000
"""Records deleted per transaction: each step holds the write lock for a few milliseconds."""

_NO_BOUND = 1 << 62

MIN_RECORDS = 100_000
"""Below this many records the daemon does not compact on its own (``connect-offsets`` would
replay them in well under a second)."""


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What ``compact()`` did, for logs and the CLI."""

    records_before: int
    records_after: int
    duration_s: float

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
        """For ``/status`` and ``/metrics``: how often it compacted, the last one, the last failure."""
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
