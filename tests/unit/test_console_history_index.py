"""The console's history index over a real archive (embedded log → view → archiver, in process):
it holds what the archive holds, per partition the newest changes, and reads only what was added."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.codec.keys import logical_id
from emulator.server.ui.history_index import HistoryIndex
from tests.unit.test_history_archive import Stack, key, open_stack, value


@pytest.fixture
def stacks() -> Iterator[list[Stack]]:
    opened: list[Stack] = []
    yield opened
    for stack in opened:
        stack.close()


def refresh_until(index: HistoryIndex, records: int) -> None:
    """Refresh until the index holds ``records`` rows (the view reports a batch applied just before
    the archiver has it, so one refresh may come early), then check that none was read twice."""
    deadline = time.monotonic() + 10
    index.refresh()
    while index.state().records < records and time.monotonic() < deadline:
        time.sleep(0.02)
        index.refresh()
    assert index.state().records == records, "nothing read twice, nothing missed"


def test_the_index_keeps_each_partitions_newest_changes_and_the_connectors_last_writer(
    tmp_path: Path, stacks: list[Stack]
) -> None:
    stack = open_stack(tmp_path)
    stacks.append(stack)
    for n in range(5):
        stack.append([(key(0, "ix"), value(n))])  # Connect's (external) writes
    stack.append([(key(1, "ix"), value(9))], operation="PATCH")
    index = HistoryIndex(stack.archive, per_partition=3)
    refresh_until(index, 6)

    kept, total = index.partition("ix", logical_id({"file": "f0"}))
    assert total == 5
    assert [c.value for c in kept] == [value(2), value(3), value(4)], "the newest 3, oldest first"
    assert {c.origin for c in kept} == {"external"}
    assert index.counts("ix") == {logical_id({"file": "f0"}): 5, logical_id({"file": "f1"}): 1}
    last, records = index.last_changes()["ix"]
    assert records == 6
    assert last is not None and (last.origin, last.operation, last.value) == ("daemon", "PATCH", value(9))


def test_a_refresh_reads_only_what_the_archive_added_across_rotated_files(tmp_path: Path, stacks: list[Stack]) -> None:
    stack = open_stack(tmp_path, rotate_bytes=1, retention_s=None)  # a file per batch, none folded
    stacks.append(stack)
    index = HistoryIndex(stack.archive)
    for round_ in range(4):
        stack.append([(key(n, "rot"), value(round_)) for n in range(20)])
        refresh_until(index, 20 * (round_ + 1))
    assert len(list((tmp_path / "history").rglob("*.avro"))) > 2, "the archive rotated"
    kept, total = index.partition("rot", logical_id({"file": "f7"}))
    assert total == 4 and [c.value for c in kept] == [value(r) for r in range(4)]
