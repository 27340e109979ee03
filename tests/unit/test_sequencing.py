"""Reordering detection follows Hazelcast Jet's WriteCdcP rules, per key, with an expiring cache."""

from __future__ import annotations

import pytest

from emulator.model.sequences import CommitSequence, SequenceTracker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def accept(tracker: SequenceTracker, key: str, source: str, number: int) -> bool:
    offered = CommitSequence(source, number)
    verdict = tracker.check(key, offered)
    if verdict.accepted:
        tracker.record(key, offered)
    else:
        tracker.touch(key)
    return verdict.accepted


def test_first_sequence_for_a_key_is_accepted() -> None:
    assert accept(SequenceTracker(), "k", "run-1", 5)


def test_only_strictly_greater_numbers_from_the_same_source_are_accepted() -> None:
    tracker = SequenceTracker()
    assert accept(tracker, "k", "run-1", 5)
    assert not accept(tracker, "k", "run-1", 5), "a replayed commit is dropped"
    assert not accept(tracker, "k", "run-1", 4), "a late commit is dropped"
    assert accept(tracker, "k", "run-1", 6)
    assert tracker.dropped == 2


def test_a_new_source_descriptor_always_wins_and_numbers_restart() -> None:
    tracker = SequenceTracker()
    assert accept(tracker, "k", "run-1", 100)
    assert accept(tracker, "k", "run-2", 0), "a new query run starts its batch ids again"
    assert not accept(tracker, "k", "run-2", 0)
    assert accept(tracker, "k", "run-1", 1), "switching back is also a new descriptor, as in Jet"


def test_keys_are_independent() -> None:
    tracker = SequenceTracker()
    assert accept(tracker, "a", "s", 9)
    assert accept(tracker, "b", "s", 1)


def test_the_reason_names_both_numbers() -> None:
    tracker = SequenceTracker()
    tracker.record("k", CommitSequence("s", 7))
    verdict = tracker.check("k", CommitSequence("s", 3))
    assert not verdict.accepted
    assert verdict.reason(CommitSequence("s", 3)) == "stale sequence 3 from source 's': 7 was already applied"


def test_check_alone_does_not_change_the_cache() -> None:
    tracker = SequenceTracker()
    assert tracker.check("k", CommitSequence("s", 1)).accepted
    assert len(tracker) == 0, "a commit whose write failed must not be remembered"


def test_keys_not_seen_within_the_expiry_are_forgotten() -> None:
    clock = Clock()
    tracker = SequenceTracker(expiry_s=10, clock=clock)
    assert accept(tracker, "old", "s", 5)
    clock.now += 5
    assert accept(tracker, "fresh", "s", 5)
    clock.now += 6  # "old" is 11 s old, "fresh" 6 s
    assert accept(tracker, "old", "s", 1), "expired: the stale number is accepted as a first sighting"
    assert not accept(tracker, "fresh", "s", 1)


def test_a_dropped_commit_refreshes_the_keys_age() -> None:
    clock = Clock()
    tracker = SequenceTracker(expiry_s=10, clock=clock)
    assert accept(tracker, "k", "s", 5)
    clock.now += 8
    assert not accept(tracker, "k", "s", 4)
    clock.now += 8  # 16 s after the record, 8 s after the drop
    assert not accept(tracker, "k", "s", 4), "still remembered: the drop refreshed it"


def test_expiry_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        SequenceTracker(expiry_s=0)
