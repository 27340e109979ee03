"""The embedded log's file: connection settings, schema, format metadata and integrity checks.

One SQLite file per log, ``<data_dir>/<name>.sqlite3``, in WAL mode:

* ``records(partition, offset, key, value, timestamp_ms)``, primary key ``(partition, offset)``: a
  rowid table, whose primary key is an index of its own. Not ``WITHOUT ROWID`` (which keeps each row
  in the primary key's B-tree, interior pages included): there, every insert compared its key with
  whole rows on the way down, and a few legal offsets of megabytes made each later write read them
  again — a 30,000-partition PATCH after six 20 MB values read 3 GB and timed out, against 3 MiB
  and 4.4 s without them. Here the interior pages hold integers only; a replay reads a partition
  through the index: a restore of 500,000 records took 3.2 s instead of 2.7 s (benchmarks/RESULTS.md, round 26).
  Logs made in the old layout are rebuilt in this one when opened (``_rebuild_records``).
* ``partitions(partition, next_offset)``: the log end offset of each partition. Kept apart from
  ``records`` because compaction deletes rows; deriving the end from ``max(offset) + 1`` could hand
  out an offset twice, and positions held by readers would then skip a record.
* ``meta(key, value)``: format marker and version, the log name, the partition count and the log's id
  (``LOG_ID``, which names its history archive).
* ``claims(connector, owner, epoch, claimed_at_ms, released)``: the current claim per connector.

WAL needs shared memory between the processes on one host, so a network file system is refused.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from emulator.logs.embedded.storage_faults import no_space_left, storage_fault, why_unwritable
from emulator.model.errors import LogConfigError

log = logging.getLogger(__name__)

FORMAT_MARKER = "connect-offsets-emulator/embedded-log"
FORMAT_VERSION = 1

NETWORK_FILESYSTEMS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "fuse.sshfs", "afs"})


COMPACTING_SINCE = "compacting_since_ms"
"""Metadata: since when a version that compacts the log by itself has kept it (set at creation or at
the first compaction, never changed after). Absent: the log was kept whole until now by versions
before 2026-11-27 (``compaction.CompactionReport.first``). Older versions ignore keys they do not know."""

LOG_ID = "log_id"
"""Metadata: a uuid4 naming this log for good, wherever its file is moved or copied. Its history
archive's directory is named after it (``archive_identity``), not after the file's path, so a moved
data directory keeps its history. Written at creation, or at the first open by a version that knows
it (older versions ignore it); never changed after."""


@dataclass(frozen=True, slots=True)
class LogFile:
    """One embedded log's file, as the log was asked to open it.

    ``partitions`` is the count requested for a new file; an existing file keeps its own (returned
    by ``initialise``).
    """

    path: Path
    name: str
    partitions: int
    synchronous: str
    description: str = field(init=False)
    """``embedded://`` and the absolute path, resolved once: every write names its log, and resolving
    the path each time cost a system call per directory level (and failed with the daemon's working
    directory deleted under it)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "description", f"embedded://{self.path.resolve()}")

    def connect(self, timeout_s: float) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        except BaseException:
            conn.close()
            raise
        return conn

    def initialise(self, conn: sqlite3.Connection, on_rebuild: Callable[[str], None] | None = None) -> tuple[int, str]:
        """Create the schema on first use, or read the stored partition count, atomically; returns the
        count and the log's id (``LOG_ID``, given here to a log created before it existed).
        ``on_rebuild`` hears, before it starts, that an older log's records are being rebuilt.

        ``BEGIN IMMEDIATE`` makes two processes opening a fresh directory at once agree on one
        schema, one partition count and one log id.
        """
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        if not tables:
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only takes effect before the first table
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise LogConfigError(f"{self.description}: SQLite refused WAL mode (journal_mode={mode})")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("BEGIN IMMEDIATE")
        rebuilt: int | None = None
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
            if not tables:
                partitions = self._create_schema(conn)
            elif "meta" not in tables:
                raise LogConfigError(
                    f"{self.path} is a SQLite database but not an embedded offsets log "
                    f"(tables: {', '.join(sorted(tables))}); refusing to touch it"
                )
            else:
                partitions = self._read_meta(conn)
                rebuilt = _earlier_layout_size(conn, self.path)
                if rebuilt is not None:
                    _rebuild_records(conn, self.description, self.path, rebuilt, on_rebuild)
            log_id = _log_id(conn)
            # Claims (emulator/model/claims.py) live beside the records; older logs gain the table here.
            conn.execute(
                "CREATE TABLE IF NOT EXISTS claims (connector TEXT PRIMARY KEY, owner TEXT, "
                "epoch INTEGER NOT NULL, claimed_at_ms INTEGER NOT NULL, released INTEGER NOT NULL DEFAULT 0)"
            )
            conn.execute("COMMIT")
        except BaseException as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if rebuilt is not None and isinstance(e, sqlite3.Error):
                _rebuild_failed(self.description, self.path, rebuilt, e)
            raise
        return partitions, log_id

    def _create_schema(self, conn: sqlite3.Connection) -> int:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(RECORDS_TABLE.format(name="records"))
        conn.execute("CREATE TABLE partitions (partition INTEGER PRIMARY KEY, next_offset INTEGER NOT NULL)")
        conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            [
                ("format", FORMAT_MARKER),
                ("format_version", str(FORMAT_VERSION)),
                ("name", self.name),
                ("partitions", str(self.partitions)),
                ("created_ms", str(time.time_ns() // 1_000_000)),
                (COMPACTING_SINCE, str(time.time_ns() // 1_000_000)),
            ],
        )
        conn.executemany(
            "INSERT INTO partitions (partition, next_offset) VALUES (?, 0)",
            [(p,) for p in range(self.partitions)],
        )
        log.info("created %s with %d partitions", self.description, self.partitions)
        return self.partitions

    def _read_meta(self, conn: sqlite3.Connection) -> int:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != FORMAT_MARKER:
            raise LogConfigError(f"{self.path} is not an embedded offsets log (format={meta.get('format')!r})")
        try:
            version = int(meta["format_version"])
            stored = int(meta["partitions"])
        except (KeyError, ValueError) as e:
            raise LogConfigError(f"{self.path}: damaged metadata ({e!r}); refusing to guess") from e
        if version > FORMAT_VERSION:
            raise LogConfigError(
                f"{self.path} has format version {version}, newer than this emulator understands "
                f"({FORMAT_VERSION}); upgrade the emulator"
            )
        (rows,) = conn.execute("SELECT count(*) FROM partitions").fetchone()
        if stored < 1 or rows != stored:
            raise LogConfigError(f"{self.path}: metadata says {stored} partitions but {rows} partition rows exist")
        if meta.get("name") != self.name:
            log.warning(
                "%s was created for log %r, now opened as %r (file renamed?); using it as is",
                self.path,
                meta.get("name"),
                self.name,
            )
        if stored != self.partitions:
            # Said as what happens, not as "N were requested": serve's --offsets-partitions has a
            # default (25), and an operator who never gave it read that they had asked for 25 (CLI QA).
            log.warning(
                "%s has %d partitions and keeps them: the count for a new log (%d) does not change an existing one. "
                "Changing the count would move keys to other partitions (murmur2 %% n), leaving two live "
                "copies of a key with no defined winner — the repartitioning hazard of Connect's offsets topic",
                self.description,
                stored,
                self.partitions,
            )
        return stored

    def check_integrity(self, conn: sqlite3.Connection) -> None:
        problems = [" ".join(str(r[0]).split()) for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
        if problems != ["ok"]:  # SQLite's lines may hold newlines: the refusal stays one line
            raise LogConfigError(
                f"embedded offsets log {self.path} is corrupt ({'; '.join(problems)}). Move it aside and "
                "restore it from a backup or an export; the emulator will not read a damaged log"
            )

    def config_error(self, what: str, e: sqlite3.Error) -> LogConfigError:
        if is_corruption(e):
            return LogConfigError(
                f"embedded offsets log {self.path} {what}: it is corrupt or not a SQLite database ({e}). "
                "Move it aside and restore it from a backup or an export"
            )
        why = why_unwritable(self.path)
        cause = f"{why} (SQLite: {e})" if why else str(e)
        return LogConfigError(f"embedded offsets log {self.path} {what}: {cause}")

    def require_writable(self) -> None:
        """Refuse at start a log this process cannot write: SQLite opens such a file read-only
        without a word, the daemon then answered ready, and only its first write learned otherwise."""
        why = why_unwritable(self.path)
        if why is not None:
            raise LogConfigError(f"the embedded offsets log cannot be opened for writing: {why}")


_MAX_LISTED_PARTITIONS = 256
"""Above this many, all partitions are read instead (SQLite limits a statement's parameters)."""


def end_offsets(conn: sqlite3.Connection, partitions: Collection[int] | None = None) -> dict[int, int]:
    """The next offset of every partition (the log end offsets), or of ``partitions`` only: a commit
    needs the few it writes to, not all of them."""
    if partitions is None or len(partitions) > _MAX_LISTED_PARTITIONS:
        rows = conn.execute("SELECT partition, next_offset FROM partitions")
    else:
        marks = ",".join("?" * len(partitions))
        query = f"SELECT partition, next_offset FROM partitions WHERE partition IN ({marks})"
        rows = conn.execute(query, tuple(partitions))
    return {int(p): int(n) for p, n in rows}


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction (the write lock from its start, so it never fails halfway
    for want of it): committed when the block ends, rolled back when it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def is_corruption(e: sqlite3.Error) -> bool:
    name = getattr(e, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))


def is_busy(e: sqlite3.Error) -> bool:
    name = getattr(e, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))


def filesystem_type(path: Path) -> str | None:
    """The file system type of ``path`` from ``/proc/self/mountinfo`` (None where that is unavailable)."""
    try:
        target = os.path.realpath(path)
        best, best_type = "", None
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = left.split()
                if len(fields) < 5 or not right:
                    continue
                mount_point = fields[4].replace("\\040", " ")
                inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
                if inside and len(mount_point) >= len(best):
                    best, best_type = mount_point, right.split()[0]
        return best_type
    except OSError:
        return None


def stored_partition_count(path: Path) -> int | None:
    """The partition count an existing log file records, read only; None if it cannot tell.

    For a reader that must open a log as it is: the count given to ``EmbeddedOffsetLog`` is the one
    to create with, and one that differs from the file's is warned about, which is right for a
    destination and misleading for a source whose count nobody asked to change.
    """
    value = _stored_meta(path, "partitions")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def stored_log_id(path: Path) -> str | None:
    """The log's id as its file records it, read only (no write lock: a tool that only has to decide
    whether to go on must not wait for another process's write first); None if it has none yet."""
    return _stored_meta(path, LOG_ID)


def _stored_meta(path: Path, key: str) -> str | None:
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row is not None else None
    except sqlite3.Error:
        return None
    finally:
        conn.close()


RECORDS_TABLE = (
    "CREATE TABLE {name} (partition INTEGER NOT NULL, offset INTEGER NOT NULL, "
    "key BLOB, value BLOB, timestamp_ms INTEGER NOT NULL, PRIMARY KEY (partition, offset))"
)
"""The records' layout (the module's docstring says why it is a rowid table)."""


def _earlier_layout_size(conn: sqlite3.Connection, path: Path) -> int | None:
    """The file's size when its records are in the layout before 2026-11-28 (to be rebuilt), else None."""
    (sql,) = conn.execute("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'records'").fetchone()
    if "WITHOUT ROWID" not in str(sql).upper():
        return None
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _rebuild_records(
    conn: sqlite3.Connection, description: str, path: Path, size: int, on_rebuild: Callable[[str], None] | None
) -> None:
    """A log made by a version before 2026-11-28 keeps its records ``WITHOUT ROWID``: copied here
    into the current layout, inside ``initialise``'s transaction (every record or none; the count is
    checked before the old table goes). Once per log; older versions read the result as before
    (same table, same columns). The copy is the whole log again, in the file and in its write-ahead
    log until the next checkpoint: the upgrade QA's 481 MB log needed 2.5 s and left a 962 MB file
    (its free pages are reused by later writes), and under a file-size limit it failed as a bare
    "disk I/O error" while ``/readyz`` blamed another process's lock for the wait (a failure of its
    transaction: ``_rebuild_failed``)."""
    if on_rebuild is not None:
        on_rebuild(
            f"{path} is rebuilding its records in the current layout, once after an upgrade from a version "
            f"before 2026-11-28: every record is copied in one transaction ({size:,} bytes of file: it needs "
            "about twice that in free disk space while it runs)"
        )
    started = time.monotonic()
    conn.execute("DROP TABLE IF EXISTS records_rebuilt")
    conn.execute(RECORDS_TABLE.format(name="records_rebuilt"))
    copied = conn.execute(
        "INSERT INTO records_rebuilt (partition, offset, key, value, timestamp_ms) "
        "SELECT partition, offset, key, value, timestamp_ms FROM records ORDER BY partition, offset"
    ).rowcount
    (count,) = conn.execute("SELECT count(*) FROM records").fetchone()
    if copied != count:
        raise LogConfigError(
            f"{description}: rebuilding the records table copied {copied} of {count} records; nothing was changed"
        )
    conn.execute("DROP TABLE records")
    conn.execute("ALTER TABLE records_rebuilt RENAME TO records")
    log.info(
        "%s: records rebuilt in the current layout (a rowid table: large values no longer slow every write), "
        "%d records in %.1f s",
        description,
        count,
        time.monotonic() - started,
    )


def _rebuild_failed(description: str, path: Path, size: int, e: sqlite3.Error) -> None:
    """Raise what a failed rebuild (rolled back) says, unless the disk is full: the opening then waits
    for space, saying so (``EmbeddedOffsetLog.open``), and ``e`` goes on as it is."""
    if storage_fault(e) is not None and no_space_left(path.parent):
        return
    raise LogConfigError(
        f"{description}: rebuilding the records table in the current layout (once, after an upgrade from a "
        f"version before 2026-11-28) failed: {e}; nothing was changed. The rebuild copies every record in one "
        f"transaction: it needs about twice the log file's {size:,} bytes in free disk space, and a file-size "
        "limit (ulimit -f) above that"
    ) from e


def _log_id(conn: sqlite3.Connection) -> str:
    """The log's id, stored now when the log has none yet (created by an older version); called
    inside ``initialise``'s transaction, so two processes opening the log at once store one id."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (LOG_ID,)).fetchone()
    if row is not None:
        return str(row[0])
    log_id = str(uuid.uuid4())
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (LOG_ID, log_id))
    return log_id
