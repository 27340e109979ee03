"""The embedded log's one writing connection, the lock every user of it holds, and how the storage
answers a write it refuses.

Appends (the group commit), claims, compaction steps and the storage and lock probes all write through
this one connection, one at a time: SQLite allows one writer per file anyway, and one connection lets a group
commit's ``BEGIN IMMEDIATE`` wait for another *process* only, never for a sibling connection here.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from emulator.logs.embedded.file_identity import FileIdentity
from emulator.logs.embedded.lock_contention import LockContention
from emulator.logs.embedded.storage import immediate, is_busy
from emulator.logs.embedded.storage_faults import StorageFaults, storage_fault
from emulator.logs.last_error import LastError
from emulator.model.errors import LogStorageRefused, LogTimeout, LogWriteError, OffsetsError


class WritingConnection:
    def __init__(self, description: str, path: Path | None = None, errors: LastError | None = None) -> None:
        """``errors``: the log's last error, where a refusal by the storage is kept (``StorageFaults``)."""
        self.description = description
        self.path = path
        """The log's file, to say why the storage refuses a write (its owner, its mount)."""
        self.lock = threading.Lock()
        """Held by whoever uses the connection: the commit leader, a claim, a compaction step."""
        self._errors = errors
        self.faults = StorageFaults(description, self._probe_write, errors=errors)
        self.contention = LockContention(description, self._probe_lock)
        self.identity = FileIdentity(description, path, errors) if path is not None else None
        """Whether the path still leads to the file this connection writes (``file_identity``)."""
        self._conn: sqlite3.Connection | None = None
        self._busy_ms = 0  # the connection's busy_timeout, as last set by set_busy_timeout

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    def attach(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        if self.identity is not None:
            self.identity.remember()

    def require_same_file(self, what: str, written: bool = False) -> None:
        """Refuse ``what`` (``LogStorageRefused``) when the log's file is no longer at its path: a
        restart would not find it. ``written``: the transaction is committed already, so the write
        is not acknowledged (both files are looked at again: the commit's frames are in the
        write-ahead log until a checkpoint, so a ``-wal`` deleted as it ran loses them as surely as
        the main file would); else the caller rolls it back. The caller holds ``lock``."""
        reason = None if self.identity is None else self.identity.check()
        if reason is None:
            return
        outcome = (
            "it reached only the file that is gone, which a restart will not find: it is not acknowledged"
            if written
            else "nothing was written"
        )
        raise LogStorageRefused(f"{self.description} refused {what}: {reason}; {outcome}")

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def require(self) -> sqlite3.Connection:
        """The connection; the caller holds ``lock``."""
        if self._conn is None:
            raise LogWriteError(f"{self.description} is not open")
        return self._conn

    @contextmanager
    def held(self, deadline: float | None = None) -> Iterator[sqlite3.Connection]:
        """The connection under ``lock``, waiting at most until ``deadline`` (monotonic) for another
        process's write lock when one is given."""
        with self.lock:
            conn = self.require()
            if deadline is not None:
                self.set_busy_timeout(conn, deadline)
            yield conn

    def set_busy_timeout(self, conn: sqlite3.Connection, deadline: float) -> None:
        """How long ``BEGIN IMMEDIATE`` may wait for another process's write: the time left, never
        more, and at most a tenth less. Consecutive writes (whose deadlines differ by milliseconds)
        find it already set instead of running a PRAGMA each time. The caller holds ``lock``."""
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        if not left_ms * 0.9 <= self._busy_ms <= left_ms:
            conn.execute(f"PRAGMA busy_timeout = {left_ms}")
            self._busy_ms = left_ms

    def refused(self, e: sqlite3.Error, what: str, size: int = 0) -> OffsetsError:
        """The answer to a write transaction (of ``size`` bytes) SQLite refused: a timeout to retry when
        it waited out its deadline for another process's write lock, a refusal by the storage (noted,
        so ``/readyz`` says so until a write succeeds), or a failed write. A timeout is noted too: the
        lock stays held elsewhere, for ``/readyz``, until a write or the lock probe gets it."""
        if is_busy(e):  # the deadline, spent waiting: a timeout to retry, not a failed write
            self.contention.timed_out()
            if self._errors is not None:  # /status and the metrics keep it after the lock is free again
                self._errors.remember(
                    f"{what} timed out waiting for another process's write (SQLite's write lock); nothing was written"
                )
            return LogTimeout(
                f"{self.description}: {what} timed out waiting for another process's write (SQLite's "
                "write lock); nothing was written"
            )
        reason = storage_fault(e, self.path)
        if reason is not None:
            self.faults.failed(reason, size)
            return LogStorageRefused(f"{self.description} refused {what}: {reason}; nothing was written")
        return LogWriteError(f"{self.description}: {what} failed ({e}); nothing was written")

    def _probe_write(self, size: int) -> None:
        """A durable write of ``size`` bytes (a metadata row nothing reads, removed again), to learn
        that the storage takes writes again while no request brings one (``StorageFaults``)."""
        for statement, args in (
            ("INSERT OR REPLACE INTO meta (key, value) VALUES ('write_probe', zeroblob(?))", (size,)),
            ("DELETE FROM meta WHERE key = 'write_probe'", ()),
        ):
            with self.held(time.monotonic() + 5.0) as conn, immediate(conn):
                conn.execute(statement, args)

    def _probe_lock(self) -> bool | None:
        """Whether another process still holds the write lock: ``BEGIN IMMEDIATE`` without waiting
        (busy_timeout 0), rolled back at once, on the writing connection. None, without trying, while
        a write of ours holds the connection: its outcome tells (``LockContention``); so the probe
        never waits for this process's own writes, and never takes a second connection's lock that
        would make one of ours wait."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            conn = self.require()
            kept = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])  # claims wait as long as before
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            except sqlite3.OperationalError as e:
                if is_busy(e):
                    return False
                raise
            finally:
                conn.execute(f"PRAGMA busy_timeout = {kept}")
            return True
        finally:
            self.lock.release()
