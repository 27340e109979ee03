"""Who wrote a record: this daemon (with the operation, connector, principal and client address of
the request) or someone else.

The log cannot tell us: Connect ignores headers, the embedded log has none, and our records are
byte-identical to Connect's on purpose. What we do know is where our own appends landed, but only
*after* ``append`` returns, and the reader thread may deliver the record before that. So a write
registers its (key, value) pairs before appending (a *ticket*), and the archiver, meeting a record
whose bytes match a ticket still in flight, waits for that ticket to learn the positions instead of
guessing. Records whose position is not ours are ``external``.

Every append of the service goes through ``TrackedLog`` (emulator.history.tracked_log), so no
write path can forget to register; the service names the operation with ``write_origin(...)``
around its work (a context variable, which ``asyncio.to_thread`` carries into the append). Who made
the request and from where come the same way, from ``emulator.model.principal.current_principal``,
which the server sets per request: the audit trail in the archive needs no parameter threaded
through the write path.

Limits (documented, not hidden): the mapping lives in memory, so a daemon killed between appending
and archiving re-archives those records from the log on restart as ``external``; and a write whose
acknowledgement failed part-way (positions unknown) attributes records with exactly its bytes to
the daemon, flagged ``uncertain``. A write the log refused before handing it any record leaves
nothing (``WriteTicket.withdraw``): its bytes, written next by another writer, are that writer's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

from emulator.model.principal import current_principal
from emulator.model.records import LogRecord, Position

log = logging.getLogger(__name__)

EXTERNAL = "external"
DAEMON = "daemon"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a record came from; everything but ``origin`` only for the daemon's own writes.

    ``principal`` is who made the request (``anonymous`` without authentication) and ``remote``
    the client's ``host:port`` (None for a write made outside an HTTP request).
    """

    origin: str
    operation: str | None = None
    connector: str | None = None
    uncertain: bool = False
    principal: str | None = None
    remote: str | None = None


EXTERNAL_ORIGIN = Origin(EXTERNAL)

_CURRENT: ContextVar[tuple[str, str | None] | None] = ContextVar("connect_offsets_write_origin", default=None)


@contextlib.contextmanager
def write_origin(operation: str, connector: str | None) -> Iterator[None]:
    """Label the appends made inside this block (``PATCH``, ``DELETE``, ``rollback``, ``import``...)."""
    token = _CURRENT.set((operation, connector))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_write_origin() -> tuple[str, str | None]:
    """The label set by the innermost ``write_origin``; unlabelled appends are ``("write", None)``."""
    return _CURRENT.get() or ("write", None)


@dataclass(eq=False, slots=True)
class WriteTicket:
    """One append in flight: its bytes, then (once acknowledged) its positions."""

    origin: Origin
    pairs: frozenset[tuple[bytes | None, bytes | None]]
    registry: OriginRegistry | None
    done: threading.Event = field(default_factory=threading.Event)
    failed_at: float | None = None

    def landed(self, positions: Sequence[Position]) -> None:
        """The append was acknowledged: from now on those positions are ours."""
        if self.registry is not None:
            self.registry._landed(self, positions)

    def failed(self) -> None:
        """The append raised; some records may still have landed at unknown positions."""
        if self.registry is not None:
            self.registry._failed(self)

    def withdraw(self) -> None:
        """Nothing was appended after all (the log declined to start the append, or refused it before
        any record reached it): forget the ticket."""
        if self.registry is not None:
            self.registry._withdrawn(self)


