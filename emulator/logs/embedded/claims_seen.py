"""Which connectors the embedded log last saw claimed, so most writes skip the claim lookup.

Every PATCH and DELETE checks claims twice: fail-fast before it plans (``WriteGuard.check_writer``)
and atomically inside the transaction that writes. The fail-fast read costs a hop to a worker
thread and back, about an eighth of a commit's CPU, and almost always answers "nobody". This set
answers that without waiting: a connector not in it had no claim when the claims table was last
read (at the reader thread's last look: at most ``TAIL_POLL_S`` ago while records arrive,
``IDLE_POLL_MAX_S`` on an idle log) and none was taken through this process since. A claim taken
by another process on the same file is missed for at most that long, and even then only by the
fail-fast check: the write's own transaction still refuses.
"""

from __future__ import annotations

import sqlite3
import threading
import time


class ClaimsSeen:
    def __init__(self, refresh_every_s: float) -> None:
        self._refresh_every_s = refresh_every_s
        self._lock = threading.Lock()
        self._held: frozenset[str] | None = None  # None: the table was never read; assume anyone may hold
        self._generation = 0  # bumped by every change made here, so a stale table read is not installed
        self._read_at = float("-inf")

    def may_be_claimed(self, connector: str) -> bool:
        held = self._held
        return held is None or connector in held

    def count(self) -> int | None:
        """How many connectors were claimed at the last read (with this process's claims and releases
        since); None before the first read."""
        held = self._held
        return None if held is None else len(held)

    def due(self) -> bool:
        return time.monotonic() - self._read_at >= self._refresh_every_s

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Read the unreleased claims on ``conn`` (the reader thread's connection).

        A claim or release made through this process while the read ran bumps the generation, and the
        read is then dropped: it may predate that change, and the next refresh is moments away."""
        with self._lock:
            generation = self._generation
        held = frozenset(row[0] for row in conn.execute("SELECT connector FROM claims WHERE released = 0"))
        with self._lock:
            if generation == self._generation:
                self._held = held
            self._read_at = time.monotonic()

    def claimed(self, connector: str) -> None:
        """``connector`` was claimed (by this process, or the write path found another's claim)."""
        with self._lock:
            self._generation += 1
            if self._held is not None and connector not in self._held:
                self._held = self._held | {connector}

    def released(self, connector: str) -> None:
        with self._lock:
            self._generation += 1
            if self._held is not None and connector in self._held:
                self._held = self._held - {connector}
