"""Write-through: the daemon's acknowledged writes show at once, and the reader's later delivery
of the same or older records never undoes them (per-partition offset order decides, as in Connect)."""

from __future__ import annotations

from emulator.model.records import LogRecord
from emulator.view.offset_view import OffsetView

KEY = b'["c",{"f":"a"}]'


def rec(offset: int, value: bytes | None, partition: int = 3) -> LogRecord:
    return LogRecord(KEY, value, partition, offset, 0)


def offset_of(view: OffsetView) -> object:
    rows = view.offsets("c")
    return rows[0].offset if rows else None


def test_an_acknowledged_write_is_visible_before_the_reader_delivers_it() -> None:
    view = OffsetView()
    view.apply([rec(5, b'{"p":5}')])
    view.apply_acknowledged([rec(10, b'{"p":10}')])
    assert offset_of(view) == {"p": 10}


def test_older_records_delivered_after_a_write_through_do_not_undo_it() -> None:
    view = OffsetView()
    view.apply_acknowledged([rec(10, b'{"p":10}')])
    view.apply([rec(7, b'{"p":7}')])
    assert offset_of(view) == {"p": 10}
    view.apply([rec(10, b'{"p":10}'), rec(11, b'{"p":11}')])
    assert offset_of(view) == {"p": 11}, "records after the write-through apply normally"


def test_a_write_through_tombstone_keeps_the_key_deleted_until_the_reader_passes_it() -> None:
    view = OffsetView()
    view.apply([rec(5, b'{"p":5}')])
    view.apply_acknowledged([rec(10, None)])
    assert view.offsets("c") == []
    view.apply([rec(7, b'{"p":7}')])
    assert view.offsets("c") == [], "an older value in flight must not resurrect the key"
    view.apply([rec(10, None), rec(12, b'{"p":12}')])
    assert offset_of(view) == {"p": 12}


def test_counters_and_listeners_see_each_record_once_from_the_reader() -> None:
    view = OffsetView()
    seen: list[int] = []
    view.add_listener(lambda records: seen.extend(r.offset for r in records))
    view.apply_acknowledged([rec(0, b'{"p":0}')])
    assert view.stats.records_applied == 0 and seen == []
    view.apply([rec(0, b'{"p":0}')])
    assert view.stats.records_applied == 1 and seen == [0]


def test_other_partitions_are_not_ordered_against_each_other() -> None:
    view = OffsetView()
    view.apply_acknowledged([rec(10, b'{"p":10}', partition=3)])
    view.apply([rec(1, b'{"p":1}', partition=4)])  # the same key in another partition: log order wins
    assert offset_of(view) == {"p": 1}


def test_a_tombstone_the_guard_skips_is_still_counted_once() -> None:
    """Another daemon's DELETE between two PATCHes of this one: the reader delivers the tombstone after
    the second PATCH's write-through, so the guard skips it (it is older), yet it is a tombstone in the
    log. The counters count what the reader delivers, as ``records_applied`` does (QA D4: this daemon
    counted 1 of 30 such tombstones, a restarted one all 30)."""
    view = OffsetView()
    view.apply_acknowledged([rec(5, b'{"p":5}')])
    view.apply([rec(5, b'{"p":5}')])
    view.apply_acknowledged([rec(7, b'{"p":7}')])  # our next PATCH, acknowledged before the reader saw 6
    view.apply([rec(6, None), rec(7, b'{"p":7}'), rec(8, b"")])
    view.apply_acknowledged([rec(10, b'{"p":10}')])
    view.apply([rec(9, b"")])  # an empty value the guard skips counts as one too
    assert offset_of(view) == {"p": 10}, "the older tombstone did not undo the newer write"
    assert (view.stats.records_applied, view.stats.tombstones_applied, view.stats.empty_values) == (5, 1, 2)
    view.apply([rec(10, b'{"p":10}')])
    assert (view.stats.records_applied, view.stats.tombstones_applied, view.stats.empty_values) == (6, 1, 2)
