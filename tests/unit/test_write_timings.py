"""The offsets log's write timings: Prometheus's histogram shape, and one warning per interval for
writes the disk or the broker held past a second."""

from __future__ import annotations

import logging

import pytest

from emulator.logs.write_timings import BUCKETS, SLOW_WRITE_S, WARN_EVERY_S, WriteTimings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def within(timings: WriteTimings, bound: float) -> int:
    return dict(timings.snapshot().cumulative)[bound]


def test_a_write_counts_in_every_bucket_from_the_first_bound_it_does_not_exceed() -> None:
    timings = WriteTimings("embedded:///x", "the disk")
    timings.observe(0.001, 1)  # exactly on a bound: counted in it, as Prometheus's "le" says
    timings.observe(0.003, 4)
    timings.observe(40.0, 2)  # beyond the last bound: only in +Inf
    snap = timings.snapshot()
    assert [bound for bound, _ in snap.cumulative] == [*BUCKETS, float("inf")]
    assert within(timings, 0.0005) == 0
    assert within(timings, 0.001) == 1
    assert within(timings, 0.0025) == 1
    assert within(timings, 0.005) == 2
    assert within(timings, 30.0) == 2
    assert within(timings, float("inf")) == 3
    assert (snap.count, snap.records, snap.slow) == (3, 7, 1)
    assert snap.sum_s == pytest.approx(40.004)


def test_counts_never_decrease_from_one_bucket_to_the_next() -> None:
    timings = WriteTimings("embedded:///x", "the disk")
    for seconds in (0.0001, 0.02, 0.02, 0.3, 2.0, 0.0007):
        timings.observe(seconds, 1)
    counts = [n for _, n in timings.snapshot().cumulative]
    assert counts == sorted(counts) and counts[-1] == 6


def test_a_slow_write_is_logged_with_its_log_and_what_it_waited_for(caplog: pytest.LogCaptureFixture) -> None:
    timings = WriteTimings("kafka://b:9092/connect-offsets", "the broker's acknowledgement", clock=Clock())
    with caplog.at_level(logging.WARNING, logger="emulator.logs.write_timings"):
        timings.observe(SLOW_WRITE_S * 0.99, 1)
        assert caplog.records == []
        timings.observe(1.5, 1)
    [record] = caplog.records
    assert record.getMessage() == (
        "kafka://b:9092/connect-offsets: a write took 1.50 s to become durable (1 write(s) of 1 s or more since "
        "the last such warning); it waited for the broker's acknowledgement, not for the daemon"
    )


def test_slow_writes_are_logged_at_most_once_per_interval_and_counted_in_the_next_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    timings = WriteTimings("embedded:///x", "the disk", clock=clock)
    with caplog.at_level(logging.WARNING, logger="emulator.logs.write_timings"):
        timings.observe(2.0, 1)
        for _ in range(3):
            clock.now += WARN_EVERY_S / 4
            timings.observe(1.2, 1)
        assert len(caplog.records) == 1
        clock.now += WARN_EVERY_S / 4
        timings.observe(3.0, 1)
    assert len(caplog.records) == 2
    snap = timings.snapshot()
    assert snap.slow == 5 and snap.last_slow_s == 3.0  # every slow write counts, logged or not
    assert "(4 write(s) of 1 s or more since the last such warning)" in caplog.records[1].getMessage()
    assert "took 3.00 s" in caplog.records[1].getMessage()
