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
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import TypeVar

from emulator.model.errors import LogTimeout

T = TypeVar("T")
Item = TypeVar("Item")

BULK_ITEMS = 1000
"""Above this many items a pass runs on a worker thread (about 10 ms of work at ~10 µs an item)."""
BULK_BYTES = 64 * 1024
"""Above this many bytes too: the JSON codecs, murmur2 and the audit's listing take ~1 µs a byte or
more in Python, so 64 KiB is some tens of ms (the size above which a body is parsed off the loop)."""

_request_bytes: ContextVar[int] = ContextVar("connect_offsets_request_bytes", default=0)
_stop_at: ContextVar[float | None] = ContextVar("connect_offsets_bulk_stop_at", default=None)
"""The running pass's deadline (``time.monotonic``), in the worker thread's copy of the request's context."""

CHECK_EVERY = 256
"""Items between two looks at the clock in ``abandonable``: ~2.5 ms of work alone, but ten big writes at once
share the interpreter, and each pass then gets a tenth of it."""


class PassAbandoned(Exception):
    """A pass on a worker thread stopped at its request's deadline: the planning of a PATCH of 200,000
    partitions took 15-27 s on a loaded machine, and the request was answered 503 only after it, its
    thread's CPU taken from every other request meanwhile. The caller answers with its own error."""


def note_request_bytes(size: int) -> None:
    """The current request handles ``size`` bytes (its body, or records it read): every later
    ``bulk_pass`` of the request leaves the loop when that passes ``BULK_BYTES``. Request-scoped: each
    request runs in a task of its own, whose context starts without it."""
    if size > _request_bytes.get():
        _request_bytes.set(size)


def is_bulk(items: int, size: int = 0) -> bool:
    """Whether a pass over ``items`` items (``size`` bytes) of the current request leaves the loop."""
    return items > BULK_ITEMS or size > BULK_BYTES or _request_bytes.get() > BULK_BYTES


async def bulk_pass(items: int, work: Callable[[], T], size: int = 0, stop_at: float | None = None) -> T:
    """``work()``, on a worker thread when it passes over more than ``BULK_ITEMS`` items or, with the
    request's body or the records read (``size``), more than ``BULK_BYTES`` bytes.

    ``stop_at`` (``time.monotonic``): the loops of ``work`` that go through ``abandonable`` raise
    ``PassAbandoned`` once it has passed. Only off the loop: a pass small enough for the loop ends in
    milliseconds."""
    if is_bulk(items, size):
        return await in_thread(work, stop_at)
    return work()


async def in_thread(work: Callable[[], T], stop_at: float | None = None) -> T:
    """``work()`` on a worker thread; ``stop_at``: as for ``bulk_pass``."""
    if stop_at is None:
        return await asyncio.to_thread(work)
    token = _stop_at.set(stop_at)  # asyncio.to_thread runs ``work`` in a copy of this context
    try:
        return await asyncio.to_thread(work)
    finally:
        _stop_at.reset(token)


def abandoned(what: str, seconds: float) -> LogTimeout:
    """What a ``PassAbandoned`` is to the client: 503 ``log_timeout``, nothing written. A request that
    big will not fit the next time either, so the message says what would make it fit. (A function
    the caller raises ``from None`` in its ``except``, not a context manager: one around every PATCH
    costs its event loop a generator.)"""
    return LogTimeout(
        f"{what} took longer than {seconds:g} s (--write-timeout); nothing was written "
        "(send it in smaller requests, or give the daemon a longer --write-timeout)"
    )


def abandonable(items: Iterable[Item]) -> Iterable[Item]:
    """``items``, for a long loop of a pass: within ``bulk_pass(..., stop_at=...)`` on a worker thread,
    ``PassAbandoned`` once that deadline has passed (looked at every ``CHECK_EVERY`` items); elsewhere
    ``items`` itself, at no cost."""
    stop_at = _stop_at.get()
    return items if stop_at is None else _until(items, stop_at)


def _until(items: Iterable[Item], stop_at: float) -> Iterator[Item]:
    for i, item in enumerate(items):
        if not i % CHECK_EVERY and time.monotonic() > stop_at:
            raise PassAbandoned
        yield item
