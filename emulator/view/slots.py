"""One live record of the view packed into a single ``bytes`` object: its coordinates and its value.

Why: at a million live keys every Python object counts. An ``Entry`` dataclass plus its value bytes
and three boxed ints cost about 250 B per key; a fixed 25-byte header and the value cost 25 +
len(value) inside the view's record arena (``emulator.view.record_arena``), which stores slots in
this layout. ``Entry`` objects are built only when someone reads a key.

The header also says who owns the key (the index of its connector's name in the view, or which
``KeyProblem`` makes Connect ignore it), so an update of a live key needs no parse of the key, and
one flag remembers that an unparseable value was already counted and logged.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from emulator.codec.key_forms import KeyForm
from emulator.codec.keys import KeyProblem

_HEAD: Final = struct.Struct("<qqiIB")  # offset, timestamp_ms, partition, owner, flags
HEAD_SIZE: Final = _HEAD.size

_PROBLEMS: Final = tuple(KeyProblem)
_PROBLEM_BASE: Final = 0xFFFFFF00
MAX_CONNECTORS: Final = _PROBLEM_BASE
"""Owners below this are connector indexes; a view can name up to ~4.29 billion connectors."""

FLAG_UNPARSEABLE_COUNTED: Final = 1
FLAG_FORM_KNOWN: Final = 2
"""The key's form (``emulator.codec.key_forms.KeyForm``) is in bits 2-3: found when the key is first
read, and kept when a record rewrites the key, since it belongs to the key's bytes, not the value."""
_FORM_SHIFT: Final = 2
KEY_FLAGS: Final = FLAG_FORM_KNOWN | 0b1100
"""The flags that describe the key, carried from a key's record to its next one."""


class Head(NamedTuple):
    offset: int
    timestamp_ms: int
    partition: int
    owner: int
    flags: int


_new_head: Final = tuple.__new__


def pack(value: bytes, partition: int, offset: int, timestamp_ms: int, owner: int, flags: int = 0) -> bytes:
    return _HEAD.pack(offset, timestamp_ms, partition, owner, flags) + value


def head(slot: bytes | bytearray, at: int = 0) -> Head:
    """The header of the slot in ``slot`` (or in a larger buffer, starting at ``at``)."""
    return _new_head(Head, _HEAD.unpack_from(slot, at))  # ``Head._make`` without its Python layer


def value_of(slot: bytes) -> bytes:
    return slot[HEAD_SIZE:]


def with_flags(slot: bytes, flags: int) -> bytes:
    offset, timestamp_ms, partition, owner, _ = _HEAD.unpack_from(slot)
    return _HEAD.pack(offset, timestamp_ms, partition, owner, flags) + slot[HEAD_SIZE:]


def problem_owner(problem: KeyProblem) -> int:
    return _PROBLEM_BASE + _PROBLEMS.index(problem)


def owner_problem(owner: int) -> KeyProblem | None:
    """The problem an owner code stands for, or ``None`` if it is a connector index."""
    return _PROBLEMS[owner - _PROBLEM_BASE] if owner >= _PROBLEM_BASE else None


FLAGS_AT: Final = HEAD_SIZE - 1
"""The flags' byte in a slot: ``slot[FLAGS_AT]`` reads them without unpacking the header."""
_FORMS: Final = tuple(KeyForm)


def form_in(flags: int) -> KeyForm | None:
    """The key form these flags hold, or ``None`` if not found yet."""
    return _FORMS[(flags >> _FORM_SHIFT) & 3] if flags & FLAG_FORM_KNOWN else None


def with_form(flags: int, form: KeyForm) -> int:
    return (flags & ~KEY_FLAGS) | FLAG_FORM_KNOWN | (form << _FORM_SHIFT)
