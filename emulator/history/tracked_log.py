"""The offsets log as the service sees it when history is on: every append registers its origin.

A wrapper rather than an edit of each write path, so that any present or future way the service
writes (alter, reset, rollback, imports) is attributed to the daemon without having to remember to.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from emulator.history.origins import OriginRegistry, WriteTicket, current_write_origin
from emulator.logs.base import OffsetLog, ReadProgress, RecordSink
from emulator.logs.write_timings import WriteTimings
from emulator.model.claims import Claim, Fence
from emulator.model.errors import OffsetsError, WriteOutcomeUnknown
from emulator.model.records import LogRecord, Position

T = TypeVar("T")


class TrackedLog(OffsetLog):
    """Delegates everything to ``inner``; appends also tell ``origins`` where records landed.

    Every method of ``OffsetLog`` is overridden, including those with a default body (a unit test
    keeps it so: an inherited default would silently replace the backend's behaviour). Attributes
    specific to a backend (``compact``, ``end_offsets``, ...) are reached through ``__getattr__``;
    ``inner`` is the wrapped log for code that needs the concrete class.
    """

    def __init__(self, inner: OffsetLog, origins: OriginRegistry) -> None:
        self.inner = inner
        self.origins = origins

    @property
    def description(self) -> str:
        return self.inner.description

    @property
    def archive_identity(self) -> str:
        return self.inner.archive_identity

    @property
    def partition_count(self) -> int:
        return self.inner.partition_count

    @property
    def write_timings(self) -> WriteTimings | None:
        return self.inner.write_timings

    @property
    def max_record_bytes(self) -> int | None:
        return self.inner.max_record_bytes

    def compaction(self) -> dict[str, Any] | None:
        return self.inner.compaction()

    def open(self) -> None:
        self.inner.open()

    def start_reading(self, sink: RecordSink) -> None:
        self.inner.start_reading(sink)

    def progress(self) -> ReadProgress:
        return self.inner.progress()

    def serving(self) -> bool:
        return self.inner.serving()

    def append(self, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float = 30.0) -> list[Position]:
        return self._tracked(entries, lambda: self.inner.append(entries, timeout_s))

    def append_fenced(
        self, fence: Fence, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float = 30.0
    ) -> list[Position]:
        return self._tracked(entries, lambda: self.inner.append_fenced(fence, entries, timeout_s))

    def write_fenced(self, fence: Fence, write: Callable[[], T], timeout_s: float = 30.0) -> T:
        return self.inner.write_fenced(fence, write, timeout_s)  # not a record of the log: nothing to track

    def append_transactional(
        self,
        transactional_id: str,
        entries: Sequence[tuple[bytes, bytes | None]],
        timeout_s: float = 30.0,
        fence_also: Sequence[str] = (),
    ) -> list[Position]:
        return self._tracked(
            entries, lambda: self.inner.append_transactional(transactional_id, entries, timeout_s, fence_also)
        )

    def start_append_fenced(
        self, fence: Fence, entries: Sequence[tuple[bytes, bytes | None]]
    ) -> Future[list[Position]] | None:
        ticket = self._ticket(entries)
        try:
            started = self.inner.start_append_fenced(fence, entries)
        except BaseException as exc:
            self._settle_after(ticket, exc)
            raise
        if started is None:  # nothing was handed over: the caller appends through append_fenced
            ticket.withdraw()
            return None
        started.add_done_callback(lambda done: self._settle(ticket, done))
        return started

    def _tracked(
        self, entries: Sequence[tuple[bytes, bytes | None]], append: Callable[[], list[Position]]
    ) -> list[Position]:
        ticket = self._ticket(entries)
        try:
            positions = append()
        except BaseException as exc:
            self._settle_after(ticket, exc)
            raise
        ticket.landed(positions)
        return positions

    def _ticket(self, entries: Sequence[tuple[bytes, bytes | None]]) -> WriteTicket:
        operation, connector = current_write_origin()
        return self.origins.begin(operation, connector, entries)

    @classmethod
    def _settle_after(cls, ticket: WriteTicket, exc: BaseException) -> None:
        """An append raised: attribute the records once the log tells (``WriteOutcomeUnknown`` with an
        outcome), else ``_refused``."""
        if isinstance(exc, WriteOutcomeUnknown) and exc.outcome is not None:
            exc.outcome.add_done_callback(lambda done: cls._settle(ticket, done))
        else:
            cls._refused(ticket, exc)

    @classmethod
    def _settle(cls, ticket: WriteTicket, done: Future[list[Position]]) -> None:
        if done.cancelled():
            ticket.failed()
            return
        error = done.exception()
        if error is not None:
            cls._refused(ticket, error)
        else:
            ticket.landed(done.result())

    @staticmethod
    def _refused(ticket: WriteTicket, exc: BaseException) -> None:
        """A write that did not land: withdrawn when the log says it left no record (a claim check, a
        timeout before the write began, an invalid record), else failed (records may be in the log at
        unknown positions). A failed ticket makes the archiver credit any record with its bytes to this
        write, ``(unacknowledged)``, for minutes: after a refusal that is another writer's record, e.g.
        the claim holder's through another daemon, which the refused request had sent the same bytes as."""
        if isinstance(exc, OffsetsError) and exc.left_no_records:
            ticket.withdraw()
        else:
            ticket.failed()

    def close(self) -> None:
        self.inner.close()

    def claim(self, connector: str, owner: str, timeout_s: float | None = None) -> Claim:
        return self.inner.claim(connector, owner, timeout_s)

    def end_offsets(self, timeout_s: float | None = None) -> dict[int, int]:
        return self.inner.end_offsets(timeout_s)

    def read_to_end(self, timeout_s: float) -> None:
        self.inner.read_to_end(timeout_s)

    def current_claim(self, connector: str, timeout_s: float | None = None) -> Claim | None:
        return self.inner.current_claim(connector, timeout_s)

    def reachability(self) -> str | None:
        return self.inner.reachability()

    def current_claims(self, connectors: Collection[str], timeout_s: float | None = None) -> dict[str, Claim]:
        return self.inner.current_claims(connectors, timeout_s)

    def current_all(self, timeout_s: float | None = None) -> dict[str, Claim]:
        return self.inner.current_all(timeout_s)

    def claims_seen(self) -> int | None:
        return self.inner.claims_seen()

    def release(self, fence: Fence) -> bool:
        return self.inner.release(fence)

    def may_be_claimed(self, connector: str) -> bool:
        return self.inner.may_be_claimed(connector)

    def own_write_ends(self) -> dict[int, int]:
        return self.inner.own_write_ends()

    def read_own_writes(self, timeout_s: float) -> bool:
        return self.inner.read_own_writes(timeout_s)

    def reread(self, ranges: Mapping[int, tuple[int, int]], timeout_s: float) -> Iterator[list[LogRecord]]:
        return self.inner.reread(ranges, timeout_s)

    def keep_records(self, floor: Callable[[int], int | None]) -> None:
        self.inner.keep_records(floor)

    def leave_compaction(self, to_whom: Callable[[], str | None]) -> None:
        self.inner.leave_compaction(to_whom)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
