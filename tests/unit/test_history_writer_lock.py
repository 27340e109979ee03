"""Asking whether a daemon writes an archive must not take the writer's lock, even for an instant.

``connect-offsets compact`` and a daemon without history ask it (the latter at every compaction
check). A question that briefly took the ``flock`` itself would make a daemon starting at that
instant find the lock taken and serve its archive read-only for its whole life, archiving nothing.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from emulator.history.directory import WriterLock, written_by_a_live_process


@pytest.mark.slow
def test_a_writer_starting_while_the_question_is_asked_always_gets_the_lock(tmp_path: Path) -> None:
    directory = tmp_path / "archive"
    first = WriterLock(directory, "embedded:///x")
    assert first.acquire()
    assert written_by_a_live_process(directory), "a held lock is seen"
    first.release()
    assert not written_by_a_live_process(directory), "a released one is not"
    assert not written_by_a_live_process(tmp_path / "never-written"), "nor a directory without a lock file"

    stop = threading.Event()
    asked = 0

    def ask() -> None:
        nonlocal asked
        while not stop.is_set():
            written_by_a_live_process(directory)
            asked += 1

    asker = threading.Thread(target=ask)
    asker.start()
    refused = 0
    try:
        for _ in range(3_000):
            lock = WriterLock(directory, "embedded:///x")
            if lock.acquire():
                lock.release()
            else:
                refused += 1
    finally:
        stop.set()
        asker.join()
    assert asked > 100, "the question was asked while the writers started"
    assert refused == 0, f"{refused} of 3000 writers found the lock taken by the question"
