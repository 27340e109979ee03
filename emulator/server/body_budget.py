"""Large request bodies take turns: at most ``--max-body-bytes`` of them are handled at once.

A request body becomes Python objects several times its size while it is parsed, checked and
planned: one 30 MB PATCH of 600,000 partitions peaked at ~840 MB of RSS, and four sent at once
took the daemon to 2.3 GB — ``--max-connections`` such requests would exhaust any host, and any
principal with a write scope on one connector may send them. ``--max-body-bytes`` bounds one body;
this bounds them together. Bodies of ``LARGE_BODY_BYTES`` or more (by ``Content-Length``; a chunked
one counts as the largest allowed) reserve their size from a budget of ``--max-body-bytes`` before
the request is handled, and give it back when its answer is sent; one that cannot get its share
within ``WAIT_S`` is answered 503 ``busy`` with ``Retry-After`` and nothing is read or written.
Small bodies, GETs and everything else never wait here.

It sits after authentication (inside ``Guard``): a client without credentials is refused before it
can hold any share.
"""

from __future__ import annotations

import asyncio
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from emulator.model.errors import BusyWithLargeRequests
from emulator.server.auth.guards import refuse_before_routing
from emulator.server.routes.params import DEFAULT_MAX_BODY_BYTES

LARGE_BODY_BYTES = 1 << 20
"""Bodies from this size on take their turn (a Connect commit is a few hundred bytes)."""

WAIT_S = 10.0
"""How long a large body waits for its share: ``--write-timeout`` (``app.state.write_timeout_s``,
set by ``serve``), this without it."""

DRAIN_S = 10.0
"""How long a refused body is read and dropped so that its client gets the answer."""

_NO_BODY = frozenset({b"GET", b"HEAD", b"OPTIONS"})


class BodyBudget:
    """Bytes of large bodies being handled now, at most ``capacity``; served in arrival order."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use = 0
        self._turns = asyncio.Condition()

    async def take(self, size: int, wait_s: float) -> bool:
        """Reserve ``size`` bytes; False when they were not free within ``wait_s``."""
        deadline = time.monotonic() + wait_s
        async with self._turns:
            while self.in_use + size > self.capacity:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                try:
                    await asyncio.wait_for(self._turns.wait(), left)
                except TimeoutError:
                    return False
            self.in_use += size
            return True

    async def give(self, size: int) -> None:
        async with self._turns:
            self.in_use -= size
            self._turns.notify_all()


class LargeBodies:
    """The ASGI middleware; the budget is ``app.state.max_body_bytes`` and the wait
    ``app.state.write_timeout_s``, read at the first request (the daemon's wiring sets them after the
    app is built)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.wait_s = WAIT_S
        self._budget: BodyBudget | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"].encode() in _NO_BODY:
            await self.app(scope, receive, send)
            return
        budget = self._budget_of(scope)
        size = _declared_size(scope, budget.capacity)
        if size < LARGE_BODY_BYTES or size > budget.capacity:  # small, or refused 413 by the route
            await self.app(scope, receive, send)
            return
        if not await budget.take(size, self.wait_s):
            busy = BusyWithLargeRequests(
                f"The daemon is handling other large requests ({budget.in_use:,} bytes of bodies; at most "
                f"--max-body-bytes, {budget.capacity:,}, at once, which bounds its memory): this "
                f"{size:,}-byte request waited {self.wait_s:g} s for its turn; nothing was written. Send it again "
                "later, or in smaller parts"
            )
            await _drain(receive, DRAIN_S)
            await refuse_before_routing(busy, scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            await budget.give(size)

    def _budget_of(self, scope: Scope) -> BodyBudget:
        if self._budget is None:
            state = getattr(scope.get("app"), "state", None)
            self._budget = BodyBudget(int(getattr(state, "max_body_bytes", DEFAULT_MAX_BODY_BYTES)))
            self.wait_s = float(getattr(state, "write_timeout_s", WAIT_S))
        return self._budget


async def _drain(receive: Receive, within_s: float) -> None:
    """Read the refused body and drop it, for at most ``within_s``: a client sends its whole body
    before it reads an answer, and one closed under a body it is still sending gets a connection
    reset instead of the 503 that says why. Dropped as it comes, nothing of it is kept."""
    try:
        async with asyncio.timeout(within_s):
            while True:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return
    except TimeoutError:
        return


def _declared_size(scope: Scope, capacity: int) -> int:
    """The body's size by its ``Content-Length``; a chunked body (no length) counts as ``capacity``."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
        if name == b"transfer-encoding" and b"chunked" in value.lower():
            return capacity
    return 0
