"""The record arena behaves as a dict of raw key → slot plus per-group multimaps, at any size.

The view's model tests (test_view_index.py) use a few dozen keys; these drive the arena itself
through tens of thousands of inserts, rewrites that grow and shrink slots (moving records and
leaving garbage), deletes and compactions, against plain dicts.
"""

from __future__ import annotations

import random

import pytest

from emulator.view import position_table, record_arena
from emulator.view.record_arena import RecordArena


def _check(arena: RecordArena, data: dict[bytes, bytes], groups: dict[bytes, tuple[int, int]]) -> None:
    assert len(arena) == len(data)
    assert dict(arena.items()) == data
    for group in {g for g, _ in groups.values()}:
        expected = {key for key, (g, _) in groups.items() if g == group}
        members = arena.members(group)
        assert sorted(members.keys) == sorted(expected)
        for key, slot, logical in zip(members.keys, members.slots, members.logicals, strict=True):
            assert slot == data[key] and logical == groups[key][1]
        # kept with every change, never recounted: it must equal what the members add up to
        assert arena.extent(group) == (len(expected), sum(len(key) + len(data[key]) for key in expected))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("compact_floor", "step_bytes", "move_cells"),
    [
        (1 << 20, 1 << 16, 1024),
        (0, 1 << 16, 1024),
        (0, 512, 1024),
        (0, 1 << 30, 1024),
        (0, 512, 1),
        (1 << 20, 1 << 16, 1),
    ],
    ids=[
        "default-compaction",
        "compact-always",
        "compact-always-a-few-records-per-step",
        "compact-always-in-one-step",
        "compact-always-while-tables-resize-a-cell-per-change",
        "tables-resize-a-cell-per-change",
    ],
)
def test_inserts_rewrites_and_deletes_match_a_dict(
    monkeypatch: pytest.MonkeyPatch, compact_floor: int, step_bytes: int, move_cells: int
) -> None:
    """With compaction forced, most checks run while a compaction is half done (the slid records,
    the gap, the records not reached yet); with tables moving one cell per change, while a table is
    half resized (codes in the old cells and the new): every answer must be the same as without."""
    monkeypatch.setattr(record_arena, "_COMPACT_FLOOR", compact_floor)
    monkeypatch.setattr(record_arena, "_STEP_BYTES", step_bytes)
    monkeypatch.setattr(position_table, "_MOVE_CELLS", move_cells)
    resizing_seen = 0
    compacting_seen = 0
    rng = random.Random(7)
    arena = RecordArena()
    for _ in range(5):
        arena.add_group()
    data: dict[bytes, bytes] = {}
    groups: dict[bytes, tuple[int, int]] = {}
    universe = [f'["c{k % 5}",{{"k":{k}}}]'.encode() for k in range(6000)]
    for step in range(40_000):
        key = rng.choice(universe)
        action = rng.random()
        if action < 0.15:
            if key in data:
                arena.delete_at(arena.locate(key))
            else:
                assert arena.locate(key) == record_arena.ABSENT
            data.pop(key, None)
            groups.pop(key, None)
        else:
            slot = bytes([step % 251]) * rng.choice((0, 1, 7, 8, 9, 30, 200))
            if key in data:
                arena.rewrite_at(arena.locate(key), slot)
            else:
                group, logical = int(key[3:4]), rng.randrange(64)
                arena.insert(key, slot, group, logical)
                groups[key] = (group, logical)
            data[key] = slot
        compacting_seen += arena._scan >= 0
        resizing_seen += arena._keys.old_cells is not None
        if step % 5000 == 4999:
            _check(arena, data, groups)
        assert arena.get(key) == data.get(key)
    _check(arena, data, groups)
    if move_cells == 1:
        assert resizing_seen > 1000, "the keys table was hardly ever mid-resize: the test did not exercise it"
    if compact_floor == 0:
        assert arena.compactions >= 1, "no compaction finished: the test did not exercise it"
        if step_bytes == 512:
            assert compacting_seen > 1000, "compactions were not spread over many calls"
    assert arena.arena_bytes < 4 * sum(len(k) + len(v) + 40 for k, v in data.items()) + (1 << 21)


def test_members_sharing_a_logical_hash_come_oldest_write_first() -> None:
    arena = RecordArena()
    group = arena.add_group()
    for key in (b"a", b"b", b"c"):
        arena.insert(key, b"1", group, 5)
    arena.insert(b"other", b"1", group, 6)
    arena.rewrite_at(arena.locate(b"a"), b"a much longer slot that has to move")
    arena.rewrite_at(arena.locate(b"b"), b"2", newest=False)  # a flag change keeps its place
    assert [m.key for m in arena.members_with(group, 5)] == [b"b", b"c", b"a"]
    assert [m.key for m in arena.members_with(group, 6)] == [b"other"]
    assert arena.members_with(group, 9) == []


def test_the_null_key_is_held_apart_and_listed_nowhere() -> None:
    arena = RecordArena()
    group = arena.add_group()
    arena.insert(None, b"x", None, 0)
    assert arena.get(None) == b"x" and len(arena) == 1
    assert arena.members(group).keys == []
    assert arena.items() == [(None, b"x")]
    arena.delete_at(arena.locate(None))
    assert arena.get(None) is None and len(arena) == 0


def test_a_compaction_is_spread_over_many_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """No single change slides the whole arena: each moves about ``_STEP_BYTES`` of records."""
    monkeypatch.setattr(record_arena, "_COMPACT_FLOOR", 0)
    arena = RecordArena()
    group = arena.add_group()
    keys = [f'["c",{{"k":{k}}}]'.encode() for k in range(20_000)]
    for k, key in enumerate(keys):
        arena.insert(key, b"v" * 20, group, k)
    size = arena.arena_bytes
    for key in keys[: len(keys) // 2 + 1]:  # just over half become garbage: compaction starts
        arena.delete_at(arena.locate(key))
    assert 0 < arena._scan <= record_arena._STEP_BYTES + 200, "the first step slid more than its budget"
    calls = 0
    while arena._scan >= 0:
        arena.insert(f"new-{calls}".encode(), b"", group, 0)
        calls += 1
    assert calls >= size // 2 // record_arena._STEP_BYTES, "compaction finished in fewer steps than its budget allows"
    assert arena.arena_bytes < size * 0.6, "the arena was not cut after the slide"
    for key in keys[len(keys) // 2 + 1 :]:
        assert arena.get(key) == b"v" * 20
    assert sorted(arena.members(group).keys) == sorted(
        keys[len(keys) // 2 + 1 :] + [f"new-{i}".encode() for i in range(calls)]
    )
