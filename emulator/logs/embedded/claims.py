"""Claims on the embedded log: a ``claims`` table in the log's own file, so that a claim and the
writes it fences are ordered by SQLite's one write lock, across processes too.

A claim is taken in one ``BEGIN IMMEDIATE`` transaction (two racing claims get distinct epochs and the
later one wins), and a fenced write checks the claim inside the very transaction that writes
(``refusal``), so no claim can slip between the check and the write.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Collection

from emulator.logs.embedded.claims_seen import ClaimsSeen
from emulator.logs.embedded.storage import LogFile, immediate
from emulator.logs.embedded.writing import WritingConnection
from emulator.model.claims import Claim, Fence, Fenced, fenced_message, held_message
from emulator.model.errors import ClaimHeld, LogWriteError, OffsetsError


class EmbeddedClaims:
    def __init__(self, file: LogFile, writing: WritingConnection, seen: ClaimsSeen) -> None:
        self._file = file
        self._writing = writing
        self.seen = seen
        self._reader: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # guards _reader and _closed
        self._closed = False

    def claim(self, connector: str, owner: str) -> Claim:
        """The next epoch for ``connector``, in one ``BEGIN IMMEDIATE`` transaction: two claims
        racing from two processes get distinct epochs and the later one wins."""
        with self._writing.held() as conn:
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
                    self._writing.require_same_file(f"the claim of connector {connector!r}")
            except sqlite3.Error as e:
                raise self._writing.refused(e, f"the claim of connector {connector!r}") from e
            self.seen.claimed(connector)
        self._writing.faults.succeeded()
        self._writing.contention.succeeded()
        return claim

    def current(self, connector: str) -> Claim | None:
        """Read on a connection of its own: WAL readers see the last commit without waiting for the
        commit in progress, so a write's fail-fast claim check does not queue behind the group commit
        that holds the writing connection (the check inside the writing transaction stays the atomic one)."""
        with self._lock:
            return claim_in(self._connection(), connector)

    def current_of(self, connectors: Collection[str]) -> dict[str, Claim]:
        """One read of the claims table (every unreleased claim) instead of a query per connector."""
        wanted = set(connectors)
        with self._lock:
            rows = (
                self._connection()
                .execute("SELECT connector, owner, epoch, claimed_at_ms FROM claims WHERE released = 0")
                .fetchall()
            )
        return {row[0]: Claim(*row) for row in rows if row[0] in wanted}

    def current_all(self) -> dict[str, Claim]:
        """Every unreleased claim, by connector, whether or not the connector has offsets."""
        with self._lock:
            rows = (
                self._connection()
                .execute(
                    "SELECT connector, owner, epoch, claimed_at_ms FROM claims WHERE released = 0 ORDER BY connector"
                )
                .fetchall()
            )
        return {row[0]: Claim(*row) for row in rows}

    def release(self, fence: Fence) -> bool:
        with self._writing.held() as conn:
            self._writing.require_same_file(f"the release of connector {fence.connector!r}'s claim")
            try:
                cursor = conn.execute(
                    "UPDATE claims SET released = 1 WHERE connector = ? AND epoch = ? AND released = 0",
                    (fence.connector, fence.epoch),
                )
            except sqlite3.Error as e:
                raise self._writing.refused(e, f"the release of connector {fence.connector!r}'s claim") from e
            if cursor.rowcount != 1:
                return False
            self.seen.released(fence.connector)
            return True

    def refusal(self, conn: sqlite3.Connection, fence: Fence) -> OffsetsError | None:
        """Why a write under ``fence`` is refused, read inside the writing transaction on ``conn``:
        ``Fenced`` unless ``fence`` is the connector's current claim, or for ``fence.epoch=None``
        ``ClaimHeld`` while anyone holds it; None when it may write."""
        current = claim_in(conn, fence.connector)
        if current is not None:
            self.seen.claimed(fence.connector)
        if fence.epoch is None:
            return None if current is None else ClaimHeld(held_message(fence.connector, current))
        if current is None or current.epoch != fence.epoch:
            return Fenced(fenced_message(fence.connector, fence.epoch, current))
        return None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    def _connection(self) -> sqlite3.Connection:
        """The claims reads' own connection (opened on first use). The caller holds ``_lock``."""
        if self._closed or not self._writing.is_open:
            raise LogWriteError(f"{self._file.description} is not open")
        if self._reader is None:
            self._reader = self._file.connect(timeout_s=30.0)
        return self._reader


def claim_in(conn: sqlite3.Connection, connector: str) -> Claim | None:
    row = conn.execute(
        "SELECT owner, epoch, claimed_at_ms FROM claims WHERE connector = ? AND released = 0", (connector,)
    ).fetchone()
    return None if row is None else Claim(connector, row[0], row[1], row[2])
