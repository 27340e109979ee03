"""The history archive of one log: every record the view applies, appended to rotated Avro files.

This module only wires the parts and keeps the archive's public face (what the daemon's wiring,
the history routes and the queries use); each job lives in its own module:

- ``directory.py``: the directory, its marker and the writer's lock (a second daemon on the same
  log and history directory opens it read-only: it answers queries but archives nothing);
- ``adoption.py``: the directory is named after the log's ``archive_identity``, and one an earlier
  version named after the log's ``description`` is renamed to that name at open;
- ``recovery.py``: at open, files left open by a crash are cut back and the watermark rebuilt;
- ``batch_queue.py``: the view's listener puts batches on a queue bounded by record count; when it
  is full the log's reader waits (backpressure), it never drops, unless the archiver is stalled on
  a write it keeps retrying (then the queue lets batches go, and the archiver reads them back from
  the log once it can write: the readers never wait for a disk);
- ``archiver.py``: the one thread that owns the files: replay decisions, rows, epochs;
- ``writer.py``: the file being written, its fsync policy and rotation; ``retention.py``: folding
  old files into a base file.

Threading. ``listener`` runs on the log's reader thread and only enqueues. The event loop is never
involved, except through ``sync`` and the queries, which API handlers call via
``asyncio.to_thread``.

Durability and failures are described in ``writer.py`` and ``archiver.py``: ``kill -9`` loses at
most what was queued and the batch being written, and nothing is lost for good while the log still
holds the records, because the next start archives from the watermark the files really hold.
"""

from __future__ import annotations

import errno
import io
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from emulator.history.adoption import adopt
from emulator.history.archiver import DEFAULT_RETRY_MAX_S, Archiver, Reread
from emulator.history.batch_queue import DEFAULT_QUEUE_RECORDS, ArchiveQueue
from emulator.history.coverage import ArchiveCoverage
from emulator.history.directory import HistoryError, WriterLock, log_slug, written_by_a_live_process
from emulator.history.files import ArchiveFile, read_metadata, scan_dir
from emulator.history.origins import OriginRegistry
from emulator.history.pacing import DEFAULT_YIELD_S
from emulator.history.recovery import Recovered, recover
from emulator.history.retention import DEFAULT_RETENTION_S, Retention
from emulator.history.schema import HISTORY_FORMAT, newer_format
from emulator.history.state import ArchiveState
from emulator.history.stats import ArchiveStats
from emulator.history.writer import DEFAULT_ROTATE_BYTES, DEFAULT_ROTATE_INTERVAL_S, CurrentFile
from emulator.logs.base import ReadProgress
from emulator.model.records import LogRecord
from emulator.model.times import format_time_ms

__all__ = ["ArchiveStats", "HistoryArchive", "HistoryError"]

log = logging.getLogger(__name__)

_STORAGE_REFUSALS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})
"""Why a disk refuses writes for now (full, over quota, failing, mounted read-only), as opposed to a
directory the daemon may not use at all (permissions, not a directory), which stops the start."""

OWN_WRITES_WAIT_S = 5.0
"""How long a history query waits for the log's reader to deliver this daemon's own latest writes.
It is behind only for moments, unless the broker went away between acknowledging a write and
serving it to the reader: then the query answers from the archive with a warning instead of
waiting out the broker."""
TAKEOVER_POLL_S = 1.0
"""How often a read-only archive tries the writer's lock: at most this long after its writer stopped
(or died) does this process take the archive over."""

WRITER_GONE = (
    "no process writes the archive now: the daemon that did (this one opened it read-only at its start, "
    "because that one held the writer's lock) has stopped, and this one cannot take it over while it runs; "
    "restart this daemon to take it over (its start archives what the log holds and the archive lacks)"
)
"""Why a read-only archive without a log to read back from (no daemon's) lags once its writer is gone."""
WRITER_GONE_TAKING_OVER = (
    "no process writes the archive now: the daemon that did has stopped; this daemon takes the archive over "
    f"within {TAKEOVER_POLL_S:g} s and then archives from the log what it lacks"
)
"""Why a daemon's read-only archive lags in the moment between its writer's end and the takeover."""


