"""Where this process's own appends end, per partition: the mark a reader must pass before state
derived from the reader (the history archive) includes every write this process acknowledged.

The view applies a write the moment the log acknowledges it, but the history archive is fed only
by the log's reader, which may deliver the same records moments later. A history query right after
a PATCH waits for the reader to pass this mark, a local wait: no broker round trip, unlike reading
the log to its end.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from emulator.model.records import Position


class OwnWrites:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ends: dict[int, int] = {}

    def note_ends(self, ends: Mapping[int, int]) -> None:
        """Partition → the offset after this process's latest acknowledged record there."""
        with self._lock:
            known = self._ends
            for partition, end in ends.items():
                if known.get(partition, 0) < end:
                    known[partition] = end

    def note(self, positions: Sequence[Position]) -> None:
        ends: dict[int, int] = {}
        for position in positions:
            if ends.get(position.partition, 0) <= position.offset:
                ends[position.partition] = position.offset + 1
        self.note_ends(ends)

    def ends(self) -> dict[int, int]:
        with self._lock:
            return dict(self._ends)
