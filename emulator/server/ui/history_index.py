"""The console's view of the history archive: per connector its last change, per partition its
newest changes, kept current by reading only what the archive added (``archive_tail.py``).

Why an index: the console's pages ask for a partition's history on every click and for every
connector's last change on every refresh; the archive's queries decode every file each time
(5.6 s for one partition on 100,000 records, docs/console.md "Performance"). Here the archive is decoded once, in
a background thread the first time the console asks, and then followed block by block.

Bounds. Per partition the newest ``per_partition`` changes are kept (the chart's window; the
history API and ``connect-offsets history`` reach older ones), plus the count of all of them.
A kept change costs about 200 bytes. Times and order are the archive's: a change's time is its
record's timestamp (``emulator.history.rows.record_time``), changes of a partition are kept in
archive order, which per Kafka partition is log order.

Threading. ``refresh`` blocks (file reads, and ``HistoryArchive.sync`` so that a write the API just
answered is in the files): call it from a worker thread. One refresh runs at a time; readers take
consistent copies under a lock that is only held for dictionary updates.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from emulator.codec.keys import KeyProblem, logical_id, parse_key
from emulator.history.archive import HistoryArchive
from emulator.history.rows import ArchiveRow, record_time
from emulator.server.ui.archive_tail import ArchiveTail

log = logging.getLogger(__name__)

PER_PARTITION = 1000
"""Changes kept per partition for the chart (the newest)."""


@dataclass(frozen=True, slots=True)
class Change:
    """One archived record of a partition, as the console shows it."""

    time_ms: int
    epoch: int
    kafka_partition: int
    kafka_offset: int
    origin: str
    operation: str | None
    principal: str | None
    remote: str | None
    value: bytes | None
    """Raw value bytes (None: a tombstone); parsed when served."""


@dataclass(slots=True)
class PartitionChanges:
    partition: dict[str, Any]
    changes: deque[Change]
    total: int = 0


@dataclass(slots=True)
class ConnectorChanges:
    partitions: dict[str, PartitionChanges] = field(default_factory=dict)
    """By logical partition id (``emulator.codec.keys.logical_id``), as the view groups keys."""
    last: Change | None = None
    """The newest change by time (the archive order decides between equal times)."""
    records: int = 0


@dataclass(frozen=True, slots=True)
class IndexState:
    ready: bool
    building: bool
    records: int
    """Records indexed so far (during the first build: its progress)."""
    error: str | None
    damaged: tuple[str, ...]


class HistoryIndex:
    def __init__(self, archive: HistoryArchive, per_partition: int = PER_PARTITION) -> None:
        self._archive = archive
        self._per_partition = per_partition
        self._tail = ArchiveTail(archive.directory)
        self._connectors: dict[str, ConnectorChanges] = {}
        self._records = 0
        self._damaged: list[str] = []
        self._error: str | None = None
        self._ready = False
        self._building: threading.Thread | None = None
        self._lock = threading.Lock()  # guards the dictionaries (short holds)
        self._refreshing = threading.Lock()  # one refresh at a time

    # ------------------------------------------------------------------ keeping it current

    def start(self) -> None:
        """Build in a background thread (the first time); pages show the progress meanwhile."""
        with self._lock:
            if self._ready or self._building is not None:
                return
            self._building = threading.Thread(target=self._build, name="console-history-index", daemon=True)
            self._building.start()

    def _build(self) -> None:
        started = time.monotonic()
        self.refresh()
        log.info(
            "console: history index built, %d records of %d connectors in %.1f s",
            self._records,
            len(self._connectors),
            time.monotonic() - started,
        )
        with self._lock:
            self._ready = True
            self._building = None

    def refresh(self, sync_timeout_s: float = 5.0) -> None:
        """Take in what the archive added since the last call. Blocking."""
        with self._refreshing:
            if self._archive.writable:
                self._archive.sync(sync_timeout_s)
            try:
                batch = self._tail.read_new()
            except Exception as exc:  # a bug or a file system fault: the pages say so, the daemon goes on
                log.exception("console: reading the history archive failed")
                self._error = f"{type(exc).__name__}: {exc}"
                return
            self._error = None
            if batch.reset:
                with self._lock:
                    self._connectors = {}
                    self._records = 0
                    self._damaged = []
            for problem in batch.damaged:
                log.warning("console history: %s", problem)
            with self._lock:
                self._damaged.extend(batch.damaged)
            chunk = 10_000  # apply in slices so readers never wait long for the lock
            for start in range(0, len(batch.rows), chunk):
                with self._lock:
                    for row in batch.rows[start : start + chunk]:
                        self._add(row)

    def _add(self, row: ArchiveRow) -> None:
        self._records += 1
        if row["connector"] is None:
            return  # a key Connect ignores: no partition to draw
        parsed = parse_key(row["key"])
        if isinstance(parsed, KeyProblem):
            return
        # The name as Connect wrote it, from the key: the archive's field holds a name with half a
        # surrogate pair as its backslash escape, which another name may spell literally.
        connector = parsed.connector
        change = Change(
            time_ms=record_time(row),
            epoch=row["epoch"],
            kafka_partition=row["kafka_partition"],
            kafka_offset=row["kafka_offset"],
            origin=row["origin"],
            operation=row["operation"],
            principal=row["principal"],
            remote=row["remote"],
            value=row["value"],
        )
        changes = self._connectors.get(connector)
        if changes is None:
            changes = self._connectors[connector] = ConnectorChanges()
        lid = logical_id(parsed.partition)
        partition = changes.partitions.get(lid)
        if partition is None:
            partition = changes.partitions[lid] = PartitionChanges(parsed.partition, deque(maxlen=self._per_partition))
        partition.changes.append(change)
        partition.total += 1
        changes.records += 1
        if changes.last is None or change.time_ms >= changes.last.time_ms:
            changes.last = change

    # ------------------------------------------------------------------ reading

    def state(self) -> IndexState:
        with self._lock:
            return IndexState(
                self._ready, self._building is not None, self._records, self._error, tuple(self._damaged[-10:])
            )

    def behind(self) -> str | None:
        """Why the archive may lack recent changes now (stalled, reading back, stopped), in words fit
        for any signed-in user (``HistoryArchive.behind_because``); None when it keeps up."""
        return self._archive.behind_because() if self._archive.writable else None

    def last_changes(self) -> dict[str, tuple[Change | None, int]]:
        """Every connector's newest change and its number of archived records."""
        with self._lock:
            return {name: (c.last, c.records) for name, c in self._connectors.items()}

    def counts(self, connector: str) -> dict[str, int]:
        """Archived changes per logical partition of a connector."""
        with self._lock:
            changes = self._connectors.get(connector)
            return {} if changes is None else {lid: p.total for lid, p in changes.partitions.items()}

    def partition(self, connector: str, lid: str) -> tuple[list[Change], int]:
        """The kept changes of one partition, oldest first, and how many the archive holds."""
        with self._lock:
            changes = self._connectors.get(connector)
            found = None if changes is None else changes.partitions.get(lid)
            return ([], 0) if found is None else (list(found.changes), found.total)