class OriginRegistry:
    """Positions of the daemon's own appends, consulted by the history archiver.

    Disabled (every call a no-op) until an archiver enables it, so a daemon without history pays
    nothing and keeps no state.
    """

    MAX_POSITIONS = 1_000_000
    """Bound on remembered positions. Only an archiver far behind could need more; beyond it the
    oldest are forgotten (counted) and those records would be archived as ``external``."""

    FAILED_TICKET_TTL_S = 120.0
    WAIT_S = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._enabled = False
        self._positions: OrderedDict[tuple[int, int], Origin] = OrderedDict()
        self._pending: dict[tuple[bytes | None, bytes | None], list[WriteTicket]] = {}
        self._failed_tickets: list[WriteTicket] = []
        self.evicted = 0

    def enable(self) -> None:
        with self._lock:
            self._enabled = True

    @property
    def enabled(self) -> bool:
        return self._enabled

    def begin(
        self, operation: str, connector: str | None, entries: Sequence[tuple[bytes | None, bytes | None]]
    ) -> WriteTicket:
        """Call before appending ``entries``; then ``landed(positions)`` or ``failed()``.

        The request's principal and address are read here, in the request's context (carried into
        the worker thread that appends), so every record of the write names who made it.
        """
        who = current_principal.get()
        origin = Origin(DAEMON, operation, connector, principal=who.name, remote=who.remote)
        if not self._enabled:
            return WriteTicket(origin, frozenset(), None)
        ticket = WriteTicket(origin, frozenset(entries), self)
        with self._lock:
            for pair in ticket.pairs:
                self._pending.setdefault(pair, []).append(ticket)
        return ticket

    def _unpend(self, ticket: WriteTicket) -> None:
        for pair in ticket.pairs:
            tickets = self._pending.get(pair)
            if tickets is None:
                continue
            tickets[:] = [t for t in tickets if t is not ticket]
            if not tickets:
                del self._pending[pair]

    def _landed(self, ticket: WriteTicket, positions: Sequence[Position]) -> None:
        with self._lock:
            for pos in positions:
                self._positions[(pos.partition, pos.offset)] = ticket.origin
            while len(self._positions) > self.MAX_POSITIONS:
                self._positions.popitem(last=False)
                self.evicted += 1
            self._unpend(ticket)
        ticket.done.set()

    def _withdrawn(self, ticket: WriteTicket) -> None:
        with self._lock:
            self._unpend(ticket)
        ticket.done.set()

    def _failed(self, ticket: WriteTicket) -> None:
        with self._lock:
            self._unpend(ticket)
            ticket.failed_at = time.monotonic()
            self._failed_tickets.append(ticket)
        ticket.done.set()

    def lookup(self, record: LogRecord) -> Origin:
        """The origin of a delivered record. Called by the archiver thread only: it may wait for a
        matching write in flight (never the reader thread or the event loop)."""
        if not self._positions and not self._pending and not self._failed_tickets:
            # Nothing of ours in flight or landed (the whole of a replay): a write registers before it
            # appends, so its record can never be delivered while this is all empty.
            return EXTERNAL_ORIGIN
        coords = (record.partition, record.offset)
        pair = (record.key, record.value)
        with self._lock:
            found = self._positions.pop(coords, None)
            if found is not None:
                return found
            waiting = list(self._pending.get(pair, ()))
        for ticket in waiting:
            if not ticket.done.wait(self.WAIT_S):
                log.warning(
                    "a daemon write matching the record at %d@%d was not acknowledged within %.0f s; "
                    "archiving the record as external",
                    record.partition,
                    record.offset,
                    self.WAIT_S,
                )
        with self._lock:
            found = self._positions.pop(coords, None)
            if found is not None:
                return found
            now = time.monotonic()
            ttl = self.FAILED_TICKET_TTL_S
            self._failed_tickets = [t for t in self._failed_tickets if now - (t.failed_at or now) < ttl]
            for ticket in self._failed_tickets:
                if pair in ticket.pairs:
                    return dataclasses.replace(ticket.origin, uncertain=True)
        return EXTERNAL_ORIGIN

    def forget(self, record: LogRecord) -> None:
        """Drop the position of a record that will not be archived (below the watermark)."""
        if not self._positions:
            return
        with self._lock:
            self._positions.pop((record.partition, record.offset), None)
