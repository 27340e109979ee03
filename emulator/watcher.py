"""Read-your-writes: wait until the view has applied the records a write produced.

The log acknowledges a write before the reader thread has delivered it to the view. A client that
PATCHes and then GETs must see its own write (architecture: "a write returns only after the
broker acked it and the view has applied it"), so the writer waits here for its positions.
Waiters are asyncio futures resolved from the reader thread with ``call_soon_threadsafe``, which
keeps the event loop free while waiting.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping

from emulator.records import Position


class PositionWatcher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._applied: dict[int, int] = {}
        self._waiters: list[tuple[dict[int, int], asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def applied(self) -> dict[int, int]:
        """Next unapplied offset per partition."""
        with self._lock:
            return dict(self._applied)

    def advance(self, positions: Mapping[int, int]) -> None:
        """Record that every offset below ``positions[p]`` has been applied; wake satisfied waiters.

        Called by the reader thread after it applied a batch.
        """
        with self._lock:
            for partition, nxt in positions.items():
                if nxt > self._applied.get(partition, 0):
                    self._applied[partition] = nxt
            still: list[tuple[dict[int, int], asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
            ready = []
            for waiter in self._waiters:
                if self._satisfied(waiter[0]):
                    ready.append(waiter)
                else:
                    still.append(waiter)
            self._waiters = still
        for _, loop, future in ready:
            loop.call_soon_threadsafe(_resolve, future)

    def _satisfied(self, needed: Mapping[int, int]) -> bool:
        return all(self._applied.get(p, 0) >= nxt for p, nxt in needed.items())

    async def wait_for(self, positions: Iterable[Position], timeout_s: float) -> None:
        """Return once every position has been applied; ``TimeoutError`` after ``timeout_s``."""
        needed: dict[int, int] = {}
        for pos in positions:
            needed[pos.partition] = max(needed.get(pos.partition, 0), pos.offset + 1)
        if not needed:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._satisfied(needed):
                return
            self._waiters.append((needed, loop, future))
        try:
            await asyncio.wait_for(future, timeout_s)
        finally:
            with self._lock:
                self._waiters = [w for w in self._waiters if w[2] is not future]


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
