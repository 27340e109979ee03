"""Replay de-duplication, and noticing that the log under the archive is not the one it archived.

Every start replays the whole log, so every record arrives again; the watermark says which ones the
archive already holds. Skipping by offset alone would be wrong after the topic was deleted and
re-created under the same name: offsets start again at 0 and the new records would be skipped as
"already archived" — silent loss. So a skip is only trusted once the partition's *tail check* passed
(the record at ``watermark - 1`` came back with the same bytes), and until every partition passed,
skipped records are held back (bounded) so that a failed check can still archive them.

Records *above* the watermark are held back too while any partition's check is open: a log
re-created while the daemon was down delivers its new records at once, in partitions the archive
never held (nothing to check there), while the partitions that would reveal it are still being
read; archived at once, those records would land in the old epoch, and a past state read from it
would mix the wiped offsets back in. Once every check passed they are archived (``take_released``,
in delivery order), in a new epoch otherwise. If the hold-back buffer fills, they are archived as
they come (a warning says the check could not hold them).

A new epoch is declared when:
- the record at ``watermark - 1`` comes back with other bytes;
- the log, read to its end, stops short of the watermark (fewer records than archived);
- offsets go backwards within one run (a topic re-created while we were tailing it).
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from emulator.history.state import ArchiveState, fingerprint
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)


class Verdict(Enum):
    ARCHIVE = "archive"
    SKIP = "skip"
    HOLD = "hold"
    """Not archived yet: a record above the watermark while a check is open (``take_released``)."""
    NEW_EPOCH = "new-epoch"


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    reason: str = ""
    archive_held: bool = False
    """For a new epoch: whether the held-back records belong to the new log (a failed tail check or a
    short log: they were delivered by it) or to the old one (offsets went back: they came before)."""
    lost: dict[int, int] = field(default_factory=dict)
    """For a short log: per partition, how many offsets the archive holds that the log no longer has."""


_ARCHIVE = Decision(Verdict.ARCHIVE)
_SKIP = Decision(Verdict.SKIP)
_HOLD = Decision(Verdict.HOLD)


class ReplayGuard:
    """Per-record decisions for one archiver run; owned by the archiver thread (no locking)."""

    def __init__(self, state: ArchiveState, hold_limit: int = 200_000) -> None:
        self._state = state
        self._hold_limit = hold_limit
        self._last: dict[int, int] = {}
        self._pending: set[int] = set(state.tails)
        self._held: deque[tuple[int, LogRecord]] = deque()
        """Records skipped while a check is open, with their delivery number (archived in a new epoch
        if the check fails: the new log delivered them)."""
        self._fresh: deque[tuple[int, LogRecord]] = deque()
        """Records above the watermark held while a check is open, with their delivery number."""
        self._delivered = 0
        self._released: list[LogRecord] = []
        self.released = False
        """True when ``take_released`` has records to archive before the record just decided."""
        self._hold_fresh = True
        self.held_dropped = 0
        self.skipped = 0
        self.unverifiable: list[int] = []
        self.settle_s = 2.0
        self._suspect: tuple[tuple[int, int], float] | None = None

    @property
    def verifying(self) -> bool:
        """True while some partition's tail check is still open (skipped records are held)."""
        return bool(self._pending)

    def reset_for_epoch(self) -> None:
        """After a new epoch: nothing is archived in it yet, so nothing is skipped or held."""
        self._pending.clear()
        self._held.clear()
        self._fresh.clear()
        self._last.clear()
        self._released.clear()
        self.released = False

    def delivered(self, record: LogRecord) -> None:
        """Note a record archived without a decision (held records archived in a new epoch)."""
        if record.offset > self._last.get(record.partition, -1):
            self._last[record.partition] = record.offset

    def decide(self, record: LogRecord) -> Decision:
        p, o = record.partition, record.offset
        last = self._last.get(p)
        if last is not None and o <= last:
            return Decision(
                Verdict.NEW_EPOCH,
                f"offsets went back in partition {p} (offset {o} delivered after {last}): the log was re-created",
            )
        self._last[p] = o
        watermark = self._state.next_offsets.get(p, 0)
        if o >= watermark:
            if p in self._pending:
                # The tail record was not delivered (a gap: e.g. Kafka removed an old tombstone).
                # Nothing contradicts the archive, so trust it, but say we could not check.
                self._pending.discard(p)
                self.unverifiable.append(p)
                log.warning(
                    "history: partition %d skipped offset %d, the last one archived, so the log could not be "
                    "checked against the archive there; assuming it is the same log",
                    p,
                    watermark - 1,
                )
                self._release_if_verified()
            if self._pending and self._hold_fresh:
                return self._hold_fresh_record(record)
            return _ARCHIVE
        tail = self._state.tails.get(p)
        if tail is not None and o == tail[0] and p in self._pending:
            if fingerprint(record.key, record.value) != tail[1]:
                return Decision(
                    Verdict.NEW_EPOCH,
                    f"the record at partition {p} offset {o} differs from the archived one: the log was re-created, "
                    "or restored from an older copy that was written to since",
                    archive_held=True,
                )
            self._pending.discard(p)
            self._release_if_verified()
        self.skipped += 1
        if self._pending:
            self._delivered += 1
            self._held.append((self._delivered, record))
            if len(self._held) + len(self._fresh) > self._hold_limit:
                self._drop_oldest_skipped()
        return _SKIP

    def _hold_fresh_record(self, record: LogRecord) -> Decision:
        self._delivered += 1
        self._fresh.append((self._delivered, record))
        if len(self._held) + len(self._fresh) > self._hold_limit and not self._drop_oldest_skipped():
            # Only records to archive are held: archive them now, as before the check existed.
            self._hold_fresh = False
            self._release(reason="the hold-back buffer is full")
        return _HOLD

    def _drop_oldest_skipped(self) -> bool:
        """Make room by forgetting the oldest skipped record (lost only if the check then fails)."""
        if not self._held:
            return False
        self._held.popleft()
        self.held_dropped += 1
        return True

    def _release(self, reason: str | None = None) -> None:
        fresh = [record for _, record in self._fresh]
        self._fresh.clear()
        self._held.clear()
        if reason is not None and fresh:
            log.warning(
                "history: %d new records are archived before every partition was checked against the archive (%s); "
                "if the log turns out re-created, they are in the earlier epoch",
                len(fresh),
                reason,
            )
        if fresh:
            self._released.extend(fresh)
            self.released = True

    def take_released(self) -> list[LogRecord]:
        """Held records above the watermark to archive now (every check passed), in delivery order."""
        released, self._released = self._released, []
        self.released = False
        return released

    def check_positions(self, positions: dict[int, int], caught_up: bool, now: float | None = None) -> Decision:
        """Called when every delivered record was processed: a log read to its end that stops short
        of the watermark holds fewer records than the archive, so it is another log.

        "Short" must hold, with unchanged positions, for ``settle_s``: a broker that under-reports
        end offsets (Tansu after multi-record batches) makes a reader call itself caught up while
        records are still coming, and those would otherwise look like a shorter log.
        """
        if not caught_up or not self._pending:
            self._suspect = None
            return _ARCHIVE
        now = time.monotonic() if now is None else now
        for p in sorted(self._pending):
            tail_offset = self._state.tails[p][0]
            position = positions.get(p, 0)
            if position > tail_offset:
                continue
            seen = (p, position)
            if self._suspect is None or self._suspect[0] != seen:
                self._suspect = (seen, now)
                return _ARCHIVE
            if now - self._suspect[1] < self.settle_s:
                return _ARCHIVE
            lost = {
                q: self._state.tails[q][0] + 1 - positions.get(q, 0)
                for q in sorted(self._pending)
                if positions.get(q, 0) <= self._state.tails[q][0]
            }
            return Decision(Verdict.NEW_EPOCH, self._short_log_reason(positions), archive_held=True, lost=lost)
        self._suspect = None
        return _ARCHIVE

    def _short_log_reason(self, positions: dict[int, int]) -> str:
        """What a log read to its end short of the watermark means, partition by partition."""
        short = []
        for p in sorted(self._pending):
            tail_offset, position = self._state.tails[p][0], positions.get(p, 0)
            if position <= tail_offset:
                missing = tail_offset + 1 - position
                last = f"its last record is at offset {position - 1}" if position else "it holds no record"
                gone = f"offset {position}" if missing == 1 else f"offsets {position}-{tail_offset}"
                short.append(
                    f"partition {p}: the log ends before offset {position} ({last}), but the archive holds its "
                    f"records up to offset {tail_offset} inclusive ({gone}: {missing} offset(s) the log no longer has)"
                )
        return (
            "the log holds fewer records than the archive: "
            + "; ".join(short)
            + ". The log was re-created, or restored from an older copy, or its storage lost acknowledged writes "
            "(e.g. a truncated -wal file of the embedded log)"
        )

    def take_held(self) -> list[tuple[LogRecord, bool]]:
        """The records held while unverified, in delivery order, each with whether it lay above the
        watermark (to archive in a new epoch, or the fresh ones in the old one: ``Decision.archive_held``)."""
        skipped = ((n, record, False) for n, record in self._held)
        fresh = ((n, record, True) for n, record in self._fresh)
        held = [(record, is_fresh) for _, record, is_fresh in heapq.merge(skipped, fresh, key=lambda item: item[0])]
        self._held.clear()
        self._fresh.clear()
        return held

    def _release_if_verified(self) -> None:
        if not self._pending:
            self._release()
