"""The history archiver: every record the view applies, appended to rotated Avro files.

Threading. The view calls ``listener`` on the log's reader thread; it only puts the batch on a queue
bounded by record count and returns. One archiver thread owns every file, the watermark and the
epoch. When the queue is full the reader waits (backpressure) instead of dropping: the reader is
slowed, never robbed. The event loop is never involved, except ``sync`` which API handlers call
through ``asyncio.to_thread``.

Durability. Each dequeued batch is written and flushed to the OS as one or more Avro blocks before
the next is taken, so ``kill -9`` of the daemon loses only the batch being written plus what was
still queued (at most ``queue_records``, 100,000 by default). Data is fsynced at most
``fsync_interval_s`` (1 s) after it was written, on rotation and on close, so an OS crash or power
loss loses at most that last second too. Neither loss is permanent while the log still holds the
records: the watermark is recomputed from what the files really contain, so the next start
re-archives them (only their origin falls back to ``external``).

Failures. A write error is counted and logged, the file is cut back to its last good block and the
batch is retried in a new file (3 attempts). If it keeps failing (disk full, permissions), the
archiver stops, says so loudly (log, ``status()``), and counts every record it no longer archives;
it never resumes in the same run with a hole, so the next start re-archives from the log.

Sharing. One process writes a log's archive (``flock`` on ``lock``). A second daemon on the same log
and history directory opens it read-only: it answers history queries but archives nothing (the
writer's daemon sees the same records).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from fastavro.write import Writer

from emulator.codec.keys import KeyProblem, parse_key
from emulator.history.files import (
    ArchiveFile,
    ReadReport,
    base_name,
    closed_name,
    fsync_dir,
    iter_file,
    open_name,
    read_metadata,
    scan_dir,
    valid_prefix,
)
from emulator.history.guard import Decision, ReplayGuard, Verdict
from emulator.history.origins import EXTERNAL_ORIGIN, OriginRegistry
from emulator.history.schema import content_crc, history_schema
from emulator.history.state import ArchiveState, fingerprint, load_state, save_state
from emulator.logs.base import ReadProgress
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)

DEFAULT_RETENTION_S = 30 * 86400.0
DEFAULT_ROTATE_BYTES = 64 * 1024 * 1024
DEFAULT_ROTATE_INTERVAL_S = 86400.0
DEFAULT_QUEUE_RECORDS = 100_000
_WRITE_ATTEMPTS = 3
_BACKPRESSURE_WARN_S = 5.0
_KEY_CACHE_MAX = 200_000
_SEQ = re.compile(r"^(?:history|base)-(\d{10})")
_PARTITION_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=True).encode


class HistoryError(Exception):
    """The archive directory cannot be used (permissions, not a directory, damaged state)."""


def log_slug(identity: str) -> str:
    """A directory name for a log: readable, and unique through a hash of the full identity."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", identity).strip("_")[:80]
    return f"{readable}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def record_time(row: dict[str, Any]) -> int:
    """A row's time for queries and retention: the log record's timestamp, else when we archived it."""
    ts: int = row["record_timestamp_ms"]
    return ts if ts >= 0 else int(row["archived_at_ms"])


@dataclass
class ArchiveStats:
    records_archived: int = 0
    records_skipped_replay: int = 0
    batches: int = 0
    write_errors: int = 0
    records_not_archived: int = 0
    files_closed: int = 0
    files_folded: int = 0
    epochs_started: int = 0
    held_dropped: int = 0
    backpressure_waits: int = 0
    backpressure_s: float = 0.0
    last_error: str | None = None
    recovered: list[str] = field(default_factory=list)


@dataclass
class _Batch:
    records: Sequence[LogRecord]
    received_ms: int
    seq: int


_STOP = object()


