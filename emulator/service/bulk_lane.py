"""Large writes take turns, in the order their bodies arrived.

A large write's work is Python on worker threads (``service/bulk.py``): reading its body, planning its
records, the sink checks, its audit notes. Several at once share one interpreter, so each goes as
slowly as their number. Ten PATCHes of 20,000 partitions sent together, each done in ~2 s alone, all
ran out of a 6 s ``--write-timeout`` while planning: ten 503s, nothing written, the CPU spent for no
write (``benchmarks/large_writes.py``, benchmarks/RESULTS.md round 34). A client retrying them made it
worse.

So a large write (a body over ``bulk.BULK_BYTES``, or a DELETE of a connector with more than
``bulk.BULK_ITEMS`` keys or ``bulk.BULK_BYTES`` of keys and values) waits for its turn first, one at
a time, first come first served, within its own deadline: the first is written after ~2 s, the
second after ~4 s, and only those whose turn would come after their deadline are answered 503
``log_timeout`` saying that they waited for others, with nothing written (three of the ten written,
in the same run). Small writes never wait
here: they cost the event loop less than the hop to a thread, and a big import must not hold a
connector's one-partition commit.

A waiting write whose client has gone (a client-side timeout, a killed process) leaves the queue at
its next look (every ``GONE_CHECK_S``; ~1 s for a body of megabytes, whose socket uvicorn reads again
only then) and writes nothing: it kept its place and was written when its turn came, and a client
that retried after its timeout queued behind its own earlier tries (the lane QA's four retrying
clients: one answer in 18 s, five writes nobody waited for). Not seen: a client that pipelined a
second request behind the waiting one (uvicorn marks only the newest request of a lost connection).
A daemon that stops refuses the writes still waiting at once (``close``), instead of starting them
after SIGTERM.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from emulator.model.errors import InvalidRequest, LogTimeout, NotReadyYet
from emulator.service.writer import Deadline

LANE_WIDTH = 1
"""Large writes running at once. One: their work holds the interpreter, and two at once each go
half as fast, so the first to come is answered later and no later one sooner."""

GONE_CHECK_S = 0.5
"""How often a waiting write looks whether its client is still connected."""

ClientGone = Callable[[], Awaitable[bool]]
"""Whether the request's client has disconnected (Starlette's ``Request.is_disconnected``)."""


class BulkLane:
    """Turns for large writes, first come first served; created per app, used on its event loop only.

    A queue of its own rather than an ``asyncio.Semaphore``: a waiter looks at its client between
    waits without cancelling its wait, which would send it to the back of the semaphore's queue."""

    def __init__(self, width: int = LANE_WIDTH) -> None:
        self._free = width
        self._queue: deque[asyncio.Future[None]] = deque()
        self._running = 0
        self._closed: str | None = None

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def close(self, why: str = "the daemon is stopping") -> None:
        """Refuse every write still waiting, and every later one, with ``why`` (the server's shutdown:
        a write that waited is not started after SIGTERM). The one running finishes."""
        self._closed = why
        while self._queue:
            waiter = self._queue.popleft()
            if not waiter.done():
                waiter.set_exception(self._refusal())

    @asynccontextmanager
    async def turn(self, deadline: Deadline, what: str, gone: ClientGone | None = None) -> AsyncIterator[None]:
        """Hold a turn for the body of the ``with``. ``LogTimeout`` when none comes before ``deadline``
        (``what``: the request, as its answer names it); ``InvalidRequest`` when ``gone`` says the
        client disconnected while it waited; nothing was written in either case."""
        if self._closed is not None:
            raise self._refusal()
        ahead = self._running + len(self._queue)
        if self._free > 0 and not self._queue:
            self._free -= 1
        else:
            await self._wait(deadline, what, ahead, gone)
            if deadline.remaining() <= 0:
                # The turn came as the deadline passed (the loop was busy when both were due): the
                # write waited its whole deadline, and starting it would only be refused by its first
                # pass, in words that blame that pass.
                self._pass_on()
                raise _waited_too_long(deadline, what, ahead)
        try:
            if ahead and gone is not None and await gone():
                raise _gone(what)
            self._running += 1
            try:
                yield
            finally:
                self._running -= 1
        finally:
            self._pass_on()

    async def _wait(self, deadline: Deadline, what: str, ahead: int, gone: ClientGone | None) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(waiter)
        try:
            while not waiter.done():
                left = deadline.remaining()
                if left <= 0:
                    raise _waited_too_long(deadline, what, ahead)
                await asyncio.wait({waiter}, timeout=min(left, GONE_CHECK_S))
                if not waiter.done() and gone is not None and await gone():
                    raise _gone(what)
            waiter.result()  # the lane's refusal when it closed meanwhile
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._pass_on()  # the turn came as this request gave up: the next one takes it
            else:
                waiter.cancel()
                if waiter in self._queue:
                    self._queue.remove(waiter)
            raise

    def _pass_on(self) -> None:
        """A turn ends: to the first still waiting, else back to the free ones."""
        while self._queue:
            waiter = self._queue.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    def _refusal(self) -> NotReadyYet:
        """503 ``not_ready`` with ``Retry-After``: sent again, to the daemon once it is back, it is written."""
        return NotReadyYet(f"{self._closed}: this large write was not started; nothing was written")


def _waited_too_long(deadline: Deadline, what: str, ahead: int) -> LogTimeout:
    return LogTimeout(
        f"{what} waited {deadline.seconds:g} s (--write-timeout) for its turn behind {ahead} other "
        "large write(s) and did not get it; nothing was written (large writes run one at a time: "
        "send it again once they are done, or give the daemon a longer --write-timeout)"
    )


def _gone(what: str) -> InvalidRequest:
    return InvalidRequest(
        f"The connection closed while {what[0].lower()}{what[1:]} waited for its turn among large writes; "
        "nothing was written"
    )
