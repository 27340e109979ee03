"""The view's live records in one ``bytearray``: raw key → slot, and per connector, by logical partition.

Why: at a million live keys a ``dict`` of key ``bytes`` → slot ``bytes`` plus a per-connector dict
of logical hashes cost about 290 B per key, most of it object headers, dict entries and boxed ints
(benchmarks/RESULTS.md, round 7). Here a record is its key and slot bytes behind a 28-byte header,
and two ``PositionTable``\\s of 32-bit cells find it: one by the hash of the raw key (lookups by
exact bytes, as ``KafkaOffsetBackingStore.data``), one per group (connector) by the hash of the
logical partition (listing, alters, aliases). About 150 B per key for Connect-shaped keys.

Record layout, 8-byte aligned: ``<IIIIIIq`` key length, capacity (bytes reserved for the slot),
slot length (``DEAD`` once the record is garbage), key hash, logical hash, group, sequence; then the
key, then the slot padded to the capacity. The sequence orders a group's aliases oldest-first by
their latest write. A rewrite that fits the capacity is in place; a longer one moves the record to
the end and leaves garbage.

Compaction is incremental, so no call pauses for long: once garbage outweighs live records, every
change also slides at most ``_STEP_BYTES`` of records down over the garbage in front of them, in
place, re-pointing each moved record's two table cells (the header names its hashes and its group,
so nothing else is scanned); when the slide reaches the end the arena is cut there. Between steps
the bytes between the slid records and the rest are a gap nothing points at. In one pass, as first
written, the same work paused every request for 2.5 s at 1,000,000 live records.

Not thread-safe: the view's lock guards every call.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, NamedTuple, TypeVar

from emulator.view.position_table import DELETED, EMPTY, MAX_CODE, PositionTable

_HEAD: Final = struct.Struct("<IIIIIIq")
_HEAD_SIZE: Final = _HEAD.size
_KEY_FIELDS: Final = struct.Struct("<I8xI")  # key length and key hash, for probing
_SLOT_LEN: Final = struct.Struct("<I")
_SLOT_LEN_AT: Final = 8
_DEAD: Final = 0xFFFFFFFF
_HASH_MASK = 0xFFFFFFFF
"""Raw-key and logical hashes are kept to 32 bits (tests set it to 0 to make every hash collide)."""
_COMPACT_FLOOR = 1 << 20
"""Garbage below this is never worth a compaction pass."""
_STEP_BYTES = 1 << 16
"""Arena bytes one compaction step slides past: a few hundred records, about a millisecond."""
_NO_GROUP: Final = 0xFFFFFFFF

_PAD: Final = tuple(bytes(n) for n in range(8))

_T = TypeVar("_T")

ABSENT: Final = -1
NULL_KEY: Final = -2
"""The position ``locate`` gives the live ``null`` key, which is held apart from the arena."""


class Member(NamedTuple):
    """A live record of a group, as listing and alters read it."""

    key: bytes
    slot: bytes
    logical: int
    sequence: int


class Members(NamedTuple):
    """A group's live records: item ``i`` of each list belongs to one record."""

    keys: list[bytes]
    slots: list[bytes]
    logicals: list[int]
    sequences: list[int]


