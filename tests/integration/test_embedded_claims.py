"""Claims on the embedded log: epochs are durable, a newer claim fences older writers atomically."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.logs.embedded.reader import TAIL_POLL_S
from emulator.model.claims import Fence, Fenced
from emulator.model.errors import ClaimHeld
from emulator.server.errors import status_of


def key(connector: str, n: int) -> bytes:
    return f'["{connector}",{{"n":{n}}}]'.encode()


def opened(data_dir: Path) -> EmbeddedOffsetLog:
    log = EmbeddedOffsetLog(data_dir, partitions=5)
    log.open()
    return log


def total_records(log: EmbeddedOffsetLog) -> int:
    import sqlite3

    with sqlite3.connect(log.path) as db:
        return int(db.execute("SELECT count(*) FROM records").fetchone()[0])


def test_each_claim_gets_the_next_epoch_and_survives_restart(tmp_path: Path) -> None:
    log = opened(tmp_path)
    first = log.claim("c", "spark-query-1")
    second = log.claim("c", "cli")
    assert (first.epoch, second.epoch) == (1, 2)
    assert log.claim("other", "x").epoch == 1, "epochs are per connector"
    log.close()
    reopened = opened(tmp_path)
    try:
        current = reopened.current_claim("c")
        assert current is not None and (current.owner, current.epoch) == ("cli", 2)
        assert reopened.claim("c", "again").epoch == 3
    finally:
        reopened.close()


def test_the_current_claim_writes_and_a_fenced_one_writes_nothing(tmp_path: Path) -> None:
    log = opened(tmp_path)
    try:
        old = log.claim("c", "old")
        assert len(log.append_fenced(Fence("c", old.epoch), [(key("c", 1), b'{"o":1}')])) == 1
        new = log.claim("c", "new")
        before = total_records(log)
        with pytest.raises(Fenced) as fenced:
            log.append_fenced(Fence("c", old.epoch), [(key("c", 1), b'{"o":2}'), (key("c", 2), b'{"o":2}')])
        assert status_of(fenced.value) == 409, "the API answers a fenced write with 409"
        assert "claimed by 'new' with epoch 2" in fenced.value.message
        assert total_records(log) == before, "a fenced commit never reaches the log"
        assert len(log.append_fenced(Fence("c", new.epoch), [(key("c", 1), b'{"o":3}')])) == 1
    finally:
        log.close()


def test_a_writer_without_a_claim_is_refused_inside_the_writing_transaction(tmp_path: Path) -> None:
    """The claim check is atomic with the write even for a writer that presents no claim: whatever
    the service checked before, the transaction that would write refuses it while someone holds the
    connector (Connect's 400 "not STOPPED", and who holds it)."""
    log = opened(tmp_path)
    try:
        assert len(log.append_fenced(Fence("c", None), [(key("c", 1), b'{"o":1}')])) == 1, "nobody holds it yet"
        log.claim("c", "spark-run")
        before = total_records(log)
        with pytest.raises(ClaimHeld) as held:
            log.append_fenced(Fence("c", None), [(key("c", 1), b'{"o":2}')])
        assert status_of(held.value) == 400 and "claimed by 'spark-run' (epoch 1)" in held.value.message
        assert total_records(log) == before, "the unclaimed write reached nothing"
        assert len(log.append_fenced(Fence("other", None), [(key("other", 1), b"{}")])) == 1, "per connector"
    finally:
        log.close()


def test_a_fenced_request_in_a_group_commit_does_not_block_the_others(tmp_path: Path) -> None:
    log = opened(tmp_path)
    try:
        log.claim("c", "old")
        current = log.claim("c", "new")
        outcomes: dict[str, object] = {}

        def write(name: str, epoch: int) -> None:
            try:
                outcomes[name] = log.append_fenced(Fence("c", epoch), [(key("c", epoch), b"{}")])
            except Fenced as exc:
                outcomes[name] = exc

        threads = [threading.Thread(target=write, args=(f"w{i}", 1 if i % 2 else current.epoch)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sum(isinstance(o, Fenced) for o in outcomes.values()) == 4
        assert sum(isinstance(o, list) for o in outcomes.values()) == 4
        assert total_records(log) == 4
    finally:
        log.close()


def test_claims_race_across_processes_sharing_a_directory(tmp_path: Path) -> None:
    a, b = opened(tmp_path), opened(tmp_path)
    try:
        claims = []
        lock = threading.Lock()

        def claim(log: EmbeddedOffsetLog, owner: str) -> None:
            for _ in range(20):
                c = log.claim("c", owner)
                with lock:
                    claims.append(c)

        threads = [threading.Thread(target=claim, args=(a, "a")), threading.Thread(target=claim, args=(b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        epochs = sorted(c.epoch for c in claims)
        assert epochs == list(range(1, 41)), "every claim got a distinct epoch"
        winner = max(claims, key=lambda c: c.epoch)
        assert a.current_claim("c") == b.current_claim("c") == winner
        for loser in (c for c in claims if c.epoch != winner.epoch):
            with pytest.raises(Fenced):
                (a if loser.owner == "a" else b).append_fenced(Fence("c", loser.epoch), [(key("c", 0), b"{}")])
    finally:
        a.close()
        b.close()


def test_release_ends_a_claim_once(tmp_path: Path) -> None:
    log = opened(tmp_path)
    try:
        claim = log.claim("c", "x")
        assert log.release(Fence("c", claim.epoch)) is True
        assert log.release(Fence("c", claim.epoch)) is False
        assert log.current_claim("c") is None
        with pytest.raises(Fenced, match="has no current claim"):
            log.append_fenced(Fence("c", claim.epoch), [(key("c", 0), b"{}")])
        assert log.claim("c", "y").epoch == 2, "epochs keep counting after a release"
    finally:
        log.close()


def test_reading_the_current_claim_does_not_wait_for_a_commit_in_progress(tmp_path: Path) -> None:
    """A write's fail-fast claim check runs before it joins the group commit; it must not queue
    behind the commit lock that a slow commit holds, and it still sees every committed claim."""
    log = opened(tmp_path)
    try:
        log.claim("c", "first")
        answers: list[str] = []
        with log._writing.lock:  # a commit in progress
            reader = threading.Thread(target=lambda: answers.append(str(log.current_claim("c"))))
            reader.start()
            reader.join(timeout=5.0)
            assert answers and "first" in answers[0], "the claim check waited for the commit lock"
        log.claim("c", "second")
        current = log.current_claim("c")
        assert current is not None and current.owner == "second", "a claim committed since is seen"
    finally:
        log.close()
    with pytest.raises(Exception, match="not open"):
        log.current_claim("c")


def eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(TAIL_POLL_S / 5)
    return True


def test_may_be_claimed_sees_this_process_at_once_and_another_within_a_poll(tmp_path: Path) -> None:
    """What lets a write without an epoch skip the fail-fast claim lookup: "nobody holds it" is
    answered only from a read of the claims table or from a change made through this very log."""
    a, b = opened(tmp_path), opened(tmp_path)
    try:
        assert a.may_be_claimed("c"), "before the claims table was read, anyone may hold the connector"
        a.start_reading(lambda records: None)
        assert eventually(lambda: not a.may_be_claimed("c")), "the reader never read the claims table"

        claim = a.claim("c", "here")
        assert a.may_be_claimed("c"), "a claim through this log counts at once, not at the next poll"
        assert not a.may_be_claimed("other")
        assert a.release(Fence("c", claim.epoch))
        assert not a.may_be_claimed("c")

        b.claim("d", "another process")
        assert eventually(lambda: a.may_be_claimed("d")), "another process's claim was never seen"
        b.claim("e", "another process")
        with pytest.raises(ClaimHeld):  # before the next poll, the write's own check refuses
            a.append_fenced(Fence("e", None), [(key("e", 0), b"{}")])
        assert a.may_be_claimed("e"), "a claim the write path ran into counts at once"
    finally:
        a.close()
        b.close()
