"""The iteration order of a ``java.util.HashMap`` of strings, as ``JsonConverter`` builds one.

Why it matters: Connect's GET ``/offsets`` does not read the key bytes a record came with. It reads
the partition back into a ``HashMap`` (``JsonConverter.toConnectData``, puts in document order), then
serializes that map again to look its value up (``OffsetStorageReaderImpl``). For a partition of two
or more keys, the bytes it looks up follow the ``HashMap``'s order, not the order the connector wrote
(docs/protocol.md, §1.5). Knowing that order tells which of several byte-different keys Connect
reads (``emulator.codec.key_forms``).

The order is the JDK's (8 to 25 alike, checked against a JVM in tests/compat/test_key_forms.py):
buckets by ``(h ^ h >>> 16) & (capacity - 1)`` of ``String.hashCode`` ascending, insertion order
within a bucket. The capacity starts at 16 and doubles when the size passes 3/4 of it, or when a
bucket reaches 9 entries in a table under 64. A bucket of 9 entries in a larger table becomes a
red-black tree whose iteration order this module does not model: such maps (only crafted keys make
them) answer ``None``, "order unknown".
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from typing import Any

_INITIAL_CAPACITY = 16
_TREEIFY_AT = 9  # entries in one bucket: HashMap.TREEIFY_THRESHOLD (8) exceeded by the new one
_MIN_TREEIFY_CAPACITY = 64


_CACHED_UP_TO = 64  # characters: field names repeat across a connector's partitions; long text is rare


def string_hash(text: str) -> int:
    """``String.hashCode`` (over UTF-16 code units) as an unsigned 32-bit int."""
    return _short_hash(text) if len(text) <= _CACHED_UP_TO else _hash(text)


@functools.lru_cache(maxsize=4096)
def _short_hash(text: str) -> int:
    return _hash(text)


def _hash(text: str) -> int:
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def _spread(h: int) -> int:
    return h ^ (h >> 16)


def hashmap_order(keys: Iterable[str]) -> list[str] | None:
    """The iteration order of a ``new HashMap<>()`` after ``put`` of ``keys`` in this order (distinct
    keys), or ``None`` where a bucket would become a tree."""
    capacity = _INITIAL_CAPACITY
    buckets: dict[int, list[tuple[str, int]]] = {}
    for size, key in enumerate(keys, start=1):
        h = _spread(string_hash(key))
        bucket = buckets.setdefault(h & (capacity - 1), [])
        bucket.append((key, h))
        if len(bucket) >= _TREEIFY_AT:
            if capacity >= _MIN_TREEIFY_CAPACITY:
                return None
            capacity, buckets = _resized(capacity, buckets)
        if size > capacity * 3 // 4:
            capacity, buckets = _resized(capacity, buckets)
    return [key for index in sorted(buckets) for key, _ in buckets[index]]


def _resized(capacity: int, buckets: dict[int, list[tuple[str, int]]]) -> tuple[int, dict[int, list[tuple[str, int]]]]:
    """``HashMap.resize``: each bucket splits in two, every entry keeping its place relative to the
    others of its new bucket (each new bucket takes entries from one old bucket only)."""
    capacity *= 2
    split: dict[int, list[tuple[str, int]]] = {}
    for entries in buckets.values():
        for entry in entries:
            split.setdefault(entry[1] & (capacity - 1), []).append(entry)
    return capacity, split


_UNKNOWN = object()


def as_read_back(value: Any) -> Any:
    """``value`` (as ``loads_lenient`` parses it) with every map in the order Connect's ``HashMap``
    iterates it, so ``dumps`` of it gives the bytes Connect writes back; ``None`` if some map's order
    is unknown (see ``hashmap_order``)."""
    result = _reordered(value)
    return None if result is _UNKNOWN else result


_LIST_DONE = object()
"""On ``_reordered``'s stack: the list beside it has its items reordered, ready to assemble."""


def _reordered(value: Any) -> Any:
    """``as_read_back``'s work, without recursion: children before their container on a stack of its
    own, as a partition may nest as deep as Jackson reads (1,000 levels), beyond Python's recursion
    limit. Each entry is ``(item, None)`` to visit, ``(map, its key order)`` or ``(list,
    _LIST_DONE)`` to assemble from the last results."""
    done: list[Any] = []
    stack: list[tuple[Any, Any]] = [(value, None)]
    while stack:
        item, state = stack.pop()
        if state is not None:
            size = len(item)
            children = done[len(done) - size :]
            del done[len(done) - size :]
            done.append(children if state is _LIST_DONE else dict(zip(state, children, strict=True)))
        elif type(item) is dict:
            order = hashmap_order(item) if len(item) > 1 else list(item)
            if order is None:
                return _UNKNOWN
            stack.append((item, order))
            stack.extend((item[key], None) for key in reversed(order))
        elif type(item) is list:
            stack.append((item, _LIST_DONE))
            stack.extend((element, None) for element in reversed(item))
        else:
            done.append(item)
    return done[0]
