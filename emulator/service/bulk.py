"""Passes over a request's items that leave the event loop when there are many of them, or much.

A request's Python work runs on the event loop and holds every other request meanwhile. For the
common small request that is still the cheapest place: a hop to a worker thread costs the loop more
than the work. A pass over thousands of items — planning a PATCH of 10,000 partitions or the reset
of a 10,000-partition connector, their audit notes, a dry run's body — takes tens to hundreds of
milliseconds, so above ``BULK_ITEMS`` items it runs on a worker thread instead, and the loop keeps
answering between the thread's turns (benchmarks/RESULTS.md, round 17).

The work grows with bytes as well as items: one partition whose map has 100,000 keys (a 3.3 MB
PATCH) cost ~0.3 s of planning and audit notes and ~0.6 s of reading back for its GET, one item
each. So a pass also leaves the loop when it handles more than ``BULK_BYTES``: the request's body
(``note_request_bytes``, called as the body is read) or the records it reads (``size``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

BULK_ITEMS = 1000
"""Above this many items a pass runs on a worker thread (about 10 ms of work at ~10 µs an item)."""
BULK_BYTES = 64 * 1024
"""Above this many bytes too: the JSON codecs, murmur2 and the audit's listing take ~1 µs a byte or
more in Python, so 64 KiB is some tens of ms (the size above which a body is parsed off the loop)."""

_request_bytes: ContextVar[int] = ContextVar("connect_offsets_request_bytes", default=0)


def note_request_bytes(size: int) -> None:
    """The current request handles ``size`` bytes (its body, or records it read): every later
    ``bulk_pass`` of the request leaves the loop when that passes ``BULK_BYTES``. Request-scoped: each
    request runs in a task of its own, whose context starts without it."""
    if size > _request_bytes.get():
        _request_bytes.set(size)


def is_bulk(items: int, size: int = 0) -> bool:
    """Whether a pass over ``items`` items (``size`` bytes) of the current request leaves the loop."""
    return items > BULK_ITEMS or size > BULK_BYTES or _request_bytes.get() > BULK_BYTES


async def bulk_pass(items: int, work: Callable[[], T], size: int = 0) -> T:
    """``work()``, on a worker thread when it passes over more than ``BULK_ITEMS`` items or, with the
    request's body or the records read (``size``), more than ``BULK_BYTES`` bytes."""
    if is_bulk(items, size):
        return await asyncio.to_thread(work)
    return work()
