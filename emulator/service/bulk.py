"""Passes over a request's items that leave the event loop when there are many of them.

A request's Python work runs on the event loop and holds every other request meanwhile. For the
common small request that is still the cheapest place: a hop to a worker thread costs the loop more
than the work. A pass over thousands of items — planning a PATCH of 10,000 partitions or the reset
of a 10,000-partition connector, their audit notes, a dry run's body — takes tens to hundreds of
milliseconds, so above ``BULK_ITEMS`` items it runs on a worker thread instead, and the loop keeps
answering between the thread's turns (benchmarks/RESULTS.md, round 17).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

BULK_ITEMS = 1000
"""Above this many items a pass runs on a worker thread (about 10 ms of work at ~10 µs an item)."""


async def bulk_pass(items: int, work: Callable[[], T]) -> T:
    """``work()``, on a worker thread when it passes over more than ``BULK_ITEMS`` items."""
    if items > BULK_ITEMS:
        return await asyncio.to_thread(work)
    return work()
