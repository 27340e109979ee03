"""Replay de-duplication, and noticing that the log under the archive is not the one it archived.

Every start replays the whole log, so every record arrives again; the watermark says which ones the
archive already holds. Skipping by offset alone would be wrong after the topic was deleted and
re-created under the same name: offsets start again at 0 and the new records would be skipped as
"already archived" — silent loss. So a skip is only trusted once the partition's *tail check* passed
(the record at ``watermark - 1`` came back with the same bytes), and until every partition passed,
skipped records are held back (bounded) so that a failed check can still archive them.

A new epoch is declared when:
- the record at ``watermark - 1`` comes back with other bytes;
- the log, read to its end, stops short of the watermark (fewer records than archived);
- offsets go backwards within one run (a topic re-created while we were tailing it).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from enum import Enum

from emulator.history.state import ArchiveState, fingerprint
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)


class Verdict(Enum):
    ARCHIVE = "archive"
    SKIP = "skip"
    NEW_EPOCH = "new-epoch"


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    reason: str = ""
    archive_held: bool = False
    """For a new epoch: whether the held-back records belong to the new log (a failed tail check or a
    short log: they were delivered by it) or to the old one (offsets went back: they came before)."""


_ARCHIVE = Decision(Verdict.ARCHIVE)
_SKIP = Decision(Verdict.SKIP)


class ReplayGuard:
    """Per-record decisions for one archiver run; owned by the archiver thread (no locking)."""

    def __init__(self, state: ArchiveState, hold_limit: int = 200_000) -> None:
        self._state = state
        self._hold_limit = hold_limit
        self._last: dict[int, int] = {}
        self._pending: set[int] = set(state.tails)
        self._held: deque[LogRecord] = deque()
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
        self._last.clear()

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
            return _ARCHIVE
        tail = self._state.tails.get(p)
        if tail is not None and o == tail[0] and p in self._pending:
            if fingerprint(record.key, record.value) != tail[1]:
                return Decision(
                    Verdict.NEW_EPOCH,
                    f"the record at partition {p} offset {o} differs from the archived one: the log was re-created",
                    archive_held=True,
                )
            self._pending.discard(p)
            self._release_if_verified()
        self.skipped += 1
        if self._pending:
            self._held.append(record)
            if len(self._held) > self._hold_limit:
                self._held.popleft()
                self.held_dropped += 1
        return _SKIP

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
            return Decision(
                Verdict.NEW_EPOCH,
                f"partition {p} ends at offset {position} but the archive holds offsets up to {tail_offset}: "
                "the log was re-created",
                archive_held=True,
            )
        self._suspect = None
        return _ARCHIVE

    def take_held(self) -> list[LogRecord]:
        """The records skipped while unverified, in delivery order (to archive in a new epoch)."""
        held = list(self._held)
        self._held.clear()
        return held

    def _release_if_verified(self) -> None:
        if not self._pending:
            self._held.clear()
