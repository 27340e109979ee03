"""The embedded offset log: a Kafka-shaped partitioned log in one SQLite file, used when no Kafka is given.

Everything above the log (view, API, CLI) is shared with the Kafka backend, so this backend copies
Kafka's observable behaviour rather than inventing its own: records are placed with the Java
producer's murmur2 partitioner, every partition has its own offsets 0, 1, 2, …, a null value is a
tombstone and ``b""`` is not, and readiness is "position >= end offset captured at start" for every
partition. An embedded log can therefore be exported to a real ``connect-offsets`` topic record for
record, partition for partition.

Storage is one SQLite file per log, in WAL mode; its schema, format metadata and integrity checks
are ``emulator.logs.embedded.storage``.

Sharing a data directory between processes (decision): **allowed, and safe**. SQLite's WAL locking
is built for several processes on one host; offsets are assigned inside a ``BEGIN IMMEDIATE``
transaction from the stored ``partitions`` table (never from a per-process cache), so two writers
can never hand out the same offset, and each process's reader tails the other's writes by polling.
This is the same situation as two daemons over one Kafka topic, which the layers above must handle
anyway (ownership, stale-commit detection), so a lock file would buy nothing but a second failure
mode after a crash. What is *not* safe is a network file system: WAL needs shared memory on one
host, so ``open()`` refuses NFS/SMB/9p/sshfs mounts with a ``LogConfigError``.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import starmap
from pathlib import Path
from typing import Any, Literal

from emulator.codec.murmur2 import partition_for
from emulator.logs.base import OffsetLog, ReadProgress, RecordSink
from emulator.logs.embedded.claims_seen import ClaimsSeen
from emulator.logs.embedded.compaction import (
    DELETE_STEP,
    MIN_RECORDS,
    CompactionPolicy,
    CompactionReport,
    Compactor,
    record_count,
    superseded,
)
from emulator.logs.embedded.storage import (
    NETWORK_FILESYSTEMS,
    LogFile,
    end_offsets,
    filesystem_type,
    immediate,
    is_busy,
    is_corruption,
)
from emulator.logs.embedded.storage_faults import StorageFaults, no_space_left, storage_fault
from emulator.logs.own_writes import OwnWrites
from emulator.logs.write_timings import WriteTimings
from emulator.model.claims import Claim, Fence, Fenced, fenced_message, held_message
from emulator.model.errors import (
    ClaimHeld,
    InvalidRecord,
    LogConfigError,
    LogStorageRefused,
    LogTimeout,
    LogUnavailable,
    LogWriteError,
    OffsetsError,
)
from emulator.model.records import LogRecord, Position

log = logging.getLogger(__name__)

REPLAY_BATCH = 10_000
"""Records per sink call. Large enough that per-query and per-call overhead vanish during a
million-record restore, small enough that the view gets progress while a partition is still loading."""

TAIL_POLL_S = 0.05
"""How often the reader looks for records appended by *another* process. Appends made through this
object wake the reader at once; other processes can only be noticed by looking."""

STALLED_COMMIT_S = 5.0
"""A transaction still running after this long makes the log unreachable (``/readyz`` 503 with why)
until it ends: a commit is milliseconds, and one held this long is a disk that stopped answering its
fsync, or another process holding the write lock; every write waits behind it, so a load balancer
should send writes elsewhere, as when a Kafka cluster stops answering. Half the default
``--write-timeout``, so the daemon says so before its writes start answering 503."""

_FULL_DISK_RETRY_S = 1.0
_STARTUP_PROGRESS_S = 5.0
"""While a full disk keeps the log from opening: how often ``open`` tries again, and says so."""

_YIELD_S = 0.002
"""Pause between compaction steps. ``threading.Lock`` is not fair: without a pause the compacting
thread takes the commit lock straight back and appends wait for the whole compaction."""

_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")

_SELECT_RANGE = (
    "SELECT key, value, partition, offset, timestamp_ms FROM records "
    "WHERE partition = ? AND offset >= ? AND offset < ? ORDER BY offset LIMIT ?"
)
"""Columns in ``LogRecord`` field order, so rows become records with ``starmap`` and no per-row
Python code: that construction is most of the replay cost."""


@dataclass(eq=False, slots=True)
class _WriteRequest:
    """One ``append`` call waiting for a group commit; ``done`` is set with positions or an error."""

    entries: list[tuple[bytes, bytes | None, int]]
    fence: Fence | None = None
    done: threading.Event = field(default_factory=threading.Event)
    positions: list[Position] | None = None
    error: OffsetsError | None = None


class EmbeddedOffsetLog(OffsetLog):
    """A durable, partitioned offsets log in SQLite with the Kafka backend's semantics.

    Durability: WAL journal with ``synchronous=FULL``, so every commit fsyncs the WAL before
    ``append`` returns. ``synchronous=NORMAL`` would already survive ``kill -9`` (the committed WAL
    frames sit in the kernel's page cache, which outlives the process), but not an OS crash or power
    loss, and unlike a Kafka topic with ``acks=all`` over replicas this file is the only copy of the
    offsets. Connect flushes offsets once per ``offset.flush.interval.ms`` per task, so an fsync per
    commit is cheap at that rate, and concurrent appends share one commit (group commit) so a busy
    thread pool pays for one fsync per batch rather than per call. ``synchronous="NORMAL"`` is
    accepted for throwaway logs (benchmarks, tests of other components) and nothing else.
    """

    def __init__(
        self,
        data_dir: str | Path,
        partitions: int = 25,
        name: str = "connect-offsets",
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        stalled_commit_s: float = STALLED_COMMIT_S,
        compaction_interval_s: float | None = None,
        compaction_min_records: int = MIN_RECORDS,
        startup_timeout_s: float | None = None,
    ) -> None:
        if not _TOPIC_NAME.fullmatch(name) or name in {".", ".."}:
            raise LogConfigError(
                f"embedded log name {name!r} is not a legal Kafka topic name "
                "(1-249 characters of [A-Za-z0-9._-]); it must be one so the log can be exported to a topic"
            )
        if partitions < 1:
            raise LogConfigError(f"embedded log partitions must be at least 1, got {partitions}")
        if synchronous not in ("FULL", "NORMAL"):
            raise LogConfigError(f"synchronous must be FULL or NORMAL, got {synchronous!r}")
        # Absolute from here on: the reader connects later, and again after an error, wherever the
        # process's working directory is by then.
        self._data_dir = Path(data_dir).absolute()
        self._name = name
        self._partitions = partitions
        self._db_path = self._data_dir / f"{name}.sqlite3"
        self._file = LogFile(self._db_path, name, partitions, synchronous)
        self._write_timings = WriteTimings(
            self._file.description,
            "SQLite's write lock, commit and fsync (the disk, or another process writing to this log)",
        )

        self._stalled_commit_s = stalled_commit_s
        self._startup_timeout_s = startup_timeout_s
        self._keep_floors: list[Callable[[int], int | None]] = []
        self._faults = StorageFaults(self._file.description, self._probe_write)
        self._compactor = (
            None
            if compaction_interval_s is None
            else Compactor(
                self._file.description,
                self.record_count,
                self.compact,
                compaction_interval_s,
                CompactionPolicy(compaction_min_records),
            )
        )
        self._commit_started: float | None = None  # monotonic start of the transaction running now, if any
        self._writer: sqlite3.Connection | None = None
        self._busy_ms = 0  # the writer connection's busy_timeout, as last set by _set_busy_timeout
        self._commit_lock = threading.Lock()  # guards the writer connection; held by the commit leader
        self._pending_lock = threading.Lock()  # guards _pending and _closed
        self._pending: list[_WriteRequest] = []
        self._closed = False
        self._claims_reader: sqlite3.Connection | None = None
        self._claims_lock = threading.Lock()  # guards _claims_reader
        self._claims_seen = ClaimsSeen(TAIL_POLL_S)
        self._own_writes = OwnWrites()

        self._reader: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        # Guards the read progress below; notified whenever it changes, for ``read_to_end``.
        self._progress_cond = threading.Condition()
        self._positions: dict[int, int] = {}
        self._initial_ends: dict[int, int] = {}
        self._records_read = 0
        self._caught_up = False
        self._reader_error: LogConfigError | None = None
        self._sink_failures = 0
        self._records_dropped = 0
        self._latest_ends: dict[int, int] = {}
        self._last_poll_at: float | None = None
        self._last_records_at: float | None = None
        self._last_error: str | None = None
        self._last_error_at: float | None = None

    # ------------------------------------------------------------------ properties

    @property
    def description(self) -> str:
        return self._file.description

    @property
    def partition_count(self) -> int:
        return self._partitions

    @property
    def path(self) -> Path:
        """The SQLite file (its ``-wal`` and ``-shm`` companions live next to it)."""
        return self._db_path

    @property
    def write_timings(self) -> WriteTimings:
        """One observation per transaction: concurrent writes share one (group commit)."""
        return self._write_timings

    @property
    def sink_failures(self) -> int:
        """Sink calls that raised. Their records were logged and skipped, as ``KafkaBasedLog.poll``
        skips a batch whose callback throws; a non-zero count means the view missed records."""
        with self._progress_cond:
            return self._sink_failures

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Create or verify the log. Idempotent.

        Integrity is checked here (``PRAGMA quick_check``) rather than discovered halfway through a
        replay: a damaged file must stop the daemon with a clear message at startup, not leave a
        reader thread failing in the background while the view serves a partial state.
        """
        if self._writer is not None:
            return
        if self._closed:
            raise LogConfigError(f"{self.description} was closed; create a new log object to reopen it")
        try:
            self._data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise LogConfigError(f"cannot create data directory {self._data_dir}: {e}") from e
        if not self._data_dir.is_dir():
            raise LogConfigError(f"data directory {self._data_dir} is not a directory")
        fs_type = filesystem_type(self._data_dir)
        if fs_type in NETWORK_FILESYSTEMS:
            raise LogConfigError(
                f"data directory {self._data_dir} is on a {fs_type} file system; the embedded log uses "
                "SQLite WAL, which needs a local file system (shared memory between processes)"
            )
        started = time.monotonic()
        reported_at: float | None = None
        while (conn := self._open_once()) is None:
            waited = time.monotonic() - started
            if self._startup_timeout_s is not None and waited >= self._startup_timeout_s:
                raise LogConfigError(
                    f"embedded offsets log {self._file.path} cannot be opened within {self._startup_timeout_s:g} s "
                    f"(--startup-timeout): the file system holding it has no space left"
                )
            if reported_at is None or time.monotonic() - reported_at >= _STARTUP_PROGRESS_S:
                log.warning(
                    "embedded offsets log %s cannot be opened: the file system holding it has no space left; "
                    "still trying, %.0f s so far",
                    self._file.path,
                    waited,
                )
                reported_at = time.monotonic()
            time.sleep(_FULL_DISK_RETRY_S)
        if reported_at is not None:
            log.warning("opened %s after %.1f s, once its disk had space", self.description, time.monotonic() - started)
        self._writer = conn
        log.info("opened %s (%d partitions)", self.description, self._partitions)

    def _open_once(self) -> sqlite3.Connection | None:
        """The writing connection, or None when its file system is full: opening a log in WAL mode
        writes (its write-ahead log and shared memory), and a disk that is full now will not always be;
        ``open`` waits for it as the Kafka backend waits for a cluster that does not answer."""
        conn: sqlite3.Connection | None = None
        try:
            conn = self._file.connect(timeout_s=30.0)
            self._partitions = self._file.initialise(conn)
            self._file.check_integrity(conn)
        except sqlite3.Error as e:
            if conn is not None:
                conn.close()
            if storage_fault(e) is not None and no_space_left(self._data_dir):
                return None
            raise self._file.config_error("cannot be opened", e) from e
        except LogConfigError:
            if conn is not None:
                conn.close()
            raise
        return conn

    def close(self) -> None:
        """Stop the reader, fail writes that were never started, and release the database. Idempotent."""
        with self._pending_lock:
            self._closed = True
            abandoned, self._pending = self._pending, []
        for req in abandoned:
            req.error = LogWriteError(f"{self.description} was closed before this write was started")
            req.done.set()
        self._stop.set()
        self._wake.set()
        self._faults.close()
        if self._compactor is not None:
            self._compactor.close()
        with self._progress_cond:
            self._progress_cond.notify_all()  # a read_to_end waiting now fails at once
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=10.0)
            if reader.is_alive():
                log.warning("reader thread of %s did not stop within 10 s (sink still busy?)", self.description)
        with self._commit_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        with self._claims_lock:
            if self._claims_reader is not None:
                self._claims_reader.close()
                self._claims_reader = None

    # ------------------------------------------------------------------ reading

    def start_reading(self, sink: RecordSink) -> None:
        """Capture end offsets now, then replay and tail on a daemon thread.

        The end offsets are taken before the thread starts so that ``progress()`` right after this
        call already describes the read-to-end the view is waiting for (Connect takes its end offsets
        before the first poll, too).
        """
        if self._reader is not None:
            raise RuntimeError(f"{self.description}: start_reading() was already called")
        with self._commit_lock:
            conn = self._writer
            if conn is None:
                raise LogConfigError(f"{self.description} is not open; call open() first")
            try:
                ends = end_offsets(conn)
            except sqlite3.Error as e:
                raise self._file.config_error("cannot be read", e) from e
        with self._progress_cond:
            self._initial_ends = ends
            self._positions = dict.fromkeys(ends, 0)
            self._caught_up = all(end == 0 for end in ends.values())
        thread = threading.Thread(
            target=self._read_forever, args=(sink,), name=f"embedded-log-reader-{self._name}", daemon=True
        )
        self._reader = thread
        thread.start()
        if self._compactor is not None:
            self._compactor.start()

    def serving(self) -> bool:
        return self._caught_up and self._reader_error is None  # two reads, each atomic; see progress()

    def progress(self) -> ReadProgress:
        """Snapshot of the replay. Carries the ``LogConfigError`` that stopped the reader, if any,
        so a damaged log surfaces as an error instead of a view that never becomes ready.

        End offsets are those captured at start until the replay reached them, then the ones the
        reader saw on its last look (every ``TAIL_POLL_S``), so ``end - position`` is its lag.
        """
        reader = self._reader
        alive = reader is not None and reader.is_alive()
        with self._progress_cond:
            ends = self._initial_ends
            if self._caught_up:
                ends = {**ends, **{p: max(e, self._positions.get(p, 0)) for p, e in self._latest_ends.items()}}
            return ReadProgress(
                positions=dict(self._positions),
                end_offsets=dict(ends),
                records_read=self._records_read,
                caught_up=self._caught_up and self._reader_error is None,
                error=None if self._reader_error is None else self._reader_error.message,
                records_dropped=self._records_dropped,
                alive=alive,
                last_poll_at=self._last_poll_at,
                last_records_at=self._last_records_at,
                last_error=self._last_error,
                last_error_at=self._last_error_at,
            )

    def _remember_error(self, message: str) -> None:
        with self._progress_cond:
            self._last_error = message
            self._last_error_at = time.time()

    def _read_forever(self, sink: RecordSink) -> None:
        started = time.monotonic()
        backoff = TAIL_POLL_S
        conn: sqlite3.Connection | None = None
        try:
            while not self._stop.is_set():
                self._wake.clear()  # before looking, so a wake-up during the look is not lost
                try:
                    if conn is None:
                        conn = self._file.connect(timeout_s=5.0)
                    self._deliver_available(conn, sink, started)
                    if self._claims_seen.due():
                        self._claims_seen.refresh(conn)
                    backoff = TAIL_POLL_S
                except sqlite3.Error as e:
                    if is_corruption(e):
                        err = self._file.config_error("became unreadable while reading", e)
                        log.error("%s; reader stopped", err.message)
                        self._remember_error(err.message)
                        with self._progress_cond:
                            self._reader_error = err
                            self._progress_cond.notify_all()
                        return
                    log.warning("reading %s failed (%s); retrying in %.2f s", self.description, e, backoff)
                    self._remember_error(f"reading failed: {e}")
                    if conn is not None:
                        conn.close()
                        conn = None
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                self._wake.wait(TAIL_POLL_S)
        finally:
            if conn is not None:
                conn.close()

    def _deliver_available(self, conn: sqlite3.Connection, sink: RecordSink, started: float) -> None:
        """Deliver every record below the current end offsets, partition by partition in offset order.

        Rows are fetched with ``offset < end`` in short read transactions (no snapshot held across
        sink calls, so checkpoints and compaction are never blocked by a slow view). A batch shorter
        than the limit means the partition has nothing more below ``end`` — compaction gaps
        included — so the position jumps to ``end``.
        """
        ends = end_offsets(conn)
        with self._progress_cond:
            self._latest_ends = ends
            self._last_poll_at = time.time()
        for p in sorted(ends):
            end = ends[p]
            with self._progress_cond:
                pos = self._positions.get(p, 0)
            while pos < end and not self._stop.is_set():
                rows = conn.execute(_SELECT_RANGE, (p, pos, end, REPLAY_BATCH)).fetchall()
                new_pos = end if len(rows) < REPLAY_BATCH else rows[-1][3] + 1
                if rows:
                    records = list(starmap(LogRecord, rows))
                    try:
                        sink(records)
                    except Exception as e:
                        log.exception(
                            "sink failed on %s partition %d offsets %d..%d; those %d records were skipped",
                            self.description,
                            p,
                            rows[0][3],
                            rows[-1][3],
                            len(rows),
                        )
                        self._remember_error(f"sink failed; skipped {len(rows)} records: {e!r}")
                        with self._progress_cond:
                            self._sink_failures += 1
                            self._records_dropped += len(rows)
                pos = new_pos
                with self._progress_cond:
                    self._positions[p] = pos
                    self._records_read += len(rows)
                    if rows:
                        self._last_records_at = time.time()
                    self._progress_cond.notify_all()
                    if not self._caught_up and all(
                        self._positions.get(q, 0) >= e for q, e in self._initial_ends.items()
                    ):
                        self._caught_up = True
                        log.info(
                            "%s: read to end, %d records in %.2f s",
                            self.description,
                            self._records_read,
                            time.monotonic() - started,
                        )

    # ------------------------------------------------------------------ writing

    def append(self, entries: Sequence[tuple[bytes | None, bytes | None]], timeout_s: float = 30.0) -> list[Position]:
        """Durably append ``(key, value-or-None)`` records; returns where each landed, in input order.

        Concurrent callers are group-committed: whoever holds the commit lock writes every waiting
        request in one transaction (each request's records stay contiguous and in order, so per-key
        order holds) and pays for one fsync. Keyless records are refused with ``InvalidRecord`` before
        anything is written, because a compacted Kafka topic refuses them too and the log must stay
        exportable. A request that times out before a commit picked it up is withdrawn and reported
        as not written; one already inside a commit waits for that commit's outcome, so the answer
        is always exact, never "maybe".
        """
        return self._append(entries, timeout_s, None)

    def append_fenced(
        self, fence: Fence, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float = 30.0
    ) -> list[Position]:
        """``append``, refused with ``Fenced`` unless ``fence`` is the connector's current claim (or,
        for ``fence.epoch=None``, with ``ClaimHeld`` while anyone holds it); the check runs inside the
        very transaction that writes, so no claim can slip between the check and the write."""
        return self._append(entries, timeout_s, fence)

    def _append(
        self, entries: Sequence[tuple[bytes | None, bytes | None]], timeout_s: float, fence: Fence | None
    ) -> list[Position]:
        if not entries:
            return []
        req = _WriteRequest(self._prepare(entries), fence)
        deadline = time.monotonic() + timeout_s
        with self._pending_lock:
            if self._closed or self._writer is None:
                raise LogWriteError(f"{self.description} is not open; nothing was written")
            self._pending.append(req)
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
            if self._commit_lock.acquire(timeout=remaining):
                try:
                    if not req.done.is_set():
                        self._commit_pending(deadline)
                finally:
                    self._commit_lock.release()
        if req.error is not None:
            raise req.error
        assert req.positions is not None
        return req.positions

    def _prepare(self, entries: Sequence[tuple[bytes | None, bytes | None]]) -> list[tuple[bytes, bytes | None, int]]:
        prepared: list[tuple[bytes, bytes | None, int]] = []
        n = self._partitions
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
            prepared.append((kb, None if value is None else bytes(value), partition_for(kb, n)))
        return prepared

    def _commit_pending(self, deadline: float) -> None:
        """Write every waiting request in one transaction. Caller holds ``_commit_lock``."""
        with self._pending_lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            conn = self._writer
            if conn is None:
                raise LogWriteError(f"{self.description} was closed; nothing was written")
            started = self._commit_started = time.monotonic()
            try:
                results = self._write(conn, batch, deadline)
            except sqlite3.Error as e:
                raise self._write_failed(e, "the write", _size(batch)) from e
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
                self._write_timings.observe(time.monotonic() - started, written)
                self._faults.succeeded()
        except OffsetsError as e:
            for req in batch:
                req.error = e
        finally:
            self._commit_started = None
            for req in batch:
                if req.positions is None and req.error is None:
                    req.error = LogWriteError(f"{self.description}: write interrupted; nothing was written")
                req.done.set()

    def _write(
        self, conn: sqlite3.Connection, batch: list[_WriteRequest], deadline: float
    ) -> list[list[Position] | OffsetsError]:
        self._set_busy_timeout(conn, deadline)
        conn.execute("BEGIN IMMEDIATE")
        try:
            next_offsets = end_offsets(conn, {p for req in batch for _, _, p in req.entries})
            now_ms = time.time_ns() // 1_000_000
            rows: list[tuple[int, int, bytes, bytes | None, int]] = []
            results: list[list[Position] | OffsetsError] = []
            for req in batch:
                if req.fence is not None:
                    current = self._claim_in(conn, req.fence.connector)
                    if current is not None:
                        self._claims_seen.claimed(req.fence.connector)
                    if req.fence.epoch is None:
                        if current is not None:  # an unclaimed writer, and someone holds the connector
                            results.append(ClaimHeld(held_message(req.fence.connector, current)))
                            continue
                    elif current is None or current.epoch != req.fence.epoch:
                        results.append(Fenced(fenced_message(req.fence.connector, req.fence.epoch, current)))
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
            conn.execute("COMMIT")
            self._own_writes.note_ends(ends)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return results

    def _write_failed(self, e: sqlite3.Error, what: str, size: int = 0) -> OffsetsError:
        """The answer to a write transaction (of ``size`` bytes) SQLite refused: a timeout to retry when
        it waited out its deadline for another process's write lock, a refusal by the storage (noted,
        so ``/readyz`` says so until a write succeeds), or a failed write."""
        if is_busy(e):  # the deadline, spent waiting: a timeout to retry, not a failed write
            return LogTimeout(
                f"{self.description}: {what} timed out waiting for another process's write (SQLite's "
                "write lock); nothing was written"
            )
        reason = storage_fault(e)
        if reason is not None:
            self._faults.failed(reason, size)
            return LogStorageRefused(f"{self.description} refused {what}: {reason}; nothing was written")
        return LogWriteError(f"{self.description}: {what} failed ({e}); nothing was written")

    def _probe_write(self, size: int) -> None:
        """A durable write of ``size`` bytes (a metadata row nothing reads, removed again), to learn
        that the storage takes writes again while no request brings one (``StorageFaults``)."""
        for statement, args in (
            ("INSERT OR REPLACE INTO meta (key, value) VALUES ('write_probe', zeroblob(?))", (size,)),
            ("DELETE FROM meta WHERE key = 'write_probe'", ()),
        ):
            with self._commit_lock:
                conn = self._require_writer()
                self._set_busy_timeout(conn, time.monotonic() + 5.0)
                with immediate(conn):
                    conn.execute(statement, args)

    def _set_busy_timeout(self, conn: sqlite3.Connection, deadline: float) -> None:
        """How long ``BEGIN IMMEDIATE`` may wait for another process's write: the time left, never
        more, and at most a tenth less. Consecutive writes (whose deadlines differ by milliseconds)
        find it already set instead of running a PRAGMA each time. Caller holds ``_commit_lock``."""
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        if not left_ms * 0.9 <= self._busy_ms <= left_ms:
            conn.execute(f"PRAGMA busy_timeout = {left_ms}")
            self._busy_ms = left_ms

    def reachability(self) -> str | None:
        """Why writes cannot be made durable now: the storage refuses them (a full disk, until a write
        succeeds again), or a transaction has been running for ``stalled_commit_s`` or more (see
        ``STALLED_COMMIT_S``). Never blocks: it reads attributes the writing threads set and clear."""
        refused = self._faults.reason()
        if refused is not None:
            return refused
        started = self._commit_started
        if started is None:
            return None
        running = time.monotonic() - started
        if running < self._stalled_commit_s:
            return None
        return (
            f"a write to {self.description} has been waiting for SQLite's write lock, commit and fsync for "
            f"{running:.1f} s (the disk is not answering, or another process holds the log's write lock)"
        )

    def end_offsets(self, timeout_s: float | None = None) -> dict[int, int]:
        with self._commit_lock:
            return end_offsets(self._require_writer())

    def read_own_writes(self, timeout_s: float) -> bool:
        ends = self._own_writes.ends()
        self._wake.set()
        with self._progress_cond:
            return self._progress_cond.wait_for(
                lambda: self._passed(ends) or self._reader_error is not None or self._stop.is_set(), timeout_s
            ) and self._passed(ends)

    def _passed(self, ends: dict[int, int]) -> bool:
        """The reader's positions reached ``ends``. The caller holds ``_progress_cond``."""
        return all(self._positions.get(p, 0) >= end for p, end in ends.items())

    def read_to_end(self, timeout_s: float) -> None:
        """Wait until the reader has delivered everything committed before this call.

        Wakes the reader, so this returns as soon as the sink has applied what is there. Appends do
        not wake it: the view applies them at once (write-through), so the reader takes them in
        batches at its next look, at most ``TAIL_POLL_S`` later, instead of one wake-up per commit;
        whatever needs the reader's delivery of this process's writes waits for it
        (``read_own_writes``, ``read_to_end``).
        """
        deadline = time.monotonic() + timeout_s
        if self._reader is None:
            raise LogUnavailable(f"{self.description} is not being read; call start_reading() first")
        try:
            ends = self.end_offsets()
        except (sqlite3.Error, LogWriteError) as e:
            raise LogUnavailable(f"{self.description} cannot be read to its end: {e}") from e
        self._wake.set()

        with self._progress_cond:
            self._progress_cond.wait_for(
                lambda: self._passed(ends) or self._reader_error is not None or self._stop.is_set(),
                max(deadline - time.monotonic(), 0.0),
            )
            if self._passed(ends):
                return
            error = self._reader_error
            behind = {p: (self._positions.get(p, 0), end) for p, end in ends.items() if self._positions.get(p, 0) < end}
        if error is not None:
            raise LogUnavailable(f"{self.description} cannot be read to its end: {error.message}")
        if self._stop.is_set():
            raise LogUnavailable(f"{self.description} was closed before it was read to its end")
        raise LogTimeout(
            f"{self.description} was not read to its end within {timeout_s:g} s "
            f"(partition: (position, end offset) still behind: {behind})"
        )

    # ------------------------------------------------------------------ ownership

    def claim(self, connector: str, owner: str) -> Claim:
        """The next epoch for ``connector``, in one ``BEGIN IMMEDIATE`` transaction: two claims
        racing from two processes get distinct epochs and the later one wins."""
        with self._commit_lock:
            conn = self._require_writer()
            try:
                with immediate(conn):
                    row = conn.execute("SELECT epoch FROM claims WHERE connector = ?", (connector,)).fetchone()
                    claim = Claim(connector, owner, (row[0] if row else 0) + 1, time.time_ns() // 1_000_000)
                    conn.execute(
                        "INSERT INTO claims (connector, owner, epoch, claimed_at_ms, released) "
                        "VALUES (?, ?, ?, ?, 0) ON CONFLICT (connector) DO UPDATE SET owner = excluded.owner, "
                        "epoch = excluded.epoch, claimed_at_ms = excluded.claimed_at_ms, released = 0",
                        (claim.connector, claim.owner, claim.epoch, claim.claimed_at_ms),
                    )
            except sqlite3.Error as e:
                raise self._write_failed(e, f"the claim of connector {connector!r}") from e
            self._claims_seen.claimed(connector)
        self._faults.succeeded()
        return claim

    def current_claim(self, connector: str, timeout_s: float | None = None) -> Claim | None:
        """Read on a connection of its own: WAL readers see the last commit without waiting for the
        commit in progress, so a write's fail-fast claim check does not queue behind the group commit
        that holds ``_commit_lock`` (the check inside the writing transaction stays the atomic one)."""
        with self._claims_lock:
            return self._claim_in(self._claims_connection(), connector)

    def current_claims(self, connectors: Collection[str], timeout_s: float | None = None) -> dict[str, Claim]:
        """One read of the claims table (every unreleased claim) instead of a query per connector."""
        wanted = set(connectors)
        with self._claims_lock:
            rows = (
                self._claims_connection()
                .execute("SELECT connector, owner, epoch, claimed_at_ms FROM claims WHERE released = 0")
                .fetchall()
            )
        return {row[0]: Claim(*row) for row in rows if row[0] in wanted}

    def _claims_connection(self) -> sqlite3.Connection:
        """The claims reads' own connection (opened on first use). Caller holds ``_claims_lock``."""
        if self._closed or self._writer is None:
            raise LogWriteError(f"{self.description} is not open")
        if self._claims_reader is None:
            self._claims_reader = self._file.connect(timeout_s=30.0)
        return self._claims_reader

    def release(self, fence: Fence) -> bool:
        with self._commit_lock:
            conn = self._require_writer()
            try:
                cursor = conn.execute(
                    "UPDATE claims SET released = 1 WHERE connector = ? AND epoch = ? AND released = 0",
                    (fence.connector, fence.epoch),
                )
            except sqlite3.Error as e:
                raise self._write_failed(e, f"the release of connector {fence.connector!r}'s claim") from e
            if cursor.rowcount != 1:
                return False
            self._claims_seen.released(fence.connector)
            return True

    def may_be_claimed(self, connector: str) -> bool:
        return self._claims_seen.may_be_claimed(connector)

    @staticmethod
    def _claim_in(conn: sqlite3.Connection, connector: str) -> Claim | None:
        row = conn.execute(
            "SELECT owner, epoch, claimed_at_ms FROM claims WHERE connector = ? AND released = 0", (connector,)
        ).fetchone()
        return None if row is None else Claim(connector, row[0], row[1], row[2])

    # ------------------------------------------------------------------ compaction

    def compact(self, stop: threading.Event | None = None) -> CompactionReport:
        """Keep only the latest record per key in each partition, as Kafka's log cleaner does.

        Offsets are kept (readers skip the gaps, since they track positions, not counts) and the
        latest record of every key stays, tombstones included: dropping one could let a reader that
        already applied the older value miss the delete, which is what Kafka's
        ``delete.retention.ms`` guards against. Safe while readers and writers run: a reader behind
        the latest record still reaches it, one past it has applied it. The records to remove are
        found by a read that holds no lock and deleted ``DELETE_STEP`` at a time
        (``emulator.logs.embedded.compaction``), so an append waits for one step at most. Freed
        pages go back to the file system when the file was created with incremental vacuum.
        ``stop`` (the daemon's compactor closing) ends it between two steps.

        While this object's reader runs, only records before its position are removed, as Kafka's
        cleaner never touches the active segment: every record reaches the reader, and so the
        history archive, even one superseded a moment after it was written. Records a read back
        still needs (``keep_records``) are kept too, asked again before every step, since the history
        archive may begin one while a compaction runs.
        """
        started = time.monotonic()
        before = removed = 0
        reader = self._file.connect(timeout_s=30.0)
        try:
            for p in range(self._partitions):
                try:
                    count, offsets = superseded(reader, p, self._compaction_bound(p))
                except sqlite3.Error as e:
                    raise LogWriteError(f"{self.description}: the compaction of partition {p} failed ({e})") from e
                before += count
                for step in range(0, len(offsets), DELETE_STEP):
                    if stop is not None and stop.is_set():
                        break
                    chunk = offsets[step : step + DELETE_STEP]
                    if self._keep_floors:  # a read back may have begun since ``superseded`` looked
                        bound = self._compaction_bound(p)
                        chunk = chunk if bound is None else [o for o in chunk if o < bound]
                    if chunk:
                        self._delete(p, chunk)
                        removed += len(chunk)
                    time.sleep(_YIELD_S)
                if stop is not None and stop.is_set():
                    break
        finally:
            reader.close()
        if stop is None or not stop.is_set():
            self._release_free_pages()
        report = CompactionReport(before, before - removed, time.monotonic() - started)
        log.info(
            "compacted %s: %d -> %d records in %.2f s",
            self.description,
            before,
            report.records_after,
            report.duration_s,
        )
        return report

    def _compaction_bound(self, partition: int) -> int | None:
        """Where compaction must stop in ``partition``: the reader's position, or an earlier offset
        a consumer of its deliveries still has to read again (``keep_records``); None when this
        object does not read the log."""
        if self._reader is None:
            return None
        with self._progress_cond:
            position = self._positions.get(partition, 0)
        for floor in self._keep_floors:
            kept = floor(partition)
            if kept is not None and kept < position:
                position = kept
        return position

    def keep_records(self, floor: Callable[[int], int | None]) -> None:
        self._keep_floors.append(floor)

    def leave_compaction(self, to_whom: Callable[[], str | None]) -> None:
        if self._compactor is not None:
            self._compactor.leave_while(to_whom)

    def reread(self, ranges: Mapping[int, tuple[int, int]], timeout_s: float) -> Iterator[list[LogRecord]]:
        """Short read transactions on a connection of its own, as the reader's (``_deliver_available``)."""
        try:
            conn = self._file.connect(timeout_s=timeout_s)
        except sqlite3.Error as e:
            raise LogUnavailable(f"{self.description} cannot be read again: {e}") from e
        try:
            for p, (start, stop) in sorted(ranges.items()):
                position = start
                while position < stop:
                    try:
                        rows = conn.execute(_SELECT_RANGE, (p, position, stop, REPLAY_BATCH)).fetchall()
                    except sqlite3.Error as e:
                        raise LogUnavailable(f"{self.description} cannot be read again: {e}") from e
                    if not rows:
                        break
                    yield list(starmap(LogRecord, rows))
                    position = rows[-1][3] + 1
        finally:
            conn.close()

    def compaction(self) -> dict[str, Any] | None:
        return None if self._compactor is None else self._compactor.status()

    def record_count(self) -> int:
        """Records in the log now, on a connection of its own (an index scan: ~30 ms at 1,000,000)."""
        conn = self._file.connect(timeout_s=30.0)
        try:
            return record_count(conn)
        finally:
            conn.close()

    def _delete(self, partition: int, offsets: list[int]) -> None:
        """One compaction step: delete these superseded records in one transaction."""
        with self._commit_lock:
            conn = self._require_writer()
            try:
                self._set_busy_timeout(conn, time.monotonic() + 30.0)
                with immediate(conn):
                    conn.executemany(
                        "DELETE FROM records WHERE partition = ? AND offset = ?", [(partition, o) for o in offsets]
                    )
            except sqlite3.Error as e:
                raise self._write_failed(e, f"the compaction of partition {partition}") from e

    def _release_free_pages(self, pages_per_step: int = 256) -> None:
        """Give pages freed by compaction back to the file system, a bounded step at a time.

        One step (256 pages) holds the write lock for a few milliseconds, so appends interleave with
        a large vacuum instead of waiting for all of it (2,000-page steps held them up to 80 ms).
        ``executescript`` because Python's ``execute`` steps the pragma only once, which frees a
        single page. The file shrinks when the WAL is copied back, hence the PASSIVE checkpoint (it
        never waits for readers).
        """
        try:
            while True:
                with self._commit_lock:
                    conn = self._require_writer()
                    (free,) = conn.execute("PRAGMA freelist_count").fetchone()
                    if free == 0:
                        break
                    conn.executescript(f"PRAGMA incremental_vacuum({pages_per_step});")
                    (left,) = conn.execute("PRAGMA freelist_count").fetchone()
                    if left >= free:  # auto_vacuum is off (a file from elsewhere): nothing to release
                        break
                time.sleep(_YIELD_S)
            with self._commit_lock:
                self._require_writer().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as e:
            log.warning("%s: compaction done but space was not released: %s", self.description, e)

    # ------------------------------------------------------------------ storage helpers

    def _require_writer(self) -> sqlite3.Connection:
        if self._writer is None:
            raise LogWriteError(f"{self.description} is not open")
        return self._writer


def _size(batch: Sequence[_WriteRequest]) -> int:
    """A transaction's key and value bytes: what a probe must be able to write for it to fit again."""
    return sum(len(key) + len(value or b"") for req in batch for key, value, _ in req.entries)