_ELSEWHERE_POLL_S = 0.05
"""How often a read-only archive's files are looked at while waiting for another process to archive
this one's writes (it archives them as its reader delivers them: usually within a poll or two)."""


class HistoryArchive:
    """One log's archive under ``root``: opened once, fed by the view, closed at shutdown.

    ``log_identity`` is the log's ``description``, written in every row and file; ``archive_identity``
    (the log's ``archive_identity``; by default the description) names the directory and its state,
    so that the archive stays the same when the description changes (a moved data directory).
    """

    def __init__(
        self,
        root: str | Path,
        log_identity: str,
        *,
        archive_identity: str | None = None,
        origins: OriginRegistry | None = None,
        progress: Callable[[], ReadProgress] | None = None,
        read_own_writes: Callable[[float], bool] | None = None,
        own_write_ends: Callable[[], dict[int, int]] | None = None,
        reread: Reread | None = None,
        retention_s: float | None = DEFAULT_RETENTION_S,
        rotate_bytes: int = DEFAULT_ROTATE_BYTES,
        rotate_interval_s: float | None = DEFAULT_ROTATE_INTERVAL_S,
        queue_records: int = DEFAULT_QUEUE_RECORDS,
        codec: str = "deflate",
        fsync_interval_s: float = 1.0,
        hold_limit: int = 200_000,
        tick_s: float = 0.5,
        yield_s: float = DEFAULT_YIELD_S,
        retry_max_s: float = DEFAULT_RETRY_MAX_S,
    ) -> None:
        self.root = Path(root)
        self.identity = log_identity
        self.archive_identity = log_identity if archive_identity is None else archive_identity
        self.directory = self.root / log_slug(self.archive_identity)
        self._adopted = False
        self._earlier_versions = False
        """The directory is one an earlier version named and still writes, served where it is: not
        taken over while running (a start renames it first)."""
        self.origins = origins or OriginRegistry()
        self.retention_s = retention_s
        self.rotate_bytes = rotate_bytes
        self.rotate_interval_s = rotate_interval_s
        self.stats = ArchiveStats()
        self.writable = False
        self.read_only = False
        """Another live process writes this directory; queries here read its files."""
        self._progress = progress
        self._read_own_writes = read_own_writes
        self._own_write_ends = own_write_ends
        self._coverage = ArchiveCoverage(self.directory)
        self._reread = reread
        self._codec = codec
        self._fsync_interval_s = fsync_interval_s
        self._hold_limit = hold_limit
        self._tick_s = tick_s
        self._yield_s = yield_s
        self._retry_max_s = retry_max_s
        self._queue = ArchiveQueue(self.stats, queue_records, rereadable=reread is not None)
        self._lock = WriterLock(self.directory, self.archive_identity, log_identity)
        self._files_lock = threading.Lock()  # held while files are renamed, cut or deleted
        self._state = ArchiveState(self.archive_identity)
        self._file: CurrentFile | None = None
        self._thread: threading.Thread | None = None
        self._opener: threading.Thread | None = None  # while the disk refused the opening (``_defer``)
        self._opened = False
        self._formats: dict[tuple[str, int, int], int | None] = {}
        """Each file's ``newer_format`` as ``_newer_format_files`` last read it."""

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Recover the directory after a crash, load the watermark, start the archiver thread.

        Raises ``HistoryError`` when the directory cannot be used at all. A directory written by
        another live process is opened read-only (queries work, nothing is archived here). A disk
        that refuses writes (full, read-only, failing) defers the opening instead (``_defer``).
        """
        if self._opened:
            return
        try:
            acquired = self._take_directory()
        except HistoryError as exc:
            if not self._may_defer(exc):
                raise
            self._defer(exc)
            return
        if not acquired:
            self._opened = True
            self.read_only = True
            log.warning(
                "history archive %s is being written by another process; this daemon serves history "
                "read-only and archives nothing itself%s",
                self.directory,
                "" if not self.takes_over else "; it takes the archive over if that process stops",
            )
            if self.takes_over:
                self._opener = threading.Thread(target=self._take_over_when_free, name="history-takeover", daemon=True)
                self._opener.start()
            return
        try:
            recovered = self._recover()
        except HistoryError as exc:
            if not self._may_defer(exc):
                self._lock.release()
                raise
            self._defer(exc)
            return
        self._begin(recovered)

    def _take_directory(self) -> bool:
        """Settle which directory is the archive's (``adoption.adopt``, once) and try to become its
        writer: ``WriterLock.acquire``'s answer."""
        if not self._adopted:
            try:
                location = adopt(self.root, self.archive_identity, self.identity)
            except OSError as exc:
                raise HistoryError(f"history directory {self.directory} cannot be used: {exc}") from exc
            self._adopted = True
            if location.directory != self.directory:  # an earlier version's, left where it is
                self._earlier_versions = True
                self.archive_identity = location.identity
                self.directory = location.directory
                self._coverage = ArchiveCoverage(self.directory)
                self._lock = WriterLock(self.directory, self.archive_identity, self.identity, create=False)
                self._state = ArchiveState(self.archive_identity)
        return self._lock.acquire()

    def _recover(self) -> Recovered:
        try:
            return recover(self.directory, self.archive_identity)
        except HistoryError:
            raise
        except (OSError, ValueError) as exc:
            raise HistoryError(f"history archive {self.directory} cannot be recovered: {exc}") from exc

    def _may_defer(self, exc: HistoryError) -> bool:
        """A disk that refuses writes for now, and a log to read back from once it takes them."""
        cause = exc.__cause__
        return self._reread is not None and isinstance(cause, OSError) and cause.errno in _STORAGE_REFUSALS

    def _begin(self, recovered: Recovered) -> None:
        self.stats.recovered.extend(recovered.problems)
        self._state = recovered.state
        self._start(recovered.next_seq)
        log.info(
            "history archive %s: epoch %d, watermark over %d partitions (%d records below it)",
            self.directory,
            self._state.epoch,
            len(self._state.next_offsets),
            sum(self._state.next_offsets.values()),
        )

    def _defer(self, exc: HistoryError) -> None:
        """The archive cannot be opened because its disk refuses writes: the daemon starts all the
        same, as it goes on when that disk fills later, since offsets matter more than their history.
        What the log's reader delivers meanwhile is let go as offset ranges (the queue's gap), and
        a thread opens the archive once the disk takes writes; the archiver then reads those ranges
        back from the log, which the replay guard sorts into archived and new as at any start."""
        log.error(
            "%s; offsets are served as usual, and the archive is opened once its disk takes writes, reading "
            "back from the log then what the daemon read meanwhile",
            exc,
        )
        self._queue.defer(f"the archive could not be opened: {exc}")
        self.writable = True
        self._opened = True
        self.origins.enable()
        self._opener = threading.Thread(target=self._open_when_possible, name="history-opener", daemon=True)
        self._opener.start()

    def _open_when_possible(self) -> None:
        delay = min(1.0, self._retry_max_s)
        while self._queue.retry_wait(delay):
            delay = min(delay * 2, self._retry_max_s)
            try:
                if not self._lock.held and not self._take_directory():
                    self.writable = False
                    self._queue.fail("another process became the archive's writer meanwhile; this one reads it only")
                    return
                with self._files_lock:  # queries read the files meanwhile; recovery cuts and renames them
                    recovered = self._recover()
            except HistoryError as exc:
                if self._may_defer(exc):
                    self._queue.stall(f"the archive could not be opened: {exc}")
                    continue
                self._queue.fail(f"the archive could not be opened: {exc}")
                return
            self._begin(recovered)
            return
        self._queue.abandon_gap(count=False)
        self._queue.fail(
            "stopped before the archive could be opened; the next start archives from the log what it does not hold"
        )

    @property
    def takes_over(self) -> bool:
        """Whether a read-only archive is taken over once its writer stops. That needs a way to catch
        up on what it did not archive meanwhile (the log's read positions and a way to read the log
        again: a daemon's archive has both), and the directory this version names (an earlier
        version's is renamed at a start, never while another process may still use it)."""
        return self._progress is not None and self._reread is not None and not self._earlier_versions

    def _take_over_when_free(self) -> None:
        """While read-only: try the writer's lock every ``TAKEOVER_POLL_S``; once the writing process
        has stopped (or died: the kernel releases its ``flock``), take the archive over.

        Taking over is what a start does (recovery cuts back what a killed writer left half-written,
        under ``files_lock`` since queries read the files meanwhile) plus a catch-up: everything the
        log's reader delivered while this archive was read-only was dropped here, so the archiver
        reads it back from the log, from each partition's last archived record (its tail, which the
        replay guard checks as at any start) up to the reader's position, and queues batches again
        once it has. A failed attempt leaves the archive read-only, and is tried again (said once per
        reason, not once a second)."""
        said = ""
        while self._queue.retry_wait(TAKEOVER_POLL_S):
            try:
                if not self._lock.held and not self._take_directory():
                    continue
                with self._files_lock:
                    recovered = self._recover()
            except HistoryError as exc:
                self._lock.release()
                if str(exc) != said:
                    said = str(exc)
                    log.warning(
                        "history archive %s cannot be taken over yet (tried every %g s): %s",
                        self.directory,
                        TAKEOVER_POLL_S,
                        exc,
                    )
                continue
            self._take_over(recovered)
            return

    def _take_over(self, recovered: Recovered) -> None:
        assert self._progress is not None
        # First let every batch the reader delivers from now on widen a gap (so none is dropped), then
        # read its position: what it delivered before was dropped, and lies below that position.
        self._queue.catch_up()
        self.writable = True
        self.origins.enable()
        positions = self._progress().positions
        state = recovered.state
        missed: dict[int, tuple[int, int]] = {}
        for p, position in positions.items():
            tail = state.tails.get(p)
            start = tail[0] if tail is not None else state.next_offsets.get(p, 0)
            if position > start:
                missed[p] = (start, position)
        self._queue.widen_gap(missed)
        self.read_only = False
        log.warning(
            "history archive %s: the process that wrote it has stopped; this daemon took the archive over and "
            "archives from now on, reading back from the log what it did not archive while read-only "
            "(%d offsets over %d partitions)",
            self.directory,
            sum(stop - start for start, stop in missed.values()),
            len(missed),
        )
        self._begin(recovered)

    def _start(self, next_seq: int) -> None:
        self._file = CurrentFile(
            self.directory,
            self.identity,
            self._state,
            self.stats,
            self._files_lock,
            next_seq=next_seq,
            codec=self._codec,
            fsync_interval_s=self._fsync_interval_s,
            rotate_bytes=self.rotate_bytes,
            rotate_interval_s=self.rotate_interval_s,
        )
        retention = (
            Retention(self.directory, self.identity, self.retention_s, self.stats, self._files_lock, self._codec)
            if self.retention_s is not None
            else None
        )
        archiver = Archiver(
            self._queue,
            self._file,
            retention,
            self._state,
            self.stats,
            self.origins,
            identity=self.identity,
            directory=self.directory,
            progress=self._progress,
            reread=self._reread,
            hold_limit=self._hold_limit,
            tick_s=self._tick_s,
            yield_s=self._yield_s,
            retry_max_s=self._retry_max_s,
        )
        self.writable = True
        self._opened = True
        self.origins.enable()
        self._thread = threading.Thread(target=archiver.run, name="history-archiver", daemon=True)
        self._queue.consumer = self._thread
        self._thread.start()

    def close(self, timeout_s: float = 60.0) -> None:
        """Archive what is queued, close the file (renamed, fsynced) and save the state. Idempotent."""
        if not self._queue.stop():
            return
        opener = self._opener
        if opener is not None:
            opener.join(timeout_s)
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                log.error(
                    "history archiver did not finish within %.0f s; the next start re-archives the rest", timeout_s
                )
        self._lock.release()

    # ------------------------------------------------------------------ the view's side

    def listener(self, records: Sequence[LogRecord]) -> None:
        """``OffsetView`` listener (reader thread): enqueue, waiting while the queue is full."""
        if not records or not self.writable:
            return
        self._queue.put(records)

    def kept_from(self, partition: int) -> int | None:
        """The first offset of ``partition`` the archiver still has to read back from the log: a log
        that compacts itself keeps it (``OffsetLog.keep_records``)."""
        return self._queue.kept_from(partition)

    def sync(self, timeout_s: float = 30.0) -> bool:
        """Wait until every record this process wrote to the log is archived, written and flushed.

        Makes history read-your-writes: a PATCH answers once the view applied its records
        (write-through), but they reach ``listener`` only when the log's reader delivers them, so
        first the reader must pass this process's own writes (``read_own_writes``, a local wait),
        then the queue must drain. False on timeout or failure.

        A read-only archive (another process writes it) holds this process's writes once that
        process's reader delivered them: wait (at most ``OWN_WRITES_WAIT_S``) until its files do.
        """
        if self.read_only:
            return self._archived_elsewhere(min(timeout_s, OWN_WRITES_WAIT_S))
        if not self.writable:
            return False
        deadline = time.monotonic() + timeout_s
        if self._read_own_writes is not None and not self._read_own_writes(min(timeout_s, OWN_WRITES_WAIT_S)):
            return False
        return self._queue.wait_done(max(deadline - time.monotonic(), 0.0))

    def _archived_elsewhere(self, timeout_s: float) -> bool:
        ends = self._own_write_ends() if self._own_write_ends is not None else {}
        deadline = time.monotonic() + timeout_s
        while ends and not self._coverage.holds(ends):
            if time.monotonic() >= deadline:
                return False
            time.sleep(_ELSEWHERE_POLL_S)
        return True

    # ------------------------------------------------------------------ queries' side

    def behind_because(self) -> str | None:
        """Why the archive cannot catch up now, for a query's warning; None when it is only slow. The
        failure itself names server paths, so it is left to ``/history/status`` (admin only)."""
        if self.read_only:
            if not written_by_a_live_process(self.directory):
                return WRITER_GONE_TAKING_OVER if self.takes_over else WRITER_GONE
            return (
                "another daemon on this log and data directory writes the archive (this one reads it "
                f"read-only), and it did not archive this daemon's latest writes within {OWN_WRITES_WAIT_S:g} s"
            )
        queue = self._queue.state()
        if queue.failure is None:
            if queue.gap_offsets:
                return (
                    "the archiver is reading back from the log what it let go while it could not write "
                    f"({queue.gap_offsets} offsets to go)"
                )
            return None
        if queue.stalled_s is not None:
            return f"the archiver cannot write for {queue.stalled_s:.0f} s and retries (why: GET /history/status)"
        return "archiving stopped (why: GET /history/status); a restart archives the rest from the log"

    def warnings(self) -> list[str]:
        """What an operator must know although the daemon serves: that no process archives the log any
        more (a read-only archive whose writer stopped: ``WRITER_GONE``, or for the moment before the
        takeover ``WRITER_GONE_TAKING_OVER``), each file of the archive a newer version wrote (none of
        its records are read), and each epoch this process started because the log no longer holds
        records the archive holds (acknowledged writes lost, or the log re-created or restored), and
        where the earlier values are. Names no server path (a file only by its name)."""
        found = []
        if self.read_only and not written_by_a_live_process(self.directory):
            found.append(WRITER_GONE_TAKING_OVER if self.takes_over else WRITER_GONE)
        for name, newer in self._newer_format_files():
            shown = "an unknown format" if newer < 0 else f"history format {newer}"
            found.append(
                f"history archive file {name} was written by a newer version of connect-offsets ({shown}; this "
                f"version reads up to {HISTORY_FORMAT}): none of its records are read, so history pages, as_of "
                "answers and rollbacks lack them and name the file (damaged_files, X-Offsets-History-Damaged-Files, "
                "a 404's message); run that version again to read them"
            )
        for begun in self.stats.epochs_begun:
            epoch, before = begun["epoch"], begun["epoch"] - 1
            at = format_time_ms(begun["detected_at_ms"])
            lost: dict[int, int] = begun["lost"]
            if lost:
                what = (
                    f"the offsets log lost {sum(lost.values())} record(s) it had acknowledged and the history "
                    f"archive holds, on partition(s) {', '.join(str(p) for p in sorted(lost))} (found at {at}; "
                    "a truncated -wal file of the embedded log, or the log re-created or restored from an older copy)"
                )
            else:
                what = f"the offsets log is not the one archived before (found at {at}: {begun['reason']})"
            found.append(
                f"{what}. The daemon serves the log as it is now; the history archive started epoch {epoch}, and "
                f"the values from before are in history epoch {before}: `connect-offsets history NAME --as-of now "
                f"--epoch {before}` (GET /connectors/NAME/offsets?as_of=now&epoch={before}) shows them, "
                f"`connect-offsets rollback NAME --to now --epoch {before} --dry-run` what writing them back would do"
            )
        return found

    def _newer_format_files(self) -> list[tuple[str, int]]:
        """The archive's files of a newer format than this version reads, by name, with that format
        (-1: not a number). A file's header is read once: it is known by name, inode and mtime."""
        known = self._formats
        seen: dict[tuple[str, int, int], int | None] = {}
        found = []
        base, live, _ = scan_dir(self.directory)
        for f in ([base] if base else []) + live:
            try:
                st = f.path.stat()
            except OSError:
                continue  # renamed or folded meanwhile
            at = (f.path.name, st.st_ino, st.st_mtime_ns)
            newer = known[at] if at in known else newer_format(read_metadata(f.path))
            seen[at] = newer
            if newer is not None:
                found.append((f.path.name, newer))
        self._formats = seen
        return found

    def status(self) -> dict[str, Any]:
        """The archiver's health and counters (``GET /history/status``)."""
        queue = self._queue.state()
        s = self.stats
        if queue.stalled_s is not None:
            mode = "stalled"
        elif queue.failure is not None:
            mode = "failed"
        elif queue.gap_offsets:
            mode = "reading-back"
        else:
            mode = "writing" if self.writable else "read-only"
        return {
            "directory": str(self.directory),
            "log": self.identity,
            "mode": mode,
            "writer_gone": self.read_only and not written_by_a_live_process(self.directory),
            "failure": queue.failure,
            "stalled_s": None if queue.stalled_s is None else round(queue.stalled_s, 1),
            "epoch": self._state.epoch,
            "queued_records": queue.queued_records,
            "records_archived": s.records_archived,
            "records_skipped_replay": s.records_skipped_replay,
            "records_not_archived": s.records_not_archived,
            "records_let_go": s.records_let_go,
            "records_read_back": s.records_reread,
            "offsets_to_read_back": queue.gap_offsets,
            "write_errors": s.write_errors,
            "last_error": s.last_error,
            "files_closed": s.files_closed,
            "files_folded_by_retention": s.files_folded,
            "epochs_started": s.epochs_started,
            "held_records_dropped": s.held_dropped,
            "backpressure_waits": s.backpressure_waits,
            "backpressure_s": round(s.backpressure_s, 3),
            "yielded_to_requests_s": round(s.yielded_s, 3),
            "recovered_files": list(s.recovered),
            "warnings": self.warnings(),
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
                    size = self._file.readable_size(f.seq) if f.kind == "open" and self._file else None
                    if size is not None:
                        with f.path.open("rb") as raw:
                            opened.append((f, io.BytesIO(raw.read(size))))
                    else:
                        opened.append((f, f.path.open("rb")))
                except OSError as exc:
                    log.warning("history file %s could not be opened: %s", f.path, exc)
                    opened.append((f, io.BytesIO(b"")))
        return opened
