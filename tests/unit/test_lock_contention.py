"""The embedded log's lock probe: readiness after a write timed out on another process's write lock.

``/readyz`` reads ``reason()`` on every probe, so it must be an attribute read; the lock itself is
tried on a thread of its own, at most once a second, and only while a write last timed out on it.
"""

from __future__ import annotations

import threading
import time

import pytest

from emulator.logs.embedded.lock_contention import LockContention
from tests.fixtures.waits import until


class _Lock:
    """Another process's write lock, as the probe sees it; counts the probe's tries."""

    def __init__(self) -> None:
        self.held = True
        self.tries = 0
        self.tried_on: set[str] = set()

    def probe(self) -> bool:
        self.tries += 1
        self.tried_on.add(threading.current_thread().name)
        return not self.held


def test_nothing_is_probed_and_nothing_said_until_a_write_times_out() -> None:
    lock = _Lock()
    contention = LockContention("embedded:///log", lock.probe, interval_s=0.05)
    try:
        time.sleep(0.2)
        assert contention.reason() is None and lock.tries == 0
    finally:
        contention.close()


@pytest.mark.slow  # readiness watched over 1.2 s, then 1.2 s more without a probe
def test_a_timed_out_write_is_reported_until_the_probe_finds_the_lock_free_trying_once_an_interval() -> None:
    lock = _Lock()
    contention = LockContention("embedded:///log", lock.probe, interval_s=0.5)
    try:
        contention.timed_out()
        contention.timed_out()  # a second write timing out changes nothing: the same run, since the first
        started = time.monotonic()
        reasons = 0
        while time.monotonic() - started < 1.2:  # readiness asked as often as it can be
            reason = contention.reason()
            assert reason is not None and reason.startswith("embedded:///log is locked by another process since ")
            reasons += 1
        assert reasons > 1000 and lock.tries == 2, (reasons, lock.tries)  # at 0.5 s and 1.0 s, not per reason()
        assert lock.tried_on == {"embedded-log-lock-probe"}, "never on the caller's thread"
        lock.held = False
        released = time.monotonic()
        until(lambda: contention.reason() is None, "the lock seen free", timeout_s=2)
        assert time.monotonic() - released < 0.5 + 0.2
        tries = lock.tries
        time.sleep(1.2)
        assert lock.tries == tries, "no probe once the lock is free"
    finally:
        contention.close()


def test_a_write_that_gets_the_lock_ends_the_report_at_once_and_a_later_timeout_starts_a_new_one() -> None:
    lock = _Lock()
    contention = LockContention("embedded:///log", lock.probe, interval_s=0.05)
    try:
        contention.timed_out()
        assert contention.reason() is not None
        contention.succeeded()
        assert contention.reason() is None
        contention.timed_out()
        assert contention.reason() is not None
        time.sleep(0.2)
        assert lock.tries >= 1, "the new run is probed as well"
        lock.held = False
        until(lambda: contention.reason() is None, "the lock seen free", timeout_s=2)
    finally:
        contention.close()
