"""An open-addressed multimap from a hash to record positions, in one ``array`` of 32-bit cells.

Why: a ``dict`` entry with its key and value objects costs 80-150 B; a cell here costs 4 B and the
table stays at most half full (a miss probes until an empty cell, and each occupied cell costs a
read of its record), so 8-16 B per record. The table keeps no keys and no
hashes: the records it points at do (``emulator.view.record_arena``), and callers compare them.
Several records may share a hash (a multimap): lookups return every position on the probe path.

A cell is ``EMPTY`` (0), ``DELETED`` (a tombstone, so probe paths stay intact) or a position code
(``position // 8 + 1``; records are 8-byte aligned, so 32-bit cells reach 32 GiB of records).

Resizing is incremental: a table that must grow (or shed tombstones) allocates its new cells and
from then on every change also moves the next ``_MOVE_CELLS`` old cells into them; lookups look in
both until the old cells are empty. A rehash of every cell at once paused the view for 145–275 ms at
1,000,000 keys (benchmarks/RESULTS.md, round 9), and every request waits on the view's lock.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Final

EMPTY: Final = 0
DELETED: Final = 0xFFFFFFFF
MAX_CODE: Final = DELETED - 1
_MOVE_CELLS = 1024
"""Old cells a change moves while a table resizes: about half a millisecond."""


def _zeros(size: int) -> array[int]:
    return array("I", (EMPTY,)) * size


class PositionTable:
    """Linear probing; resizes (or sheds tombstones) before it is half full, to a quarter full."""

    __slots__ = ("_deleted", "_hash_of", "_limit", "_moved", "_used", "cells", "mask", "old_cells", "old_mask")

    def __init__(self, hash_of: Callable[[int], int], size: int = 8) -> None:
        self._hash_of = hash_of
        """The hash of the record a position code points at (read from the record on rehash)."""
        self.cells = _zeros(size)
        """Read directly by the hot loop that probes it (``RecordArena.locate``); changed only here."""
        self.mask = size - 1
        self.old_cells: array[int] | None = None
        """While resizing, the cells not moved yet (moved ones are tombstones); else ``None``."""
        self.old_mask = 0
        self._moved = 0
        """While resizing, how many old cells have been moved."""
        self._limit = size // 2
        """Cells in use in ``cells`` (live or tombstones) that make the next ``add`` resize first."""
        self._used = 0
        """Live codes, in both arrays."""
        self._deleted = 0
        """Tombstones in ``cells``."""

    def __len__(self) -> int:
        return self._used

    def probe(self, h: int) -> list[int]:
        """Every position code on ``h``'s probe path: a superset of the records hashed to ``h``."""
        found = _on_path(self.cells, self.mask, h)
        old = self.old_cells
        if old is not None:
            found += _on_path(old, self.old_mask, h)
        return found

    def add(self, h: int, code: int) -> None:
        if self.old_cells is not None:
            self._move_some()
        if self._used + self._deleted >= self._limit:
            self._resize()
        cells = self.cells
        i = _free_cell(cells, self.mask, h)
        if cells[i] == DELETED:
            self._deleted -= 1
        cells[i] = code
        self._used += 1

    def remove(self, h: int, code: int) -> None:
        cells, i = self._find(h, code)
        cells[i] = DELETED
        self._used -= 1
        if cells is self.cells:
            self._deleted += 1
        if self.old_cells is not None:
            self._move_some()

    def replace(self, h: int, old: int, new: int) -> None:
        cells, i = self._find(h, old)
        cells[i] = new
        if self.old_cells is not None:
            self._move_some()

    def codes(self) -> list[int]:
        """Every position code, in table order."""
        found = [code for code in self.cells if code != EMPTY and code != DELETED]
        if self.old_cells is not None:
            found += [code for code in self.old_cells if code != EMPTY and code != DELETED]
        return found

    def _find(self, h: int, code: int) -> tuple[array[int], int]:
        cells = self.cells
        i = _index_in(cells, self.mask, h, code)
        if i < 0 and self.old_cells is not None:
            cells = self.old_cells
            i = _index_in(cells, self.old_mask, h, code)
        if i < 0:
            raise KeyError(f"position code {code} is not on the probe path of hash {h:#x}")
        return cells, i

    def _resize(self) -> None:
        """New cells, sized so live codes fill at most a quarter; the current ones become the old
        cells, moved over by the next changes. A resize still under way is finished first."""
        while self.old_cells is not None:
            self._move_some()
        size = len(self.cells)
        while (self._used + 1) * 4 > size:
            size *= 2
        self.old_cells, self.old_mask = self.cells, self.mask
        self._moved = 0
        self.cells = _zeros(size)
        self.mask = size - 1
        self._limit = size // 2
        self._deleted = 0
        self._move_some()

    def _move_some(self) -> None:
        """Move the next ``_MOVE_CELLS`` old cells (as tombstones, so the old probe paths still
        reach the rest); drop the old cells once all are moved."""
        old = self.old_cells
        assert old is not None
        start = self._moved
        stop = min(start + _MOVE_CELLS, len(old))
        cells, mask = self.cells, self.mask
        hash_of = self._hash_of
        for j in range(start, stop):
            code = old[j]
            if code in (EMPTY, DELETED):
                continue
            i = _free_cell(cells, mask, hash_of(code))
            if cells[i] == DELETED:
                self._deleted -= 1
            cells[i] = code
            old[j] = DELETED
        self._moved = stop
        if stop == len(old):
            self.old_cells = None
            self.old_mask = 0


def _free_cell(cells: array[int], mask: int, h: int) -> int:
    """The first empty cell or tombstone on ``h``'s probe path."""
    i = h & mask
    while True:
        current = cells[i]
        if current in (EMPTY, DELETED):
            return i
        i = (i + 1) & mask


def _index_in(cells: array[int], mask: int, h: int, code: int) -> int:
    """Where ``code`` sits on ``h``'s probe path, or -1."""
    i = h & mask
    while True:
        current = cells[i]
        if current == code:
            return i
        if current == EMPTY:
            return -1
        i = (i + 1) & mask


def _on_path(cells: array[int], mask: int, h: int) -> list[int]:
    i = h & mask
    found: list[int] = []
    while True:
        code = cells[i]
        if code == EMPTY:
            return found
        if code != DELETED:
            found.append(code)
        i = (i + 1) & mask
