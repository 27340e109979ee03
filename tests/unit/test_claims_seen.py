"""The embedded log's set of claimed connectors never installs a read of the claims table that a
claim or release made through this process may have overtaken."""

from __future__ import annotations

import sqlite3
from typing import Any

from emulator.logs.embedded.claims_seen import ClaimsSeen


def claims_table(*held: str) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE claims (connector TEXT PRIMARY KEY, released INTEGER)")
    conn.executemany("INSERT INTO claims VALUES (?, 0)", [(c,) for c in held])
    conn.execute("INSERT INTO claims VALUES ('gone', 1)")
    return conn


class RacingConnection:
    """A connection whose query is overtaken by a change made through the process meanwhile."""

    def __init__(self, conn: sqlite3.Connection, meanwhile: Any) -> None:
        self._conn = conn
        self._meanwhile = meanwhile

    def execute(self, sql: str) -> sqlite3.Cursor:
        cursor = self._conn.execute(sql)
        self._meanwhile()
        return cursor


def test_unknown_until_read_then_the_table_decides() -> None:
    seen = ClaimsSeen(refresh_every_s=60.0)
    assert seen.may_be_claimed("a") and seen.due()
    seen.refresh(claims_table("a"))
    assert seen.may_be_claimed("a")
    assert not seen.may_be_claimed("gone"), "a released claim holds nothing"
    assert not seen.may_be_claimed("b")
    assert not seen.due()


def test_a_read_overtaken_by_a_claim_here_is_dropped() -> None:
    seen = ClaimsSeen(refresh_every_s=0.0)
    seen.refresh(claims_table())
    racing = RacingConnection(claims_table(), lambda: seen.claimed("a"))  # the read predates the claim
    seen.refresh(racing)  # type: ignore[arg-type]
    assert seen.may_be_claimed("a"), "a stale read erased a claim made through this process"
    seen.refresh(claims_table("a"))
    assert seen.may_be_claimed("a")


def test_a_read_overtaken_by_a_release_here_is_dropped_too() -> None:
    seen = ClaimsSeen(refresh_every_s=0.0)
    seen.refresh(claims_table("a"))
    seen.refresh(RacingConnection(claims_table("a"), lambda: seen.released("a")))  # type: ignore[arg-type]
    assert not seen.may_be_claimed("a")