class RecordArena:
    __slots__ = (
        "_arena",
        "_dest",
        "_garbage",
        "_group_bytes",
        "_groups",
        "_keys",
        "_none_slot",
        "_scan",
        "_sequence",
        "compactions",
    )

    def __init__(self) -> None:
        self._arena = bytearray()
        self._keys = PositionTable(self._key_hash_at)
        self._groups: list[PositionTable] = []
        self._group_bytes: list[int] = []
        """Per group, the bytes of its live keys and slots, kept with every change: a listing decides
        whether it leaves the event loop by them, and counting them meant reading every member."""
        self._none_slot: bytes | None = None
        """The record of the ``null`` key, if live (Connect ignores it; exports keep it)."""
        self._garbage = 0
        """Bytes of dead records not yet slid past by compaction."""
        self._scan = -1
        """While compacting, the next record to slide (-1: not compacting)."""
        self._dest = 0
        """While compacting, where that record goes: ``[_dest, _scan)`` is the gap."""
        self._sequence = 0
        self.compactions = 0
        """Compactions finished so far."""

    def __len__(self) -> int:
        return len(self._keys) + (self._none_slot is not None)

    @property
    def arena_bytes(self) -> int:
        return len(self._arena)

    # -- lookups --------------------------------------------------------------------------
    def locate(self, key: bytes | None) -> int:
        """Where a live key's record is (for ``slot_at``, ``rewrite_at``, ``delete_at``), or ``ABSENT``.

        The probe is inline (this runs for every record applied): cells in table order from the
        key's hash until an empty one, comparing the stored hash and length before the bytes; then
        the same in the old cells of a table that is resizing."""
        if key is None:
            return ABSENT if self._none_slot is None else NULL_KEY
        khash = hash(key) & _HASH_MASK
        table = self._keys
        arena = self._arena
        size = len(key)
        fields = _KEY_FIELDS.unpack_from
        for cells, mask in ((table.cells, table.mask), (table.old_cells, table.old_mask)):
            if cells is None:  # the table is not resizing: no old cells to look in
                break
            i = khash & mask
            while True:
                code = cells[i]
                if code == EMPTY:
                    break
                if code != DELETED:
                    position = (code - 1) << 3
                    klen, stored = fields(arena, position)
                    if stored == khash and klen == size and arena.startswith(key, position + _HEAD_SIZE):
                        return position
                i = (i + 1) & mask
        return ABSENT

    def read_slot(self, position: int, read: Callable[[bytes | bytearray, int], _T]) -> _T:
        """``read(buffer, at)`` on the slot of a live record, without copying it out (a slot's
        header is read for every record applied)."""
        if position == NULL_KEY:
            assert self._none_slot is not None
            return read(self._none_slot, 0)
        arena = self._arena
        return read(arena, position + _HEAD_SIZE + _KEY_FIELDS.unpack_from(arena, position)[0])

    def slot_at(self, position: int) -> bytes:
        if position == NULL_KEY:
            assert self._none_slot is not None
            return self._none_slot
        arena = self._arena
        klen, _, slen = _HEAD.unpack_from(arena, position)[:3]
        start = position + _HEAD_SIZE + klen
        return bytes(arena[start : start + slen])

    def get(self, key: bytes | None) -> bytes | None:
        """The slot of a live key, or ``None``."""
        position = self.locate(key)
        return None if position == ABSENT else self.slot_at(position)

    def items(self) -> list[tuple[bytes | None, bytes]]:
        arena = self._arena
        found: list[tuple[bytes | None, bytes]] = []
        for code in self._keys.codes():
            position = (code - 1) << 3
            klen = _HEAD.unpack_from(arena, position)[0]
            start = position + _HEAD_SIZE
            found.append((bytes(arena[start : start + klen]), self.slot_at(position)))
        if self._none_slot is not None:
            found.append((None, self._none_slot))
        return found

    def members(self, group: int) -> Members:
        """Every live record of a group, in table order, as parallel lists (a listing of a
        10,000-partition connector reads them all: no object per record beyond its two bytes)."""
        keys: list[bytes] = []
        slots: list[bytes] = []
        logicals: list[int] = []
        sequences: list[int] = []
        unpack = _HEAD.unpack_from
        with memoryview(self._arena) as arena:
            for code in self._groups[group].codes():
                position = (code - 1) << 3
                klen, _, slen, _, logical, _, sequence = unpack(arena, position)
                start = position + _HEAD_SIZE
                end = start + klen
                keys.append(bytes(arena[start:end]))
                slots.append(bytes(arena[end : end + slen]))
                logicals.append(logical)
                sequences.append(sequence)
        return Members(keys, slots, logicals, sequences)

    def extent(self, group: int) -> tuple[int, int]:
        """The group's live records and the bytes of their keys and slots, without reading them."""
        return len(self._groups[group]), self._group_bytes[group]

    def members_with(self, group: int, logical: int) -> list[Member]:
        """The group's records whose logical hash is ``logical`` (aliases, or a collision), oldest first."""
        logical &= _HASH_MASK
        found = []
        arena = self._arena
        for code in self._groups[group].probe(logical):
            if _HEAD.unpack_from(arena, (code - 1) << 3)[4] == logical:
                found.append(self._member(code))
        found.sort(key=lambda member: member.sequence)
        return found

    # -- changes --------------------------------------------------------------------------
    def add_group(self) -> int:
        group = len(self._groups)
        self._groups.append(PositionTable(self._logical_hash_at))
        self._group_bytes.append(0)
        return group

    def insert(self, key: bytes | None, slot: bytes, group: int | None, logical: int) -> None:
        """A key not live before; ``group`` lists it under ``logical`` (``None``: listed nowhere)."""
        if key is None:
            self._none_slot = slot
            return
        khash = hash(key) & _HASH_MASK
        logical &= _HASH_MASK
        code = self._append(key, slot, khash, logical, _NO_GROUP if group is None else group)
        self._keys.add(khash, code)
        if group is not None:
            self._groups[group].add(logical, code)
            self._group_bytes[group] += len(key) + len(slot)
        if self._scan >= 0:
            self._compact_step((code - 1) << 3)

    def rewrite_at(self, position: int, slot: bytes, newest: bool = True) -> None:
        """A live record's new slot; ``newest`` makes it the latest write among its aliases. Its group
        is the one its header stores (``insert``'s), so no caller can re-point the wrong group."""
        if position == NULL_KEY:
            self._none_slot = slot
            return
        arena = self._arena
        klen, capacity, old_len, khash, logical, stored_group, sequence = _HEAD.unpack_from(arena, position)
        if stored_group != _NO_GROUP:
            self._group_bytes[stored_group] += len(slot) - old_len
        if newest:
            self._sequence += 1
            sequence = self._sequence
        if len(slot) <= capacity:
            start = position + _HEAD_SIZE + klen
            arena[start : start + len(slot)] = slot
            _HEAD.pack_into(arena, position, klen, capacity, len(slot), khash, logical, stored_group, sequence)
            if self._scan >= 0:
                self._compact_step(None)
            return
        key = bytes(arena[position + _HEAD_SIZE : position + _HEAD_SIZE + klen])
        old = (position >> 3) + 1
        new = self._append(key, slot, khash, logical, stored_group, sequence)
        self._bury(position)
        self._keys.replace(khash, old, new)
        if stored_group != _NO_GROUP:
            self._groups[stored_group].replace(logical, old, new)
        self._maybe_compact((new - 1) << 3)

    def delete_at(self, position: int) -> None:
        if position == NULL_KEY:
            self._none_slot = None
            return
        code = (position >> 3) + 1
        klen, _, slen, khash, logical, group, _ = _HEAD.unpack_from(self._arena, position)
        self._keys.remove(khash, code)
        if group != _NO_GROUP:
            self._groups[group].remove(logical, code)
            self._group_bytes[group] -= klen + slen
        self._bury(position)
        self._maybe_compact()

    # -- internals ------------------------------------------------------------------------
    def _member(self, code: int) -> Member:
        arena = self._arena
        position = (code - 1) << 3
        klen, _, slen, _, logical, _, sequence = _HEAD.unpack_from(arena, position)
        start = position + _HEAD_SIZE
        end = start + klen
        return Member(bytes(arena[start:end]), bytes(arena[end : end + slen]), logical, sequence)

    def _append(
        self, key: bytes, slot: bytes, khash: int, logical: int, group: int, sequence: int | None = None
    ) -> int:
        arena = self._arena
        position = len(arena)
        code = (position >> 3) + 1
        if code > MAX_CODE:
            raise OverflowError("the view's record arena is full (32 GiB)")
        if sequence is None:
            self._sequence += 1
            sequence = self._sequence
        padding = -(_HEAD_SIZE + len(key) + len(slot)) & 7
        arena += b"".join(
            (
                _HEAD.pack(len(key), len(slot) + padding, len(slot), khash, logical, group, sequence),
                key,
                slot,
                _PAD[padding],
            )
        )
        return code

    def _bury(self, position: int) -> None:
        arena = self._arena
        klen, capacity = _HEAD.unpack_from(arena, position)[:2]
        _SLOT_LEN.pack_into(arena, position + _SLOT_LEN_AT, _DEAD)
        self._garbage += _HEAD_SIZE + klen + capacity

    def _maybe_compact(self, appended_at: int | None = None) -> None:
        if self._scan < 0:
            garbage = self._garbage
            if garbage <= _COMPACT_FLOOR or garbage * 2 <= len(self._arena):
                return
            self._scan = self._dest = 0
        self._compact_step(appended_at)

    def _compact_step(self, appended_at: int | None) -> None:
        """Slide the next ``_STEP_BYTES`` of records down over the gap; cut the arena at the end.

        ``appended_at``: where the calling change appended a record. The step also covers twice its
        size, so the slide gains on the arena's end by at least ``_STEP_BYTES`` a change however
        large the records appended meanwhile, and always finishes."""
        arena = self._arena
        scan, dest = self._scan, self._dest
        end = len(arena)
        budget = _STEP_BYTES if appended_at is None else _STEP_BYTES + 2 * (end - appended_at)
        stop = min(scan + budget, end)
        keys, groups = self._keys, self._groups
        unpack = _HEAD.unpack_from
        while scan < stop:
            klen, capacity, slen, khash, logical, group = unpack(arena, scan)[:6]
            size = _HEAD_SIZE + klen + capacity
            if slen == _DEAD:
                self._garbage -= size
            else:
                if dest != scan:
                    arena[dest : dest + size] = arena[scan : scan + size]
                    old, new = (scan >> 3) + 1, (dest >> 3) + 1
                    keys.replace(khash, old, new)
                    if group != _NO_GROUP:
                        groups[group].replace(logical, old, new)
                dest += size
            scan += size
        if scan < end:
            self._scan, self._dest = scan, dest
            return
        del arena[dest:]
        self._scan, self._dest = -1, 0
        self.compactions += 1

    def _key_hash_at(self, code: int) -> int:
        return int(_HEAD.unpack_from(self._arena, (code - 1) << 3)[3])

    def _logical_hash_at(self, code: int) -> int:
        return int(_HEAD.unpack_from(self._arena, (code - 1) << 3)[4])
