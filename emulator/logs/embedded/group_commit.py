"""Appends to the embedded log, group-committed: whoever holds the writing connection writes every
waiting request in one transaction and pays for one fsync.

Each request's records stay contiguous and in order, so per-key order holds; offsets are assigned
inside the ``BEGIN IMMEDIATE`` transaction from the stored ``partitions`` table, never from a
per-process cache, so two processes writing one file can never hand out the same offset. A request
that times out before a commit picked it up is withdrawn and reported as not written; one already
inside a commit waits for that commit's outcome, so the answer is always exact, never "maybe".

A commit waits for another process's write lock only until the earliest deadline in its batch; when
that wait runs out, the requests whose deadline has passed are answered "nothing was written" and the
others go back to the queue for the next commit, so every request times out at its own deadline — not
earlier because it shared a commit with a shorter one, nor later because a longer one led it.

A commit still running after ``stalled_s`` is a disk that stopped answering its fsync, or another
process holding the write lock: ``stalled`` says so (``/readyz``), and the stall is kept as the log's
last error each time it is seen and once more when the commit ends, with how long it took, so
``/status`` tells afterwards what held the writes and when (``/readyz`` says so only while it lasts).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from emulator.codec.murmur2 import partition_for
from emulator.logs.embedded.claims import EmbeddedClaims
from emulator.logs.embedded.storage import end_offsets, is_busy
from emulator.logs.embedded.writing import WritingConnection
from emulator.logs.last_error import LastError
from emulator.logs.own_writes import OwnWrites
from emulator.logs.write_timings import WriteTimings
from emulator.model.claims import Fence
from emulator.model.errors import InvalidRecord, LogTimeout, LogWriteError, OffsetsError
from emulator.model.records import Position

_WAITED_OUT = 0.8
"""A busy answer after this share of the time left counts as the busy timeout run out (the timeout is
set to the time left, or kept when within a tenth below it: ``WritingConnection.set_busy_timeout``)."""

Prepared = list[tuple[bytes, bytes | None, int]]
"""``(key, value, partition)`` per record, checked and placed before any lock is taken."""


@dataclass(eq=False, slots=True)
class _WriteRequest:
    """One ``append`` call waiting for a group commit; ``done`` is set with positions or an error."""

    entries: Prepared
    deadline: float
    """Monotonic time by which the request is answered, written or not."""
    fence: Fence | None = None
    done: threading.Event = field(default_factory=threading.Event)
    positions: list[Position] | None = None
    error: OffsetsError | None = None


def prepare(entries: Sequence[tuple[bytes | None, bytes | None]], partitions: int) -> Prepared:
    """Check every record and place it with the Java producer's murmur2 partitioner. Keyless records
    are refused before anything is written, because a compacted Kafka topic refuses them too and the
    log must stay exportable."""
    prepared: Prepared = []
    for i, entry in enumerate(entries):
        try:
            key, value = entry
        except (TypeError, ValueError):
            raise InvalidRecord(f"entry {i} is not a (key, value) pair; nothing was written") from None
        if key is None:
            raise InvalidRecord(
                f"entry {i} has a null key; a compacted offsets topic refuses keyless records, so "
                "the embedded log does too; nothing was written"
            )
        if not isinstance(key, bytes | bytearray | memoryview):
            raise InvalidRecord(f"entry {i}: key must be bytes, got {type(key).__name__}; nothing was written")
        if value is not None and not isinstance(value, bytes | bytearray | memoryview):
            raise InvalidRecord(
                f"entry {i}: value must be bytes or None, got {type(value).__name__}; nothing was written"
            )
        kb = bytes(key)
        prepared.append((kb, None if value is None else bytes(value), partition_for(kb, partitions)))
    return prepared


_STALL_CAUSE = "(the disk is not answering, or another process holds the log's write lock)"
_STALLED_CAUSE = "(the disk did not answer, or another process held the log's write lock)"


class GroupCommit:
    def __init__(
        self,
        writing: WritingConnection,
        claims: EmbeddedClaims,
        own_writes: OwnWrites,
        timings: WriteTimings,
        *,
        errors: LastError,
        stalled_s: float,
    ) -> None:
        """``errors``: the log's last error, where a stalled commit is kept; ``stalled_s``: how long a
        commit runs before it counts as stalled."""
        self._writing = writing
        self._claims = claims
        self._own_writes = own_writes
        self._timings = timings
        self._errors = errors
        self._stalled_s = stalled_s
        self._pending_lock = threading.Lock()  # guards _pending and _closed
        self._pending: list[_WriteRequest] = []
        self._closed = False
        self.commit_started: float | None = None
        """Monotonic start of the transaction running now, if any (``reachability``)."""

    @property
    def description(self) -> str:
        return self._writing.description

    def stalled(self) -> str | None:
        """Why writes wait now: the commit running has run for ``stalled_s`` or more; else None. Kept
        as the log's last error each time it is seen (its time: the stall's latest sighting). Never
        blocks: it reads an attribute the committing thread sets and clears."""
        started = self.commit_started
        running = 0.0 if started is None else time.monotonic() - started
        if running < self._stalled_s:
            return None
        why = (
            f"a write to {self.description} has been waiting for SQLite's write lock, commit and fsync for "
            f"{running:.1f} s {_STALL_CAUSE}"
        )
        self._errors.remember(why)
        return why

    def append(self, entries: Prepared, timeout_s: float, fence: Fence | None) -> list[Position]:
        """Write ``entries`` in the next group commit; their positions, in input order."""
        deadline = time.monotonic() + timeout_s
        req = _WriteRequest(entries, deadline, fence)
        with self._pending_lock:
            if self._closed or not self._writing.is_open:
                raise LogWriteError(f"{self.description} is not open; nothing was written")
            self._pending.append(req)
        lock = self._writing.lock
        while not req.done.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                with self._pending_lock:
                    if any(r is req for r in self._pending):
                        self._pending = [r for r in self._pending if r is not req]
                        raise LogTimeout(
                            f"{self.description}: write timed out after {timeout_s:g} s waiting for the "
                            "log; nothing was written"
                        )
                req.done.wait()  # inside a commit right now: its outcome is moments away
                break
            if lock.acquire(timeout=remaining):
                try:
                    if not req.done.is_set():
                        self._commit_pending()
                finally:
                    lock.release()
        if req.error is not None:
            raise req.error
        assert req.positions is not None
        return req.positions

    def close(self) -> None:
        """Fail the writes no commit has picked up; later appends are refused."""
        with self._pending_lock:
            self._closed = True
            abandoned, self._pending = self._pending, []
        for req in abandoned:
            req.error = LogWriteError(f"{self.description} was closed before this write was started")
            req.done.set()

    def _commit_pending(self) -> None:
        """Write every waiting request in one transaction. The caller holds the writing lock."""
        with self._pending_lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        started: float | None = None
        try:
            if not self._writing.is_open:
                raise LogWriteError(f"{self.description} was closed; nothing was written")
            conn = self._writing.require()
            started = self.commit_started = time.monotonic()
            first_deadline = min(req.deadline for req in batch)
            try:
                results = self._write(conn, batch, first_deadline)
            except OffsetsError:
                raise
            except sqlite3.Error as e:
                # Requeue only after a wait that ran out: a "busy" SQLite answers at once (it does
                # when waiting could deadlock) would otherwise be retried in a tight loop until the
                # deadlines pass; it is answered to everyone at once, as before.
                waited_out = time.monotonic() - started >= _WAITED_OUT * (first_deadline - started)
                if is_busy(e) and waited_out:
                    batch = self._requeue_unexpired(batch)
                raise self._writing.refused(e, "the write", _size(batch)) from e
            except Exception as e:  # e.g. a damaged partitions table: still an answer, not a traceback
                raise LogWriteError(f"{self.description}: write failed ({e!r}); nothing was written") from e
            written = 0
            for req, outcome in zip(batch, results, strict=True):
                if isinstance(outcome, OffsetsError):
                    req.error = outcome
                else:
                    req.positions = outcome
                    written += len(outcome)
            if written:
                self._timings.observe(time.monotonic() - started, written)
                self._writing.faults.succeeded()
            self._writing.contention.succeeded()  # it got the write lock, written or fenced
        except OffsetsError as e:
            for req in batch:
                req.error = e
        finally:
            self.commit_started = None
            for req in batch:
                if req.positions is None and req.error is None:
                    req.error = LogWriteError(f"{self.description}: write interrupted; nothing was written")
                req.done.set()
            if started is not None:
                self._note_stall(time.monotonic() - started, batch)

    def _note_stall(self, took: float, batch: list[_WriteRequest]) -> None:
        """A commit that ran ``stalled_s`` or more is kept as the log's last error once it ended, with
        how long it took and whether it wrote: the stall is on record even when nothing asked
        ``/readyz`` while it lasted."""
        if took < self._stalled_s:
            return
        written = sum(len(req.positions) for req in batch if req.positions is not None)
        error = next((req.error for req in batch if req.error is not None), None)
        records = f"{written} record" + ("" if written == 1 else "s")
        outcome = f"then it wrote {records}" if written or error is None else f"then it failed: {error}"
        self._errors.remember(
            f"a write to {self.description} waited {took:.1f} s for SQLite's write lock, commit and fsync "
            f"{_STALLED_CAUSE}; {outcome}"
        )

    def _requeue_unexpired(self, batch: list[_WriteRequest]) -> list[_WriteRequest]:
        """After a wait for another process's lock ran out: put the requests with time left back at the
        head of the queue, in order, for the next commit; the expired ones, returned, are answered."""
        now = time.monotonic()
        expired = [req for req in batch if req.deadline <= now]
        with self._pending_lock:
            self._pending[:0] = [req for req in batch if req.deadline > now]
        return expired

    def _write(
        self, conn: sqlite3.Connection, batch: list[_WriteRequest], deadline: float
    ) -> list[list[Position] | OffsetsError]:
        self._writing.set_busy_timeout(conn, deadline)
        conn.execute("BEGIN IMMEDIATE")
        try:
            next_offsets = end_offsets(conn, {p for req in batch for _, _, p in req.entries})
            now_ms = time.time_ns() // 1_000_000
            rows: list[tuple[int, int, bytes, bytes | None, int]] = []
            results: list[list[Position] | OffsetsError] = []
            for req in batch:
                if req.fence is not None:
                    refused = self._claims.refusal(conn, req.fence)
                    if refused is not None:
                        results.append(refused)
                        continue
                positions: list[Position] = []
                for key, value, p in req.entries:
                    offset = next_offsets[p]
                    next_offsets[p] = offset + 1
                    rows.append((p, offset, key, value, now_ms))
                    positions.append(Position(p, offset))
                results.append(positions)
            touched = {row[0] for row in rows}
            if not rows:
                conn.execute("COMMIT")
                return results
            conn.executemany(
                "INSERT INTO records (partition, offset, key, value, timestamp_ms) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            ends = {p: next_offsets[p] for p in touched}
            conn.executemany(
                "UPDATE partitions SET next_offset = ? WHERE partition = ?", [(e, p) for p, e in ends.items()]
            )
            # The file deleted or replaced under the daemon: refused before the commit (rolled back),
            # and after it when it went during the commit (file_identity).
            self._writing.require_same_file("the write")
            conn.execute("COMMIT")
            self._writing.require_same_file("the write", written=True)
            self._own_writes.note_ends(ends)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return results


def _size(batch: Sequence[_WriteRequest]) -> int:
    """A transaction's key and value bytes: what a probe must be able to write for it to fit again."""
    return sum(len(key) + len(value or b"") for req in batch for key, value, _ in req.entries)
