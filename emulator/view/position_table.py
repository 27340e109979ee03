"""An open-addressed multimap from a hash to record positions, in one ``array`` of 32-bit cells.

Why: a ``dict`` entry with its key and value objects costs 80-150 B; a cell here costs 4 B and the
table stays at most half full (a miss probes until an empty cell, and each occupied cell costs a
read of its record), so 8-16 B per record. The table keeps no keys and no
hashes: the records it points at do (``emulator.view.record_arena``), and callers compare them.
Several records may share a hash (a multimap): lookups return every position on the probe path.

A cell is ``EMPTY`` (0), ``DELETED`` (a tombstone, so probe paths stay intact) or a position code
(``position // 8 + 1``; records are 8-byte aligned, so 32-bit cells reach 32 GiB of records).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Final

EMPTY: Final = 0
DELETED: Final = 0xFFFFFFFF
MAX_CODE: Final = DELETED - 1


def _zeros(size: int) -> array[int]:
    return array("I", (EMPTY,)) * size


class PositionTable:
    """Linear probing; grows (or sheds tombstones) before it is half full, to a quarter full."""

    __slots__ = ("_deleted", "_hash_of", "_limit", "_used", "cells", "mask")

    def __init__(self, hash_of: Callable[[int], int], size: int = 8) -> None:
        self._hash_of = hash_of
        """The hash of the record a position code points at (read from the record on rehash)."""
        self.cells = _zeros(size)
        """Read directly by the hot loop that probes it (``RecordArena.locate``); changed only here."""
        self.mask = size - 1
        self._limit = size // 2
        """Cells in use (live or tombstones) that make the next ``add`` rebuild first."""
        self._used = 0
        self._deleted = 0

    def __len__(self) -> int:
        return self._used

    def probe(self, h: int) -> list[int]:
        """Every position code on ``h``'s probe path: a superset of the records hashed to ``h``."""
        cells, mask = self.cells, self.mask
        i = h & mask
        found: list[int] = []
        while True:
            code = cells[i]
            if code == EMPTY:
                return found
            if code != DELETED:
                found.append(code)
            i = (i + 1) & mask

    def add(self, h: int, code: int) -> None:
        if self._used + self._deleted >= self._limit:
            self._rebuild()
        cells, mask = self.cells, self.mask
        i = h & mask
        while True:
            current = cells[i]
            if current == EMPTY:
                break
            if current == DELETED:
                self._deleted -= 1
                break
            i = (i + 1) & mask
        cells[i] = code
        self._used += 1

    def remove(self, h: int, code: int) -> None:
        i = self._index_of(h, code)
        self.cells[i] = DELETED
        self._used -= 1
        self._deleted += 1

    def replace(self, h: int, old: int, new: int) -> None:
        self.cells[self._index_of(h, old)] = new

    def codes(self) -> list[int]:
        """Every position code, in table order."""
        return [code for code in self.cells if code != EMPTY and code != DELETED]

    def remap(self, new_code: Callable[[int], int]) -> None:
        """Point every cell at where its record moved (compaction keeps hashes, so cells stay put)."""
        cells = self.cells
        for i, code in enumerate(cells):
            if code != EMPTY and code != DELETED:
                cells[i] = new_code(code)

    def _index_of(self, h: int, code: int) -> int:
        cells, mask = self.cells, self.mask
        i = h & mask
        while True:
            current = cells[i]
            if current == code:
                return i
            if current == EMPTY:
                raise KeyError(f"position code {code} is not on the probe path of hash {h:#x}")
            i = (i + 1) & mask

    def _rebuild(self) -> None:
        """Rehash without tombstones, doubling the size until live cells fill at most a quarter of it."""
        old = self.cells
        size = len(old)
        while (self._used + 1) * 4 > size:
            size *= 2
        cells = self.cells = _zeros(size)
        mask = self.mask = size - 1
        self._limit = size // 2
        hash_of = self._hash_of
        for code in old:  # no list of the codes: at a million records it would be ~36 MB of ints
            if code in (EMPTY, DELETED):
                continue
            i = hash_of(code) & mask
            while cells[i] != EMPTY:
                i = (i + 1) & mask
            cells[i] = code
        self._deleted = 0
