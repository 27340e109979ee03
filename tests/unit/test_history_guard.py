"""Replay de-duplication decisions: skip what is archived, notice a log that is not the archived one."""

from __future__ import annotations

from emulator.history.guard import ReplayGuard, Verdict
from emulator.history.state import ArchiveState, fingerprint
from emulator.model.records import LogRecord


def rec(p: int, o: int, v: bytes = b"v") -> LogRecord:
    return LogRecord(b"k%d" % o, v, p, o, 0)


def archived(*records: LogRecord) -> ArchiveState:
    state = ArchiveState("log")
    for r in records:
        state.note(r.partition, r.offset, fingerprint(r.key, r.value))
    return state


def decide(guard: ReplayGuard, r: LogRecord) -> Verdict:
    return guard.decide(r).verdict


def test_records_below_the_watermark_are_skipped_once_the_tail_record_matches() -> None:
    guard = ReplayGuard(archived(rec(0, 0), rec(0, 1), rec(0, 2)))
    assert [decide(guard, rec(0, o)) for o in (0, 1, 2)] == [Verdict.SKIP] * 3
    assert not guard.verifying and guard.take_held() == []
    assert decide(guard, rec(0, 3)) is Verdict.ARCHIVE


def test_other_bytes_at_the_tail_offset_mean_another_log_and_the_held_records_belong_to_it() -> None:
    guard = ReplayGuard(archived(rec(0, 0), rec(0, 1)))
    assert decide(guard, rec(0, 0, b"new")) is Verdict.SKIP  # cannot tell yet: held
    decision = guard.decide(rec(0, 1, b"new"))
    assert decision.verdict is Verdict.NEW_EPOCH and decision.archive_held
    assert [(r.offset, fresh) for r, fresh in guard.take_held()] == [(0, False)]


def test_offsets_going_back_within_a_run_mean_the_log_was_recreated_under_us() -> None:
    guard = ReplayGuard(archived())
    assert [decide(guard, rec(1, o)) for o in (0, 1, 2)] == [Verdict.ARCHIVE] * 3
    decision = guard.decide(rec(1, 0))
    assert decision.verdict is Verdict.NEW_EPOCH and not decision.archive_held
    assert "went back in partition 1" in decision.reason


def test_a_log_read_to_its_end_short_of_the_watermark_is_another_log() -> None:
    guard = ReplayGuard(archived(rec(0, 0), rec(0, 1), rec(2, 0)))
    assert decide(guard, rec(2, 0)) is Verdict.SKIP
    assert guard.check_positions({0: 1, 2: 1}, caught_up=False, now=0).verdict is Verdict.ARCHIVE
    assert guard.check_positions({0: 1, 2: 1}, caught_up=True, now=0).verdict is Verdict.ARCHIVE, "not settled yet"
    assert guard.check_positions({0: 1, 2: 1}, caught_up=True, now=1).verdict is Verdict.ARCHIVE
    decision = guard.check_positions({0: 1, 2: 1}, caught_up=True, now=2.5)
    assert decision.verdict is Verdict.NEW_EPOCH and "partition 0: the log ends before offset 1" in decision.reason


def test_a_reader_still_moving_after_calling_itself_caught_up_is_not_a_short_log() -> None:
    # A broker that under-reports end offsets: "caught up" at 1, but records keep coming.
    guard = ReplayGuard(archived(rec(0, 0), rec(0, 1), rec(0, 2)))
    assert guard.check_positions({0: 1}, caught_up=True, now=0).verdict is Verdict.ARCHIVE
    assert guard.check_positions({0: 2}, caught_up=True, now=3).verdict is Verdict.ARCHIVE, "it moved: wait again"
    assert decide(guard, rec(0, 2)) is Verdict.SKIP and not guard.verifying


def test_a_tail_record_compacted_away_cannot_be_checked_and_is_trusted_with_a_warning() -> None:
    guard = ReplayGuard(archived(rec(0, 0), rec(0, 5)))
    assert decide(guard, rec(0, 6)) is Verdict.ARCHIVE
    assert guard.unverifiable == [0] and not guard.verifying


