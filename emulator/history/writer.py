"""The file being written: Avro blocks, the fsync policy, rotation, and cutting back after a failure.

Durability. Each batch is written and flushed to the OS as one or more Avro blocks before the next
is taken, so ``kill -9`` of the daemon loses only the batch being written plus what was still
queued. Data is fsynced at most ``fsync_interval_s`` after it was written, on rotation and on
close, so an OS crash or power loss loses at most that last interval too. Neither loss is
permanent while the log still holds the records: the watermark is recomputed from what the files
really contain (``recovery.py``), so the next start re-archives them.

A file is open as ``history-<seq>.avro.open`` and renamed to its closed name, which carries the
times of its first and last record, when it is rotated (by size or age) or closed; renames and
deletions happen under ``files_lock`` so that a query's snapshot never sees a file half-renamed.

Owned by the archiver thread; only ``readable_size`` is called from query threads (under the lock).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from fastavro.write import Writer

from emulator.history.avro_rows import write_blocks
from emulator.history.files import closed_name, fsync_dir, open_name
from emulator.history.schema import FORMAT_KEY, HISTORY_FORMAT, history_schema
from emulator.history.state import ArchiveState, fingerprint, save_state
from emulator.history.stats import ArchiveStats
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)

EncodedRow = tuple[bytes, LogRecord, int]
"""A row as Avro bytes (``avro_rows.RowEncoder``), its record, and its time (``rows.record_time``)."""

DEFAULT_ROTATE_BYTES = 64 * 1024 * 1024
DEFAULT_ROTATE_INTERVAL_S = 86400.0
_WRITE_ATTEMPTS = 3


class WriteFailed(Exception):
    """Every attempt to write a batch failed (disk full, permissions): the archiver stalls."""


class CurrentFile:
    """The one open archive file of a directory, opened on the first write after a close."""

    def __init__(
        self,
        directory: Path,
        identity: str,
        state: ArchiveState,
        stats: ArchiveStats,
        files_lock: threading.Lock,
        *,
        next_seq: int,
        codec: str = "deflate",
        fsync_interval_s: float = 1.0,
        rotate_bytes: int = DEFAULT_ROTATE_BYTES,
        rotate_interval_s: float | None = DEFAULT_ROTATE_INTERVAL_S,
    ) -> None:
        self._directory = directory
        self._identity = identity
        self._state = state
        self._stats = stats
        self._files_lock = files_lock  # held while files are renamed, cut or deleted
        self._next_seq = next_seq
        self._codec = codec
        self._fsync_interval_s = fsync_interval_s
        self._rotate_bytes = rotate_bytes
        self._rotate_interval_s = rotate_interval_s
        self._fo: IO[bytes] | None = None
        self._writer: Any = None
        self._sync_marker = b""
        self._seq = -1
        self._opened_at = 0.0
        self._flushed_size = 0
        self._min_time: int | None = None
        self._max_time: int | None = None
        self._last_fsync = time.monotonic()
        self._dirty = False

    def readable_size(self, seq: int) -> int | None:
        """How many bytes of file ``seq`` are complete blocks, if it is the one being written."""
        return self._flushed_size if seq == self._seq else None

    # ------------------------------------------------------------------ writing

    def write(self, rows: Sequence[EncodedRow], attempts: int = _WRITE_ATTEMPTS) -> None:
        """Append rows as Avro blocks and flush them, then advance the watermark.

        A failed attempt is counted and logged, the file is cut back to its last good block and the
        rows are written again into a new file; after the last of ``attempts`` ``WriteFailed`` is
        raised and nothing of the batch counts as archived (the archiver then retries, slower).
        """
        if not rows:
            return
        for attempt in range(1, attempts + 1):
            try:
                self._ensure_open()
                fo = self._fo
                assert fo is not None
                write_blocks(fo, [row for row, _, _ in rows], self._codec, self._sync_marker)
                fo.flush()
                self._flushed_size = fo.tell()
                break
            except Exception as exc:
                self._stats.write_error(f"{type(exc).__name__}: {exc}")
                log.error(
                    "history: writing %d records failed (attempt %d of %d): %s",
                    len(rows),
                    attempt,
                    attempts,
                    self._stats.last_error,
                )
                self._abandon()
                if attempt == attempts:
                    raise WriteFailed(f"cannot write to {self._directory}: {self._stats.last_error}") from exc
                time.sleep(0.5 * attempt)
        self._dirty = True
        last: dict[int, LogRecord] = {}
        lo, hi = self._min_time, self._max_time
        for _, record, t in rows:
            last[record.partition] = record
            if lo is None or t < lo:
                lo = t
            if hi is None or t > hi:
                hi = t
        self._min_time, self._max_time = lo, hi
        for record in last.values():  # only the newest record per partition is the watermark's tail
            self._state.note(record.partition, record.offset, fingerprint(record.key, record.value))
        self._stats.records_archived += len(rows)

    def _ensure_open(self) -> None:
        if self._writer is not None:
            return
        seq = self._next_seq
        self._next_seq += 1
        path = self._directory / open_name(seq)
        fo = path.open("wb")
        sync_marker = os.urandom(16)
        try:
            # fastavro writes the header (schema, codec, metadata, sync marker); the blocks are ours.
            writer = Writer(
                fo,
                history_schema(),
                codec=self._codec,
                sync_interval=64 * 1024,
                metadata={
                    "log": self._identity,
                    "epoch": str(self._state.epoch),
                    "seq": str(seq),
                    FORMAT_KEY: str(HISTORY_FORMAT),
                },
                sync_marker=sync_marker,
            )
            fo.flush()
        except BaseException:
            with contextlib.suppress(OSError):
                fo.close()
            with contextlib.suppress(OSError):  # no record in it; left, a query would warn about its header
                path.unlink()
            raise
        self._fo, self._writer, self._seq, self._sync_marker = fo, writer, seq, sync_marker
        self._flushed_size = fo.tell()
        self._min_time = self._max_time = None
        self._opened_at = time.monotonic()
        fsync_dir(self._directory)

    # ------------------------------------------------------------------ policies

    def fsync_if_due(self) -> None:
        """fsync written data once ``fsync_interval_s`` passed since the last one."""
        if self._fo is None or not self._dirty:
            return
        now = time.monotonic()
        if now - self._last_fsync >= self._fsync_interval_s:
            try:
                os.fsync(self._fo.fileno())
            except OSError as exc:
                self._stats.write_error(f"fsync: {exc}")
                log.error("history: fsync of %s failed: %s", self._directory, exc)
                return
            self._last_fsync = now
            self._dirty = False

    def rotation_due(self) -> bool:
        """The open file reached ``rotate_bytes`` or ``rotate_interval_s``."""
        if self._fo is None:
            return False
        too_big = self._flushed_size >= self._rotate_bytes
        too_old = self._rotate_interval_s is not None and time.monotonic() - self._opened_at >= self._rotate_interval_s
        return too_big or too_old

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Finish the open file, if any: flush, fsync, rename to its closed name, save the state."""
        if self._fo is None:
            return
        fo, seq = self._fo, self._seq
        try:
            self._writer.flush()
            self._flushed_size = fo.tell()
            os.fsync(fo.fileno())
        except OSError as exc:
            self._stats.write_error(f"{type(exc).__name__}: {exc}")
            log.error("history: closing %s failed (%s); cutting it back to its last good block", fo.name, exc)
            self._abandon()
            return
        fo.close()
        self._finish(seq)

    def _finish(self, seq: int) -> None:
        """Rename the just-closed file (or delete it when it holds no record) and save the state."""
        path = self._directory / open_name(seq)
        with self._files_lock:
            if self._min_time is None or self._max_time is None:
                path.unlink(missing_ok=True)
            else:
                path.rename(self._directory / closed_name(seq, self._min_time, self._max_time))
                self._stats.files_closed += 1
            fsync_dir(self._directory)
        self._fo = self._writer = None
        self._seq = -1
        self._state.closed_through_seq = max(self._state.closed_through_seq, seq)
        save_state(self._directory, self._state)

    def _abandon(self) -> None:
        """After a failed write: cut the file back to its last flushed block and close it."""
        fo, seq = self._fo, self._seq
        if fo is None:
            return
        with contextlib.suppress(OSError):
            fo.close()  # may try to flush a half block; the truncate below removes it
        try:
            with self._files_lock:
                os.truncate(self._directory / open_name(seq), self._flushed_size)
            self._finish(seq)
        except OSError as exc:
            log.error("history: could not cut back %s (%s); it is recovered at the next start", fo.name, exc)
            self._fo = self._writer = None
            self._seq = -1
