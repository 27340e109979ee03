"""The archiver thread: batches from the queue → replay decisions → rows → the current file.

One thread owns every file, the watermark and the epoch, so none of them needs a lock against
another writer; queries only take ``files_lock`` while they open files. Per batch: the replay
guard decides each record (archive, skip as already archived, or start a new epoch because the
log was re-created), the row maker stamps the kept ones with origin and parsed key, and the
current file writes them as Avro blocks before the batch counts as done. Between batches (every
``tick_s`` while idle) it fsyncs, rotates, applies retention and asks the guard whether a log that
was read to its end is shorter than the archive.

Requests first. While requests are being answered the archiver pauses between slices of a batch
(``pacing.py``: encoding holds the interpreter lock, and a request would wait for it).

Failures. A batch that cannot be written after the file writer's quick retries stalls the
archiver: it keeps the batch and tries it again, waiting longer each time (up to
``retry_max_s``), while the queue takes what the reader delivers meanwhile. A disk that comes back
(space freed, a mount restored) therefore costs nothing. When the queue would overfill meanwhile
(the reader never waits for a stalled archiver), it lets batches go as a gap of offsets instead
(``batch_queue.py``); once the batch in hand is written, the archiver reads the gap back from the
log (``reread``), chasing it while the reader widens it, until the queue can take batches again.
So a long outage costs a read of the log, not a restart. The stall ends archiving for good only
when the daemon stops, or without a log to read back from: then the queue fails (logged, in
``status()``), every record from then on is counted as not archived, and the run never resumes
with a hole, so the next start re-archives from the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from emulator.history.avro_rows import RowEncoder
from emulator.history.batch_queue import ArchiveQueue, Batch, Signal
from emulator.history.guard import Decision, ReplayGuard, Verdict
from emulator.history.origins import OriginRegistry
from emulator.history.pacing import DEFAULT_YIELD_S, Pacer
from emulator.history.retention import Retention
from emulator.history.state import ArchiveState, save_state
from emulator.history.stats import ArchiveStats
from emulator.history.writer import CurrentFile, EncodedRow, WriteFailed
from emulator.logs.base import ReadProgress
from emulator.model.errors import OffsetsError
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)

Rows = list[EncodedRow]

Reread = Callable[[Mapping[int, tuple[int, int]], float], Iterator[list[LogRecord]]]
"""``OffsetLog.reread``: the records of offset ranges per partition, read from the log again."""

REREAD_TIMEOUT_S = 30.0
"""How long reading the gap back may go without progress before it is retried (a broker away)."""

DEFAULT_RETRY_MAX_S = 15.0
"""The longest wait between two attempts at a batch while the archiver is stalled: how long a
recovered disk may go unnoticed."""


class _Stopped(Exception):
    """Raised inside the archiver thread once archiving has failed for good."""


class Archiver:
    """The body of the ``history-archiver`` thread (``run``)."""

    def __init__(
        self,
        queue: ArchiveQueue,
        file: CurrentFile,
        retention: Retention | None,
        state: ArchiveState,
        stats: ArchiveStats,
        origins: OriginRegistry,
        *,
        identity: str,
        directory: Path,
        progress: Callable[[], ReadProgress] | None = None,
        reread: Reread | None = None,
        hold_limit: int = 200_000,
        tick_s: float = 0.5,
        yield_s: float = DEFAULT_YIELD_S,
        retry_max_s: float = DEFAULT_RETRY_MAX_S,
    ) -> None:
        self._queue = queue
        self._file = file
        self._retention = retention
        self._state = state
        self._stats = stats
        self._origins = origins
        self._identity = identity
        self._directory = directory
        self._progress = progress
        self._reread = reread
        self._tick_s = tick_s
        self._retry_max_s = retry_max_s
        self._guard = ReplayGuard(state, hold_limit)
        self._rows = RowEncoder(identity, origins)
        self._pacer = Pacer(queue, stats, yield_s)

    def run(self) -> None:
        """Take batches until ``STOP``, then close the open file; a failure ends the thread."""
        try:
            while True:
                item = self._queue.take(self._tick_s)
                if item is Signal.STOP:
                    break
                if item is Signal.IDLE:
                    self._idle()
                else:
                    assert isinstance(item, Batch)
                    self._process(item)
                    self._queue.done(item)
                    self._file.fsync_if_due()
                    self._rotate_if_due()
                if self._reread is not None:  # a write that stalled, batch or new epoch, may have left a gap
                    self._catch_up(self._reread)
            self._file.close()
        except _Stopped:
            pass
        except BaseException as exc:
            log.exception("history archiver crashed")
            self._queue.fail(f"archiver crashed: {exc!r}")

    # ------------------------------------------------------------------ batches

    def _process(self, batch: Batch) -> None:
        guard = self._guard
        rows: Rows = []
        append = rows.append
        encode = self._rows.encode
        received_ms = batch.received_ms
        epoch = self._state.epoch
        tick = self._pacer.tick
        self._pacer.begin(batch)
        for record in batch.records:
            tick()
            decision = guard.decide(record)
            if guard.released:  # held while a check was open, which has passed: before this record
                for held in guard.take_released():
                    ts = held.timestamp_ms
                    append((encode(held, epoch, received_ms), held, ts if ts >= 0 else received_ms))
            if decision.verdict is Verdict.SKIP:
                self._origins.forget(record)
                continue
            if decision.verdict is Verdict.HOLD:
                continue
            if decision.verdict is Verdict.NEW_EPOCH:
                self._write(rows)
                rows = self._start_epoch(decision, received_ms)
                append = rows.append
                epoch = self._state.epoch
                decision = guard.decide(record)
                assert decision.verdict is Verdict.ARCHIVE
            ts = record.timestamp_ms
            append((encode(record, epoch, received_ms), record, ts if ts >= 0 else received_ms))
        self._stats.records_skipped_replay = guard.skipped
        self._write(rows)
        self._stats.batches += 1

    def _catch_up(self, reread: Reread) -> None:
        """Read back and archive what the queue let go while the archive could not be written, until
        the queue takes batches again (``ArchiveQueue.close_gap``).

        ``next_offsets`` remembers how far each partition was read back, so a retry after the log
        failed to read never hands the replay guard a record twice (it would take that for a
        re-created log)."""
        delay = min(1.0, self._retry_max_s)
        next_offsets: dict[int, int] = {}
        while (gap := self._queue.gap()) is not None:
            todo = {p: (max(start, next_offsets.get(p, start)), stop) for p, (start, stop) in gap.items()}
            try:
                for records in reread(todo, REREAD_TIMEOUT_S):
                    if self._queue.stopping:  # a stop is prompt: the next start archives the rest from the log
                        self._queue.abandon_gap()
                        return
                    self._queue.reread(len(records))
                    self._stats.records_reread += len(records)
                    self._process(Batch(records, time.time_ns() // 1_000_000, 0, time.monotonic()))
                    for record in records:
                        next_offsets[record.partition] = record.offset + 1
            except OffsetsError as exc:
                self._queue.stall(f"the log could not be read again to archive what was let go: {exc}")
                if not self._queue.retry_wait(delay):
                    self._queue.fail(f"stopped while reading the log again: {exc}")
                    raise _Stopped from exc
                delay = min(delay * 2, self._retry_max_s)
                continue
            if not self._queue.resume():
                raise _Stopped
            self._queue.close_gap(gap)

    def _write(self, rows: Rows) -> None:
        try:
            self._file.write(rows)
            return
        except WriteFailed as exc:
            reason = str(exc)
        self._queue.stall(reason)
        delay = min(1.0, self._retry_max_s)
        while self._queue.retry_wait(delay):
            try:
                self._file.write(rows, attempts=1)
            except WriteFailed as exc:
                reason = str(exc)
                self._queue.stall(reason)
                delay = min(delay * 2, self._retry_max_s)
                continue
            if self._queue.resume():
                return
            raise _Stopped  # the queue overflowed while this batch was retried: written, but the run ends
        self._queue.fail(f"{reason}; stopped while retrying", lost=len(rows))
        raise _Stopped

    def _start_epoch(self, decision: Decision, received_ms: int) -> Rows:
        """The log was re-created: close the file, begin a new epoch, and (when the guard held back
        records of the new log while it was still checking) archive those first."""
        guard = self._guard
        held = guard.take_held()
        if not decision.archive_held:  # the old log's: its records above the watermark end its epoch
            self._write([self._row(record, received_ms) for record, fresh in held if fresh])
        self._file.close()
        self._state.new_epoch(decision.reason)
        guard.reset_for_epoch()
        save_state(self._directory, self._state)
        self._stats.epochs_started += 1
        self._stats.epochs_begun.append(
            {
                "epoch": self._state.epoch,
                "detected_at_ms": time.time_ns() // 1_000_000,
                "reason": decision.reason,
                "lost": dict(decision.lost),
            }
        )
        lost = guard.held_dropped if decision.archive_held else 0
        self._stats.held_dropped += lost
        before = self._state.epoch - 1
        log.error(
            "history: %s. Starting epoch %d for %s; the earlier epochs stay in the archive%s. Records the archive "
            "holds that the log lacks are in epoch %d, not in the log: `connect-offsets history NAME --json` lists "
            'them (their "epoch"), `connect-offsets history NAME --as-of now --epoch %d` (GET '
            "/connectors/NAME/offsets?as_of=now&epoch=%d) shows the offsets as epoch %d left them, and "
            "`connect-offsets rollback NAME --to now --epoch %d` writes those back (try --dry-run first; "
            "docs/history.md, Epochs)",
            decision.reason,
            self._state.epoch,
            self._identity,
            (
                f"; {lost} records of the new log were delivered before this was detected and exceeded the "
                "hold-back buffer, so they are NOT archived"
                if lost
                else ""
            ),
            before,
            before,
            before,
            before,
            before,
        )
        if not decision.archive_held:
            return []
        rows: Rows = []
        for record, _ in held:
            guard.delivered(record)
            rows.append(self._row(record, received_ms))
        return rows

    def _row(self, record: LogRecord, received_ms: int) -> EncodedRow:
        ts = record.timestamp_ms
        return (self._rows.encode(record, self._state.epoch, received_ms), record, ts if ts >= 0 else received_ms)

    # ------------------------------------------------------------------ between batches

    def _idle(self) -> None:
        self._file.fsync_if_due()
        self._rotate_if_due()
        self._check_positions()
        if self._retention is not None:
            self._retention.apply_if_due()

    def _rotate_if_due(self) -> None:
        if self._file.rotation_due():
            self._file.close()
            if self._retention is not None:
                self._retention.apply()

    def _check_positions(self) -> None:
        guard = self._guard
        if not guard.verifying or self._progress is None:
            return
        progress = self._progress()  # first the positions, then "nothing queued": see ReplayGuard
        if not self._queue.empty():
            return
        decision = guard.check_positions(progress.positions, progress.caught_up and progress.error is None)
        if decision.verdict is Verdict.NEW_EPOCH:
            self._write(self._start_epoch(decision, time.time_ns() // 1_000_000))
