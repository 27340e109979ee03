"""Who may write a connector's offsets right now, and which commits are stale: claims + sequences.

Kept apart from ``OffsetsService`` so the KIP-875 semantics there stay readable; the service asks
the guard inside the connector's write section (``emulator.service.writer``) and hands it the append.
- Claims (``emulator.model.claims``): while a connector is claimed, a write must present the claim's
  epoch (``claim_epoch``); one without it is refused as Connect refuses a connector that is not
  STOPPED (``ClaimHeld``: someone holds the connector), one with an older epoch is ``Fenced`` and
  writes nothing. ``check_writer`` fails fast; the log checks again atomically with the write
  (``append`` always presents a ``Fence``, with ``epoch=None`` for a writer without a claim; a sink
  connector's group write goes through ``write_outside``, checked the same way).
- Sequences (``emulator.model.sequences``): a commit may carry (source descriptor, number); per
  partition a replayed or late commit is dropped and reported instead of moving an offset back.
  ``filter_sequence`` and ``record_sequence`` run in the same write section as the write, so no
  other commit of the connector can be checked between them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TypeVar

from emulator.logs.base import OffsetLog
from emulator.model.claims import Claim, Fence, Fenced, fenced_message, held_message
from emulator.model.connectors import ConnectorStates
from emulator.model.errors import ClaimHeld, ConnectorRunning, InvalidRequest
from emulator.model.records import Position
from emulator.model.sequences import CommitSequence, SequenceTracker
from emulator.service.bodies import OffsetChange
from emulator.service.results import DroppedCommit

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WriteAuth:
    """What a writer presents with a modification (all optional; Connect's own API sends neither)."""

    claim_epoch: int | None = None
    sequence: CommitSequence | None = None

    @classmethod
    def from_params(cls, claim_epoch: int | None, sequence_source: str | None, sequence: int | None) -> WriteAuth:
        """From the request's ``claim_epoch``, ``sequence_source`` and ``sequence`` parameters."""
        if (sequence_source is None) != (sequence is None):
            raise InvalidRequest("sequence_source and sequence go together: give both or neither")
        if sequence_source is not None and sequence is not None:
            return cls(claim_epoch, CommitSequence(sequence_source, sequence))
        return cls(claim_epoch)

    def fence(self, connector: str) -> Fence:
        """What the log checks atomically with the write: this claim, or (None) that nobody holds one."""
        return Fence(connector, self.claim_epoch)


CLAIM_REFRESH_S = 30.0
"""How long a claim without a deadline of its own reads Connect's config topic for (the log's own wait)."""

NO_AUTH = WriteAuth()
"""Connect's own API: no claim epoch, no sequence."""


@dataclass(frozen=True, slots=True)
class SequencedChanges:
    accepted: list[OffsetChange]
    dropped: list[DroppedCommit] = field(default_factory=list)


class WriteGuard:
    def __init__(self, log: OffsetLog, states: ConnectorStates, tracker: SequenceTracker) -> None:
        self._log = log
        self._states = states
        self.tracker = tracker

    # -- claims ---------------------------------------------------------------------------
    async def claim(self, connector: str, owner: str, force: bool = False, timeout_s: float | None = None) -> Claim:
        """``timeout_s``: the time the request has left, counted from this call; the log gets what is
        left of it once the Connect cluster's states were read (``OffsetLog.claim``)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        if not owner.strip():
            raise InvalidRequest("A claim needs a non-empty 'owner' (e.g. the Spark query id, or the operator's name)")
        # Within the request's time: the claim holds its connector's write section meanwhile, and a
        # stalled config topic must not keep every write of the connector waiting for 30 s.
        refresh_s = CLAIM_REFRESH_S if deadline is None else min(CLAIM_REFRESH_S, max(deadline - time.monotonic(), 0.0))
        await asyncio.to_thread(self._states.refresh, refresh_s)
        if self._states.exists(connector) and not self._states.is_stopped(connector) and not force:
            raise ConnectorRunning(
                f"Connector {connector} is running in the Connect cluster (not STOPPED with 0 tasks); its tasks "
                "would overwrite any offset written now. Stop it first, or claim with force=true"
            )
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        return await asyncio.to_thread(self._log.claim, connector, owner, left)

    async def current(self, connector: str, timeout_s: float | None = None) -> Claim | None:
        return await asyncio.to_thread(self._log.current_claim, connector, timeout_s)

    async def current_many(self, connectors: Sequence[str], timeout_s: float | None = None) -> dict[str, Claim]:
        """The current claims of ``connectors`` in one hop to a worker thread, asking the log only about
        those it does not know to be unclaimed (``may_be_claimed``; usually none)."""

        def lookup() -> dict[str, Claim]:
            maybe = [name for name in connectors if self._log.may_be_claimed(name)]
            return self._log.current_claims(maybe, timeout_s) if maybe else {}

        return await asyncio.to_thread(lookup)

    async def current_all(self, timeout_s: float | None = None) -> dict[str, Claim]:
        """Every current claim, read on a worker thread (the Kafka backend reads its claims topic to its
        end: a broker round trip the event loop must not wait in)."""
        return await asyncio.to_thread(self._log.current_all, timeout_s)

    async def release(self, connector: str, epoch: int) -> bool:
        return await asyncio.to_thread(self._log.release, Fence(connector, epoch))

    def looks_up(self, connector: str, auth: WriteAuth) -> bool:
        """Whether ``check_writer`` reads the connector's claim (a wait); not for a writer without a
        claim epoch on a connector the log knows nobody holds (``may_be_claimed``)."""
        return auth.claim_epoch is not None or self._log.may_be_claimed(connector)

    async def check_writer(
        self, connector: str, auth: WriteAuth, timeout_s: float | None = None, takes_epoch: bool = True
    ) -> None:
        """Fail fast before planning; the log re-checks atomically when it writes. ``takes_epoch``: the
        request could present a claim epoch (a rollback cannot: its refusal says to release)."""
        if not self.looks_up(connector, auth):
            return
        current = await self.current(connector, timeout_s)
        if auth.claim_epoch is None:
            if current is not None:
                raise ClaimHeld(held_message(connector, current, takes_epoch))
            return
        if current is None or current.epoch != auth.claim_epoch:
            raise Fenced(fenced_message(connector, auth.claim_epoch, current))

    def append(
        self, connector: str, auth: WriteAuth, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float
    ) -> list[Position]:
        """The log's append, refused atomically unless ``auth`` may write ``connector`` (blocking)."""
        return self._log.append_fenced(auth.fence(connector), entries, timeout_s)

    def write_outside(self, connector: str, auth: WriteAuth, write: Callable[[], T], timeout_s: float) -> T:
        """``write()`` (a sink connector's group, not the log's records), refused atomically unless
        ``auth`` may write ``connector``, as ``append`` is (``OffsetLog.write_fenced``; blocking)."""
        return self._log.write_fenced(auth.fence(connector), write, timeout_s)

    def start_append(
        self, connector: str, auth: WriteAuth, entries: Sequence[tuple[bytes, bytes | None]]
    ) -> Future[list[Position]] | None:
        """``append`` without blocking, if the log can (``OffsetLog.start_append_fenced``); else None."""
        return self._log.start_append_fenced(auth.fence(connector), entries)

    # -- sequences ------------------------------------------------------------------------
    def filter_sequence(self, connector: str, changes: list[OffsetChange], auth: WriteAuth) -> SequencedChanges:
        if auth.sequence is None:
            return SequencedChanges(changes)
        accepted: list[OffsetChange] = []
        dropped: list[DroppedCommit] = []
        for change in changes:
            verdict = self.tracker.check((connector, change.partition_id), auth.sequence)
            if verdict.accepted:
                accepted.append(change)
            else:
                self.tracker.touch((connector, change.partition_id))
                dropped.append(DroppedCommit(partition=change.partition, reason=verdict.reason(auth.sequence)))
        return SequencedChanges(accepted, dropped)

    def record_sequence(self, connector: str, changes: list[OffsetChange], auth: WriteAuth) -> None:
        if auth.sequence is not None:
            for change in changes:
                self.tracker.record((connector, change.partition_id), auth.sequence)
