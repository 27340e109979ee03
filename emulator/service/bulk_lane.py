"""Large writes take turns, in the order their bodies arrived.

A large write's work is Python on worker threads (``service/bulk.py``): reading its body, planning its
records, the sink checks, its audit notes. Several at once share one interpreter, so each goes as
slowly as their number. Ten PATCHes of 20,000 partitions sent together, each done in ~2 s alone, all
ran out of a 6 s ``--write-timeout`` while planning: ten 503s, nothing written, the CPU spent for no
write (``benchmarks/large_writes.py``, benchmarks/RESULTS.md round 34). A client retrying them made it
worse.

So a large write (a body over ``bulk.BULK_BYTES``, or a DELETE of a connector with more than
``bulk.BULK_ITEMS`` keys or bytes) waits for its turn first, one at a time, first come first served,
within its own deadline: the first is written after ~2 s, the second after ~4 s, and only those whose
turn would come after their deadline are answered 503 ``log_timeout`` saying that they waited for
others, with nothing written (three of the ten written, in the same run). Small writes never wait
here: they cost the event loop less than the hop to a thread, and a big import must not hold a
connector's one-partition commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from emulator.model.errors import LogTimeout
from emulator.service.writer import Deadline

LANE_WIDTH = 1
"""Large writes running at once. One: their work holds the interpreter, and two at once each go
half as fast, so the first to come is answered later and no later one sooner."""


class BulkLane:
    """Turns for large writes; created per app, used on its event loop only."""

    def __init__(self, width: int = LANE_WIDTH) -> None:
        self._turns = asyncio.Semaphore(width)  # wakes its waiters in the order they came
        self._width = width
        self._running = 0
        self._waiting = 0

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return self._waiting

    @asynccontextmanager
    async def turn(self, deadline: Deadline, what: str) -> AsyncIterator[None]:
        """Hold a turn for the body of the ``with``; ``LogTimeout`` when none comes before ``deadline``
        (``what``: the request, as its answer names it)."""
        ahead = self._running + self._waiting
        self._waiting += 1
        try:
            async with asyncio.timeout(deadline.remaining()):
                await self._turns.acquire()
        except TimeoutError:
            raise LogTimeout(
                f"{what} waited {deadline.seconds:g} s (--write-timeout) for its turn behind {ahead} other "
                "large write(s) and did not get it; nothing was written (large writes run one at a time: "
                "send it again once they are done, or give the daemon a longer --write-timeout)"
            ) from None
        finally:
            self._waiting -= 1
        self._running += 1
        try:
            yield
        finally:
            self._running -= 1
            self._turns.release()
