"""Reordering detection for commits, as Hazelcast Jet's CDC sinks do it (``WriteCdcP``).

A commit may carry a sequence: a source descriptor (e.g. a Spark query run id, a binlog file) and
a number (e.g. a batch id, a binlog position). Per key (connector + logical partition):
- no previous sequence → accept;
- a different descriptor → accept: a new source is always newer, numbers are not compared;
- the same descriptor and a strictly greater number → accept;
- otherwise → drop, and report it. A late or replayed commit can never move an offset back.

The cache forgets keys not seen for ``expiry_s`` (Jet's ``jet.cdc.sink.sequence.cache.expiration
.seconds``), evicting lazily from the least recently seen end, so memory stays bounded by the
keys active within the window. Decisions are made in two steps, ``check`` then ``record``, so a
commit whose write fails leaves the cache as it was.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommitSequence:
    source: str
    number: int


@dataclass(frozen=True, slots=True)
class Verdict:
    accepted: bool
    previous: CommitSequence | None

    def reason(self, offered: CommitSequence) -> str:
        assert self.previous is not None
        return (
            f"stale sequence {offered.number} from source {offered.source!r}: "
            f"{self.previous.number} was already applied"
        )


class SequenceTracker:
    def __init__(self, expiry_s: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        if expiry_s <= 0:
            raise ValueError(f"sequence cache expiry must be positive, got {expiry_s}")
        self._expiry_s = expiry_s
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: OrderedDict[Hashable, tuple[CommitSequence, float]] = OrderedDict()
        self.dropped = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)

    def check(self, key: Hashable, offered: CommitSequence) -> Verdict:
        """Would ``offered`` be accepted for ``key``? Does not change the cache."""
        with self._lock:
            self._evict()
            held = self._seen.get(key)
        if held is None:
            return Verdict(True, None)
        previous = held[0]
        if previous.source != offered.source or previous.number < offered.number:
            return Verdict(True, previous)
        return Verdict(False, previous)

    def record(self, key: Hashable, applied: CommitSequence) -> None:
        """Remember ``applied`` as the latest sequence for ``key`` (after its write succeeded)."""
        with self._lock:
            self._seen.pop(key, None)
            self._seen[key] = (applied, self._clock())
            self._evict()

    def touch(self, key: Hashable) -> None:
        """A dropped commit still refreshes the key's age, as in Jet."""
        with self._lock:
            held = self._seen.pop(key, None)
            if held is not None:
                self._seen[key] = (held[0], self._clock())
            self.dropped += 1

    def _evict(self) -> None:
        horizon = self._clock() - self._expiry_s
        while self._seen:
            key, (_, seen_at) = next(iter(self._seen.items()))
            if seen_at >= horizon:
                return
            del self._seen[key]