def test_the_hold_back_buffer_is_bounded_and_counts_what_it_drops() -> None:
    guard = ReplayGuard(archived(*[rec(0, o) for o in range(10)]), hold_limit=3)
    for o in range(9):
        assert decide(guard, rec(0, o, b"other")) is Verdict.SKIP
    assert guard.held_dropped == 6 and [r.offset for r, _ in guard.take_held()] == [6, 7, 8]


def test_a_record_above_the_watermark_waits_for_the_open_checks_then_is_released_in_order() -> None:
    guard = ReplayGuard(archived(rec(0, 0), rec(0, 1)))
    assert decide(guard, rec(2, 0)) is Verdict.HOLD, "partition 0 is not checked yet: the log may be another"
    assert decide(guard, rec(2, 1)) is Verdict.HOLD
    assert decide(guard, rec(0, 0)) is Verdict.SKIP and not guard.released
    assert decide(guard, rec(0, 1)) is Verdict.SKIP and guard.released, "the tail matched: the same log"
    assert [(r.partition, r.offset) for r in guard.take_released()] == [(2, 0), (2, 1)]
    assert not guard.released and decide(guard, rec(2, 2)) is Verdict.ARCHIVE


def test_records_held_above_the_watermark_belong_to_the_new_log_when_the_check_fails() -> None:
    guard = ReplayGuard(archived(rec(0, 0), rec(0, 1)))
    assert decide(guard, rec(1, 0)) is Verdict.HOLD
    assert decide(guard, rec(0, 0, b"new")) is Verdict.SKIP
    decision = guard.decide(rec(0, 1, b"new"))
    assert decision.verdict is Verdict.NEW_EPOCH and decision.archive_held
    assert [(r.partition, r.offset, fresh) for r, fresh in guard.take_held()] == [(1, 0, True), (0, 0, False)]


def test_a_full_hold_back_buffer_of_new_records_archives_them_rather_than_losing_them() -> None:
    guard = ReplayGuard(archived(rec(0, 0), rec(0, 1)), hold_limit=2)
    assert [decide(guard, rec(1, o)) for o in range(3)] == [Verdict.HOLD] * 3
    assert guard.released and [r.offset for r in guard.take_released()] == [0, 1, 2]
    assert decide(guard, rec(1, 3)) is Verdict.ARCHIVE, "held no more this run: archived as they come"
    assert guard.held_dropped == 0


def test_a_short_log_is_explained_partition_by_partition_with_every_cause() -> None:
    """Before, the reason named the first short partition only and one cause ("the log was re-created")."""
    guard = ReplayGuard(archived(*(rec(0, o) for o in range(4)), *(rec(2, o) for o in range(9))))
    guard.check_positions({0: 1, 2: 6}, caught_up=True, now=0)
    decision = guard.check_positions({0: 1, 2: 6}, caught_up=True, now=2.5)
    assert decision.verdict is Verdict.NEW_EPOCH
    assert decision.reason.startswith("the log holds fewer records than the archive: ")
    assert (
        "partition 0: the log ends before offset 1 (its last record is at offset 0), but the archive holds its "
        "records up to offset 3 inclusive (offsets 1-3: 3 offset(s) the log no longer has)" in decision.reason
    )
    assert "partition 2: the log ends before offset 6 (its last record is at offset 5)" in decision.reason
    assert "(offsets 6-8: 3 offset(s) the log no longer has)" in decision.reason
    assert decision.lost == {0: 3, 2: 3}, "counted per partition, for /status's warning"


def test_a_short_log_by_one_record_names_the_offsets_unambiguously() -> None:
    """The QA's line read "partition 23 ends at offset 4 … but the archive holds its records up to offset
    4": the same number for where the log ends and what the archive holds."""
    guard = ReplayGuard(archived(*(rec(0, o) for o in range(5))))
    guard.check_positions({0: 4}, caught_up=True, now=0)
    decision = guard.check_positions({0: 4}, caught_up=True, now=2.5)
    assert (
        "partition 0: the log ends before offset 4 (its last record is at offset 3), but the archive holds its "
        "records up to offset 4 inclusive (offset 4: 1 offset(s) the log no longer has)" in decision.reason
    )
    assert decision.lost == {0: 1}
    assert "restored from an older copy" in decision.reason and "lost acknowledged writes" in decision.reason