class HistoryArchive:
    def __init__(
        self,
        root: str | Path,
        log_identity: str,
        *,
        origins: OriginRegistry | None = None,
        progress: Callable[[], ReadProgress] | None = None,
        retention_s: float | None = DEFAULT_RETENTION_S,
        rotate_bytes: int = DEFAULT_ROTATE_BYTES,
        rotate_interval_s: float | None = DEFAULT_ROTATE_INTERVAL_S,
        queue_records: int = DEFAULT_QUEUE_RECORDS,
        codec: str = "deflate",
        fsync_interval_s: float = 1.0,
        hold_limit: int = 200_000,
        tick_s: float = 0.5,
    ) -> None:
        self.root = Path(root)
        self.identity = log_identity
        self.directory = self.root / log_slug(log_identity)
        self.origins = origins or OriginRegistry()
        self._progress = progress
        self.retention_s = retention_s
        self.rotate_bytes = rotate_bytes
        self.rotate_interval_s = rotate_interval_s
        self._capacity = queue_records
        self._codec = codec
        self._fsync_interval_s = fsync_interval_s
        self._hold_limit = hold_limit
        self._tick_s = tick_s
        self.stats = ArchiveStats()

        self._cond = threading.Condition()  # guards the queue, sequence numbers and failure state
        self._queue: deque[_Batch | object] = deque()
        self._queued_records = 0
        self._enqueued_seq = 0
        self._done_seq = 0
        self._failed: str | None = None
        self._closing = False
        self._opened = False
        self.writable = False
        self._lock_fd: int | None = None
        self._thread: threading.Thread | None = None

        # Owned by the archiver thread (and open() before it starts).
        self._files_lock = threading.Lock()  # held while files are renamed, cut or deleted
        self._state = ArchiveState(log_identity)
        self._guard: ReplayGuard | None = None
        self._next_seq = 0
        self._fo: IO[bytes] | None = None
        self._writer: Any = None
        self._file_seq = -1
        self._file_opened_at = 0.0
        self._flushed_size = 0
        self._file_min: int | None = None
        self._file_max: int | None = None
        self._last_fsync = time.monotonic()
        self._dirty = False
        self._next_retention = 0.0
        self._key_cache: dict[bytes, tuple[str | None, str | None, str | None]] = {}

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Recover the directory after a crash, load the watermark, start the archiver thread.

        Raises ``HistoryError`` when the directory cannot be used at all. A directory written by
        another live process is opened read-only (queries work, nothing is archived here).
        """
        if self._opened:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            marker = self.directory / "log.json"
            if not marker.exists():
                marker.write_text(json.dumps({"log": self.identity}) + "\n", encoding="utf-8")
            fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise HistoryError(f"history directory {self.directory} cannot be used: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            self._opened = True
            log.warning(
                "history archive %s is being written by another process; this daemon serves history "
                "read-only and archives nothing itself",
                self.directory,
            )
            return
        self._lock_fd = fd
        try:
            self._recover()
        except HistoryError:
            self._release_lock()
            raise
        except (OSError, ValueError) as exc:
            self._release_lock()
            raise HistoryError(f"history archive {self.directory} cannot be recovered: {exc}") from exc
        self._guard = ReplayGuard(self._state, self._hold_limit)
        self.writable = True
        self._opened = True
        self.origins.enable()
        self._next_retention = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="history-archiver", daemon=True)
        self._thread.start()
        log.info(
            "history archive %s: epoch %d, watermark over %d partitions (%d records below it)",
            self.directory,
            self._state.epoch,
            len(self._state.next_offsets),
            sum(self._state.next_offsets.values()),
        )

    def close(self, timeout_s: float = 60.0) -> None:
        """Archive what is queued, close the file (renamed, fsynced) and save the state. Idempotent."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._queue.append(_STOP)
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                log.error(
                    "history archiver did not finish within %.0f s; the next start re-archives the rest", timeout_s
                )
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------------ the view's side

    def listener(self, records: Sequence[LogRecord]) -> None:
        """``OffsetView`` listener (reader thread): enqueue, waiting while the queue is full."""
        if not records or not self.writable:
            return
        received_ms = time.time_ns() // 1_000_000
        waited_from: float | None = None
        warned = False
        with self._cond:
            while (
                self._failed is None
                and not self._closing
                and self._queued_records > 0
                and self._queued_records + len(records) > self._capacity
            ):
                now = time.monotonic()
                if waited_from is None:
                    waited_from = now
                    self.stats.backpressure_waits += 1
                elif not warned and now - waited_from > _BACKPRESSURE_WARN_S:
                    warned = True
                    log.warning(
                        "history archiver is %d records behind; the log reader waits for it (backpressure)",
                        self._queued_records,
                    )
                if self._thread is not None and not self._thread.is_alive():
                    self._fail_locked("the archiver thread died")
                    break
                self._cond.wait(1.0)
            if waited_from is not None:
                self.stats.backpressure_s += time.monotonic() - waited_from
            if self._failed is not None or self._closing:
                self._count_not_archived_locked(len(records))
                return
            self._enqueued_seq += 1
            self._queue.append(_Batch(records, received_ms, self._enqueued_seq))
            self._queued_records += len(records)
            self._cond.notify_all()

    def _count_not_archived_locked(self, n: int) -> None:
        before = self.stats.records_not_archived
        self.stats.records_not_archived += n
        if before == 0 or before // 100_000 != self.stats.records_not_archived // 100_000:
            log.error(
                "history archiving stopped (%s): %d records not archived so far; they are archived from the "
                "log at the next start if the log still holds them",
                self._failed or "closing",
                self.stats.records_not_archived,
            )

    def sync(self, timeout_s: float = 30.0) -> bool:
        """Wait until every batch handed to ``listener`` so far is written and flushed.

        Makes history read-your-writes: a PATCH returns after the view applied its records, which
        is after they were enqueued here. False on timeout, failure or a read-only archive.
        """
        if not self.writable:
            return False
        deadline = time.monotonic() + timeout_s
        with self._cond:
            target = self._enqueued_seq
            while self._done_seq < target and self._failed is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return self._failed is None

    def status(self) -> dict[str, Any]:
        with self._cond:
            queued = self._queued_records
            failed = self._failed
        s = self.stats
        return {
            "directory": str(self.directory),
            "log": self.identity,
            "mode": "failed" if failed else ("writing" if self.writable else "read-only"),
            "failure": failed,
            "epoch": self._state.epoch,
            "queued_records": queued,
            "records_archived": s.records_archived,
            "records_skipped_replay": s.records_skipped_replay,
            "records_not_archived": s.records_not_archived,
            "write_errors": s.write_errors,
            "last_error": s.last_error,
            "files_closed": s.files_closed,
            "files_folded_by_retention": s.files_folded,
            "epochs_started": s.epochs_started,
            "held_records_dropped": s.held_dropped,
            "backpressure_waits": s.backpressure_waits,
            "backpressure_s": round(s.backpressure_s, 3),
            "recovered_files": list(s.recovered),
            "retention_s": self.retention_s,
            "rotate_bytes": self.rotate_bytes,
            "rotate_interval_s": self.rotate_interval_s,
        }

    def snapshot_files(self) -> list[tuple[ArchiveFile, IO[bytes]]]:
        """Open every file a query must read, atomically with respect to rotation and retention.

        Opened handles survive a later rename or delete (POSIX), and the file being written is
        copied up to its last flushed byte, so a query never sees a half-written block.
        """
        opened: list[tuple[ArchiveFile, IO[bytes]]] = []
        with self._files_lock:
            base, live, _ = scan_dir(self.directory)
            for f in ([base] if base else []) + live:
                try:
                    if f.kind == "open" and self.writable and f.seq == self._file_seq:
                        with f.path.open("rb") as raw:
                            opened.append((f, io.BytesIO(raw.read(self._flushed_size))))
                    else:
                        opened.append((f, f.path.open("rb")))
                except OSError as exc:
                    log.warning("history file %s could not be opened: %s", f.path, exc)
                    opened.append((f, io.BytesIO(b"")))
        return opened

    # ------------------------------------------------------------------ the archiver thread

    def _run(self) -> None:
        try:
            while True:
                item = self._take()
                if item is _STOP:
                    break
                if item is None:
                    self._idle()
                    continue
                assert isinstance(item, _Batch)
                self._process(item)
                with self._cond:
                    self._queued_records -= len(item.records)
                    self._done_seq = item.seq
                    self._cond.notify_all()
                self._maybe_fsync()
                self._maybe_rotate()
            self._shutdown()
        except _Stopped:
            pass
        except BaseException as exc:
            log.exception("history archiver crashed")
            with self._cond:
                self._fail_locked(f"archiver crashed: {exc!r}")

    def _take(self) -> _Batch | object | None:
        with self._cond:
            if not self._queue:
                self._cond.wait(self._tick_s)
            if not self._queue:
                return None
            return self._queue.popleft()

    def _fail_locked(self, reason: str) -> None:
        if self._failed is None:
            self._failed = reason
            self.stats.last_error = reason
            log.error("history archiving stopped: %s", reason)
        dropped = sum(len(b.records) for b in self._queue if isinstance(b, _Batch))
        self._queue.clear()
        self._queued_records = 0
        if dropped:
            self._count_not_archived_locked(dropped)
        self._cond.notify_all()

    def _process(self, batch: _Batch) -> None:
        guard = self._guard
        assert guard is not None
        rows: list[tuple[dict[str, Any], LogRecord]] = []
        for record in batch.records:
            decision = guard.decide(record)
            if decision.verdict is Verdict.SKIP:
                self.origins.forget(record)
                continue
            if decision.verdict is Verdict.NEW_EPOCH:
                self._write_rows(rows)
                rows = self._start_epoch(decision, batch.received_ms)
                decision = guard.decide(record)
                assert decision.verdict is Verdict.ARCHIVE
            rows.append((self._row(record, batch.received_ms), record))
        self.stats.records_skipped_replay = guard.skipped
        self._write_rows(rows)
        self.stats.batches += 1

    def _start_epoch(self, decision: Decision, received_ms: int) -> list[tuple[dict[str, Any], LogRecord]]:
        guard = self._guard
        assert guard is not None
        held = guard.take_held()
        self._close_file()
        self._state.new_epoch(decision.reason)
        guard.reset_for_epoch()
        save_state(self.directory, self._state)
        self.stats.epochs_started += 1
        lost = guard.held_dropped if decision.archive_held else 0
        self.stats.held_dropped += lost
        log.error(
            "history: %s. Starting epoch %d for %s; the earlier epochs stay in the archive%s",
            decision.reason,
            self._state.epoch,
            self.identity,
            (
                f"; {lost} records of the new log were delivered before this was detected and exceeded the "
                "hold-back buffer, so they are NOT archived"
                if lost
                else ""
            ),
        )
        if not decision.archive_held:
            return []
        rows = []
        for record in held:
            guard.delivered(record)
            rows.append((self._row(record, received_ms), record))
        return rows

    def _idle(self) -> None:
        self._maybe_fsync()
        self._maybe_rotate()
        self._check_positions()
        if self.retention_s is not None and time.monotonic() >= self._next_retention:
            self._next_retention = time.monotonic() + min(600.0, max(1.0, self.retention_s / 4))
            self._apply_retention()

    def _check_positions(self) -> None:
        guard = self._guard
        if guard is None or not guard.verifying or self._progress is None:
            return
        progress = self._progress()  # first the positions, then "nothing queued": see ReplayGuard
        with self._cond:
            if self._queue:
                return
        decision = guard.check_positions(progress.positions, progress.caught_up and progress.error is None)
        if decision.verdict is Verdict.NEW_EPOCH:
            self._write_rows(self._start_epoch(decision, time.time_ns() // 1_000_000))

    def _row(self, record: LogRecord, received_ms: int) -> dict[str, Any]:
        origin = self.origins.lookup(record) if self.origins.enabled else EXTERNAL_ORIGIN
        connector, partition_json, problem = self._classify(record.key)
        operation = origin.operation
        if origin.uncertain and operation is not None:
            operation += " (unacknowledged)"
        row = {
            "log": self.identity,
            "epoch": self._state.epoch,
            "kafka_partition": record.partition,
            "kafka_offset": record.offset,
            "record_timestamp_ms": record.timestamp_ms,
            "archived_at_ms": received_ms,
            "origin": origin.origin,
            "operation": operation,
            "request_connector": origin.connector,
            "key": record.key,
            "value": record.value,
            "connector": connector,
            "partition_json": partition_json,
            "key_problem": problem,
        }
        row["crc32"] = content_crc(row)
        return row

    def _classify(self, key: bytes | None) -> tuple[str | None, str | None, str | None]:
        if key is None:
            return None, None, KeyProblem.NULL_KEY.value
        cached = self._key_cache.get(key)
        if cached is not None:
            return cached
        parsed = parse_key(key)
        if isinstance(parsed, KeyProblem):
            info: tuple[str | None, str | None, str | None] = (None, None, parsed.value)
        else:
            try:
                text = _PARTITION_JSON(parsed.partition)
            except (TypeError, ValueError):
                text = None
            info = (parsed.connector, text, None)
        if len(self._key_cache) >= _KEY_CACHE_MAX:
            self._key_cache.clear()
        self._key_cache[key] = info
        return info

    # ------------------------------------------------------------------ files

    def _write_rows(self, rows: list[tuple[dict[str, Any], LogRecord]]) -> None:
        if not rows:
            return
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                self._ensure_file()
                writer = self._writer
                for row, _ in rows:
                    writer.write(row)
                writer.flush()
                assert self._fo is not None
                self._flushed_size = self._fo.tell()
                break
            except Exception as exc:
                self.stats.write_errors += 1
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                log.error(
                    "history: writing %d records failed (attempt %d of %d): %s",
                    len(rows),
                    attempt,
                    _WRITE_ATTEMPTS,
                    self.stats.last_error,
                )
                self._abandon_file()
                if attempt == _WRITE_ATTEMPTS:
                    with self._cond:
                        self._fail_locked(f"cannot write to {self.directory}: {self.stats.last_error}")
                        self._count_not_archived_locked(len(rows))
                    raise _Stopped from exc
                time.sleep(0.5 * attempt)
        self._dirty = True
        state = self._state
        last: dict[int, LogRecord] = {}
        lo, hi = self._file_min, self._file_max
        for row, record in rows:
            last[record.partition] = record
            t = record_time(row)
            if lo is None or t < lo:
                lo = t
            if hi is None or t > hi:
                hi = t
        self._file_min, self._file_max = lo, hi
        for record in last.values():  # only the newest record per partition is the watermark's tail
            state.note(record.partition, record.offset, fingerprint(record.key, record.value))
        self.stats.records_archived += len(rows)

    def _ensure_file(self) -> None:
        if self._writer is not None:
            return
        seq = self._next_seq
        self._next_seq += 1
        path = self.directory / open_name(seq)
        fo = path.open("wb")
        try:
            writer = Writer(
                fo,
                history_schema(),
                codec=self._codec,
                sync_interval=64 * 1024,
                metadata={"log": self.identity, "epoch": str(self._state.epoch), "seq": str(seq)},
            )
            fo.flush()
        except BaseException:
            fo.close()
            raise
        self._fo, self._writer, self._file_seq = fo, writer, seq
        self._flushed_size = fo.tell()
        self._file_min = self._file_max = None
        self._file_opened_at = time.monotonic()
        fsync_dir(self.directory)

    def _maybe_fsync(self, force: bool = False) -> None:
        if self._fo is None or not self._dirty:
            return
        now = time.monotonic()
        if force or now - self._last_fsync >= self._fsync_interval_s:
            try:
                os.fsync(self._fo.fileno())
            except OSError as exc:
                self.stats.write_errors += 1
                self.stats.last_error = f"fsync: {exc}"
                log.error("history: fsync of %s failed: %s", self.directory, exc)
                return
            self._last_fsync = now
            self._dirty = False

    def _maybe_rotate(self) -> None:
        if self._fo is None:
            return
        too_big = self._flushed_size >= self.rotate_bytes
        too_old = (
            self.rotate_interval_s is not None and time.monotonic() - self._file_opened_at >= self.rotate_interval_s
        )
        if too_big or too_old:
            self._close_file()
            if self.retention_s is not None:
                self._apply_retention()

    def _close_file(self) -> None:
        """Finish the current file: flush, fsync, rename to its closed name, save the state."""
        if self._fo is None:
            return
        fo, seq = self._fo, self._file_seq
        try:
            self._writer.flush()
            self._flushed_size = fo.tell()
            os.fsync(fo.fileno())
        except OSError as exc:
            self.stats.write_errors += 1
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            log.error("history: closing %s failed (%s); cutting it back to its last good block", fo.name, exc)
            self._abandon_file()
            return
        fo.close()
        self._finish(seq)

    def _finish(self, seq: int) -> None:
        """Rename the just-closed file (or delete it when it holds no record) and save the state."""
        path = self.directory / open_name(seq)
        with self._files_lock:
            if self._file_min is None or self._file_max is None:
                path.unlink(missing_ok=True)
            else:
                path.rename(self.directory / closed_name(seq, self._file_min, self._file_max))
                self.stats.files_closed += 1
            fsync_dir(self.directory)
        self._fo = self._writer = None
        self._file_seq = -1
        self._state.closed_through_seq = max(self._state.closed_through_seq, seq)
        save_state(self.directory, self._state)

    def _abandon_file(self) -> None:
        """After a failed write: cut the file back to its last flushed block and close it."""
        fo, seq = self._fo, self._file_seq
        if fo is None:
            return
        with contextlib.suppress(OSError):
            fo.close()  # may try to flush a half block; the truncate below removes it
        try:
            with self._files_lock:
                os.truncate(self.directory / open_name(seq), self._flushed_size)
            self._finish(seq)
        except OSError as exc:
            log.error("history: could not cut back %s (%s); it is recovered at the next start", fo.name, exc)
            self._fo = self._writer = None
            self._file_seq = -1

    def _shutdown(self) -> None:
        self._close_file()

    # ------------------------------------------------------------------ retention

    def _apply_retention(self) -> None:
        """Fold closed files whose newest record is older than the retention into the base file.

        The base keeps the latest record of every key still live at the horizon, so ``as_of`` stays
        exact for any time after the horizon (a partition written once, years ago, is still there)
        while everything older is deleted; history is compacted the way the topic is.
        """
        assert self.retention_s is not None
        cutoff = time.time_ns() // 1_000_000 - int(self.retention_s * 1000)
        base, live, leftovers = scan_dir(self.directory)
        for f in leftovers:
            with self._files_lock:
                f.path.unlink(missing_ok=True)
        candidates: list[ArchiveFile] = []
        for f in live:
            if f.kind != "closed" or f.max_time is None or f.max_time >= cutoff:
                break
            candidates.append(f)
        if not candidates:
            return
        try:
            self._fold(base, candidates)
        except Exception as exc:
            self.stats.write_errors += 1
            self.stats.last_error = f"retention: {type(exc).__name__}: {exc}"
            log.error("history retention failed (nothing was deleted): %s", self.stats.last_error)

    def _fold(self, base: ArchiveFile | None, candidates: list[ArchiveFile]) -> None:
        report = ReadReport()
        latest: dict[bytes | None, dict[str, Any]] = {}
        epoch = -1
        horizon = -1
        if base is not None:
            horizon = int(read_metadata(base.path).get("horizon_ms", "-1"))
        folded = 0
        for f in ([base] if base else []) + candidates:
            for row in iter_file(f, report):
                if row["epoch"] > epoch:
                    epoch = row["epoch"]
                    latest.clear()
                elif row["epoch"] < epoch:
                    continue
                latest.pop(row["key"], None)
                latest[row["key"]] = row
                horizon = max(horizon, record_time(row))
                folded += 1
        damaged = {d["file"] for d in report.damaged}
        last_seq = candidates[-1].seq
        keep = [row for row in latest.values() if row["value"] is not None]
        tmp = self.directory / (base_name(last_seq) + ".tmp")
        with tmp.open("wb") as fo:
            writer = Writer(
                fo,
                history_schema(),
                codec=self._codec,
                metadata={
                    "log": self.identity,
                    "horizon_ms": str(horizon),
                    "folded_through_seq": str(last_seq),
                    "kind": "base",
                },
            )
            for row in keep:
                writer.write(row)
            writer.flush()
            fo.flush()
            os.fsync(fo.fileno())
        with self._files_lock:
            os.replace(tmp, self.directory / base_name(last_seq))
            fsync_dir(self.directory)
            for f in ([base] if base else []) + candidates:
                if str(f.path) in damaged:
                    f.path.rename(f.path.with_name(f.path.name + ".damaged"))
                else:
                    f.path.unlink(missing_ok=True)
            fsync_dir(self.directory)
        self.stats.files_folded += len(candidates)
        log.info(
            "history retention: folded %d file(s) (%d records, newest %d ms) into %s, which keeps the %d "
            "records still live then; as_of is exact from that time on%s",
            len(candidates),
            folded,
            horizon,
            base_name(last_seq),
            len(keep),
            f"; {len(damaged)} damaged file(s) set aside as *.damaged" if damaged else "",
        )

    # ------------------------------------------------------------------ recovery

    def _recover(self) -> None:
        """Rebuild the exact watermark from the state file plus every file written after it."""
        try:
            state = load_state(self.directory, self.identity)
        except ValueError as exc:
            log.error("history: %s; rebuilding the watermark by reading every archive file", exc)
            state = None
        self._state = state or ArchiveState(self.identity)
        base, live, leftovers = scan_dir(self.directory)
        for f in leftovers:
            f.path.unlink(missing_ok=True)
        max_seq = -1
        for name in os.listdir(self.directory):
            if m := _SEQ.match(name):
                max_seq = max(max_seq, int(m.group(1)))
        self._next_seq = max_seq + 1
        report = ReadReport()
        to_scan: list[ArchiveFile] = []
        if base is not None and self._state.closed_through_seq < base.seq:
            to_scan.append(base)
        for f in live:
            if f.kind == "open":
                recovered = self._recover_open(f)
                if recovered is not None:
                    to_scan.append(recovered)
            elif f.seq > self._state.closed_through_seq:
                to_scan.append(f)
        for f in to_scan:
            for row in iter_file(f, report):
                if row["epoch"] > self._state.epoch:
                    self._state.epoch = row["epoch"]
                    self._state.next_offsets, self._state.tails = {}, {}
                if row["epoch"] == self._state.epoch:
                    self._state.note(row["kafka_partition"], row["kafka_offset"], fingerprint(row["key"], row["value"]))
        for d in report.damaged:
            self.stats.recovered.append(f"{d['file']}: {d['problem']}")
        self._state.closed_through_seq = max(self._state.closed_through_seq, max_seq)
        save_state(self.directory, self._state)

    def _recover_open(self, f: ArchiveFile) -> ArchiveFile | None:
        """Cut a file left open by a crash back to its last complete block and close it."""
        found = valid_prefix(f.path)
        if not found.header_ok:
            target = f.path.with_name(f.path.name + ".damaged")
            f.path.rename(target)
            self.stats.recovered.append(f"{f.path}: unreadable header ({found.error}); set aside as {target.name}")
            log.error("history: %s has no readable header (%s); set aside as %s", f.path, found.error, target)
            return None
        if found.good_end < found.size:
            os.truncate(f.path, found.good_end)
            msg = f"{f.path}: cut {found.size - found.good_end} bytes of an incomplete block ({found.error})"
            self.stats.recovered.append(msg)
            log.warning("history: %s (left by a crash; those records are re-archived from the log)", msg)
        report = ReadReport()
        times = [record_time(row) for row in iter_file(ArchiveFile(f.path, "closed", f.seq), report)]
        if not times:
            f.path.unlink()
            return None
        target = self.directory / closed_name(f.seq, min(times), max(times))
        f.path.rename(target)
        fsync_dir(self.directory)
        return ArchiveFile(target, "closed", f.seq, min(times), max(times))


class _Stopped(Exception):
    """Raised inside the archiver thread once archiving has failed for good."""
