"""The interface every offset log implements, and the progress it reports.

The view, API and CLI are written against this interface only, so the embedded backend and the
Kafka backend share every line above the log (architecture principle: "everything above the log
is the same code").
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from emulator.logs.write_timings import WriteTimings
from emulator.model.claims import Claim, Fence, refuse_unless_current
from emulator.model.errors import ClaimsUnsupported, InvalidRecord, LogConfigError, LogUnavailable
from emulator.model.records import LogRecord, Position

T = TypeVar("T")

RecordSink = Callable[[Sequence[LogRecord]], None]
"""Receives records in log order per partition. Called from the log's reader thread."""


@dataclass(frozen=True, slots=True)
class ReadProgress:
    """Per-partition read positions against end offsets, Connect's readiness rule, and the reader's health.

    ``positions[p]`` is the next offset the reader will deliver for partition ``p``;
    ``end_offsets[p]`` is, until ``caught_up``, the end offset captured when the initial read-to-end
    started (the target of Connect's rule); from then on the log's end as the reader last saw it
    (refreshed on every fetch, never below the position), so ``end - position`` is the reader's lag.
    """

    positions: dict[int, int] = field(default_factory=dict)
    end_offsets: dict[int, int] = field(default_factory=dict)
    records_read: int = 0
    caught_up: bool = False
    error: str | None = None
    """Set when the reader stopped for good (e.g. a damaged embedded log): never ready again."""
    records_dropped: int = 0
    """Records the view refused repeatedly, skipped after being logged with their coordinates."""
    alive: bool = False
    """The reader thread is running."""
    last_poll_at: float | None = None
    """Wall-clock time (``time.time()``) the reader last asked the log for records, found or not:
    a reader whose thread is alive but stuck (a sink that never returns) stops advancing it. Every
    batch read is a look, so during a replay it is never older than ``last_records_at``."""
    last_records_at: float | None = None
    """Wall-clock time the reader last delivered records."""
    last_error: str | None = None
    """The most recent error the reader (or the log's clients) met, kept after recovery; ``error``
    is set only when one stopped the reader for good."""
    last_error_at: float | None = None

    @property
    def partitions_done(self) -> int:
        return sum(1 for p, end in self.end_offsets.items() if self.positions.get(p, 0) >= end)

    def lag(self) -> dict[int, int]:
        """Records per partition between the reader's position and the end offset (0 when at the end)."""
        return {p: max(end - self.positions.get(p, 0), 0) for p, end in self.end_offsets.items()}


class OffsetLog(abc.ABC):
    """A partitioned, ordered, durable log of offset records.

    Lifecycle: ``open()`` (create or verify storage), ``start_reading(sink)`` (replay from the
    beginning, then tail, delivering to ``sink`` on a background thread), ``append`` (durable,
    acknowledged writes), ``close()``.
    """

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """Human-readable location, e.g. ``kafka://host:9092/connect-offsets``."""

    @property
    def archive_identity(self) -> str:
        """What names this log's history archive, read once the log is open: the same wherever the
        log is reached from, so a moved data directory or another ``--bootstrap-servers`` string
        keeps one archive (the embedded log's stored id; a Kafka cluster's id and the topic).
        ``description`` for a log that has nothing steadier."""
        return self.description

    @property
    @abc.abstractmethod
    def partition_count(self) -> int:
        """Current number of partitions (writes are placed with murmur2 over this count)."""

    @abc.abstractmethod
    def open(self) -> None:
        """Create or verify the underlying storage. Raises ``LogConfigError`` on refusal."""

    @abc.abstractmethod
    def start_reading(self, sink: RecordSink) -> None:
        """Replay every partition from its beginning, then tail forever, in a background thread."""

    @abc.abstractmethod
    def progress(self) -> ReadProgress:
        """Snapshot of read progress; ``caught_up`` turns true once, after the initial read-to-end."""

    def serving(self) -> bool:
        """``progress()``'s verdict alone: caught up and not stopped by an error. Asked before every
        request is answered, so backends answer it without building the snapshot."""
        progress = self.progress()
        return progress.caught_up and progress.error is None

    @abc.abstractmethod
    def append(self, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float = 30.0) -> list[Position]:
        """Durably write ``(key, value-or-None)`` records; blocks until every one is acknowledged.

        Records are placed with murmur2 over ``partition_count`` and keep their order per key.
        Raises ``LogWriteError`` if any record is not acknowledged (nothing is reported written
        unless it was). Callers holding a claim use ``append_fenced`` instead.
        """

    def append_fenced(
        self, fence: Fence, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float = 30.0
    ) -> list[Position]:
        """``append``, atomically refused with ``Fenced`` unless ``fence`` is the current claim, or,
        for ``fence.epoch=None`` (a writer without a claim), with ``ClaimHeld`` while anyone holds
        the connector. A log without claims has no holder: it appends an unclaimed write as is.

        ``WriteOutcomeUnknown`` (from either method) means the records were handed over and not
        acknowledged within ``timeout_s``; its ``outcome`` completes once the log answered.
        """
        if fence.epoch is None:
            return self.append(entries, timeout_s)
        raise ClaimsUnsupported(f"{self.description} does not support claims")

    def write_fenced(self, fence: Fence, write: Callable[[], T], timeout_s: float = 30.0) -> T:
        """``write()``, a write this log does not make itself (a sink connector's consumer group),
        refused as ``append_fenced`` refuses: ``Fenced`` unless ``fence`` is the current claim, or, for
        ``fence.epoch=None``, ``ClaimHeld`` while anyone holds the connector. Blocking: call it from a
        worker thread; ``write()`` runs on the caller's thread and its answer (or error) is returned.

        A backend that can (Kafka) makes the check atomic with claims made through this process: no
        such claim answers between the check and ``write()``'s return, however late that is (a write
        waits for the connector's lock at most ``timeout_s``, ``LogTimeout`` after). This default,
        for a log that has no such writes (the embedded log has no consumer groups), only checks
        the stored claim first, not atomically with ``write()``.
        """
        refuse_unless_current(fence, self.current_claim(fence.connector, timeout_s))
        return write()

    def start_append_fenced(
        self, fence: Fence, entries: Sequence[tuple[bytes, bytes | None]]
    ) -> Future[list[Position]] | None:
        """``append_fenced`` without waiting, when the log can hand the records over at once: a
        future of the positions (or of the error ``append_fenced`` would raise), or None when it
        cannot right now (the caller then calls ``append_fenced`` in a worker thread).

        Called on the event loop's thread, so it must never block. It exists so that a write whose
        acknowledgement arrives on a thread of the log's own (Kafka's delivery reports) wakes the
        loop from that thread, instead of waking a worker thread parked for it, which then wakes the
        loop. The future's callbacks run on that thread and must not block either; the future is
        never cancelled (records handed over cannot be taken back). The caller's deadline bounds
        the wait; an error of the request itself (``InvalidRecord``, a closed log) may be raised at
        once. The embedded log does not override this: its group commit wants a worker thread per
        write (benchmarks/RESULTS.md, round 11).
        """
        return None

    def append_transactional(
        self,
        transactional_id: str,
        entries: Sequence[tuple[bytes, bytes | None]],
        timeout_s: float = 30.0,
        fence_also: Sequence[str] = (),
    ) -> list[Position]:
        """``append`` in one transaction of ``transactional_id`` by a fresh producer, which fences every
        earlier holder of the id (and first of each id in ``fence_also``): how Connect writes a source
        connector's offsets with exactly-once source support (docs/protocol.md §4.7). Committed
        positions, or ``Conflict`` (a newer holder took over: nothing committed), ``LogWriteError``,
        ``LogTimeout``, ``WriteOutcomeUnknown`` as for ``append``. Only Kafka has transactions."""
        raise LogConfigError(f"{self.description} has no transactions: exactly-once source support needs Kafka")

    @property
    def write_timings(self) -> WriteTimings | None:
        """How long this log's writes took to become durable (``/metrics``), or None for a log that
        does not time them."""
        return None

    def compaction(self) -> dict[str, Any] | None:
        """The log's own compaction (the embedded log's compactor: ``/status``, ``/metrics``), or None
        for a log that does not compact itself (a Kafka topic is compacted by the broker)."""
        return None

    @property
    def max_record_bytes(self) -> int | None:
        """The largest key plus value the log takes in one record (Kafka: the producer's
        ``message.max.bytes``), or None without a limit of its own. ``check_record_size``."""
        return None

    def reachability(self) -> str | None:
        """Why the log's storage cannot be reached right now (a failure observed recently, e.g. a
        broker that did not answer a metadata request), or None. ``/readyz`` answers 503 with it."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Stop reading and release resources. Idempotent."""

    def end_offsets(self, timeout_s: float | None = None) -> dict[int, int]:
        """The log's end offset per partition now (for "read to the end" on demand, as Connect's
        ``readToEnd``): compare with ``progress().positions``, which count markers and gaps too."""
        raise NotImplementedError(f"{self.description} cannot report its end offsets")

    @abc.abstractmethod
    def read_to_end(self, timeout_s: float) -> None:
        """Connect's ``readToEnd``: return once every record in the log *now* has reached the sink.

        Takes the current end offsets and waits (without polling) until the reader's positions pass
        them, so a decision taken afterwards sees every write acknowledged before the call. Requires
        ``start_reading``. Raises ``LogUnavailable`` after ``timeout_s``, or at once if the reader
        stopped for good.
        """

    def reread(self, ranges: Mapping[int, tuple[int, int]], timeout_s: float) -> Iterator[list[LogRecord]]:
        """The records at offsets ``[start, stop)`` of each partition, read again, in batches in
        offset order per partition; records compaction removed meanwhile are absent.

        For a consumer of the reader's deliveries that had to let some go (the history archive,
        whose queue overflowed while its disk refused writes): it reads them back from the log
        instead of losing them until a restart. Runs on the caller's thread with a reader of its own,
        so the view's reader is never held up. ``LogUnavailable`` / ``LogTimeout`` when the storage
        cannot be read, or makes no progress for ``timeout_s``."""
        raise LogUnavailable(f"{self.description} cannot be read again")

    def keep_records(self, floor: Callable[[int], int | None]) -> None:
        """Ask a log that compacts itself (the embedded log) to keep every record of partition ``p``
        at or after ``floor(p)`` (None: no wish), for a consumer that will ``reread`` them. A Kafka
        topic is compacted by its broker, which takes no such wish: nothing to do."""
        return None

    def leave_compaction(self, to_whom: Callable[[], str | None]) -> None:
        """Do not compact this log from this process while ``to_whom()`` names why another process
        does (the daemon that writes the log's history archive, whose ``keep_records`` wishes only it
        knows); asked before every compaction. A log that does not compact itself has nothing to leave."""
        return None

    # -- ownership (see emulator/model/claims.py); backends that support it override all of them ----
    def claim(self, connector: str, owner: str, timeout_s: float | None = None) -> Claim:
        """Durably give ``connector`` to ``owner`` with the next epoch, fencing every older claim.
        ``timeout_s``: how long the claim may wait for writes of the connector still on their way
        before it refuses with ``LogTimeout`` (the request's deadline; None: the log's own timeout)."""
        raise ClaimsUnsupported(f"{self.description} does not support claims")

    def current_claim(self, connector: str, timeout_s: float | None = None) -> Claim | None:
        """The connector's current claim, as stored (``None`` if never claimed or released);
        ``LogTimeout`` if the storage does not answer within ``timeout_s`` (the log's own default)."""
        return None

    def current_claims(self, connectors: Collection[str], timeout_s: float | None = None) -> dict[str, Claim]:
        """The current claims of ``connectors`` (a connector without one is absent), from one read of the
        storage: the console's connectors page asks for every connector at once, and a lookup each
        (a read of the claims topic to its end on Kafka) cost a thread hop and a broker round trip per
        connector. ``LogTimeout`` as ``current_claim``."""
        claims = {name: self.current_claim(name, timeout_s) for name in connectors}
        return {name: claim for name, claim in claims.items() if claim is not None}

    def current_all(self, timeout_s: float | None = None) -> dict[str, Claim]:
        """Every current claim (connector → claim), from one read of the storage, including claims on
        connectors that have no offsets (a claim needs none): ``GET /claims``. ``LogTimeout`` as
        ``current_claim``. A log without claims has none: like ``current_claim``'s ``None``, an empty
        answer, not ``ClaimsUnsupported`` (``GET …/claim`` answers such a log 404, not 409)."""
        return {}

    def claims_seen(self) -> int | None:
        """How many connectors are claimed as this process last saw, without waiting: for ``/status``,
        which is probed often and must not read the claims to their end (on Kafka, a broker round trip)
        each time. Never blocks. The embedded log re-reads its claims table on its reader thread every
        few hundred milliseconds; Kafka's claims reader tails the claims topic. None while not known
        (not read yet). A log without claims has none: 0, as ``current_all`` answers no claims."""
        return 0

    def release(self, fence: Fence) -> bool:
        """End the claim if ``fence`` is still current; ``False`` if it was already fenced."""
        raise ClaimsUnsupported(f"{self.description} does not support claims")

    def own_write_ends(self) -> dict[int, int]:
        """Partition → the offset after the latest record appended through this object (none yet:
        absent). What a history archive written by another process must hold before a query here
        can count on seeing this process's writes."""
        return {}

    def read_own_writes(self, timeout_s: float) -> bool:
        """Wait until the reader has delivered every record appended through this object so far.

        For state fed by the reader only (the history archive): the view already has these records
        (write-through), the sink may not yet. Local, never a broker round trip, so a history query
        still answers while the broker is away. True once delivered; False on timeout or when the
        reader stopped. A log whose reader delivers its own appends before they are acknowledged
        needs no wait."""
        return True

    def may_be_claimed(self, connector: str) -> bool:
        """False only when this process knows, without waiting, that nobody holds ``connector``.

        Lets a write without a claim epoch skip the fail-fast claim lookup (a hop to a worker thread
        and, on Kafka, a read of the claims topic) in the common case of nobody using claims. Safe
        because every write checks its fence again atomically with the append: a claim made
        elsewhere that this answer has not seen yet still refuses the write. What can slip through
        is only a dry run or a write left with nothing to append, and only for as long as the
        backend takes to notice another process's claim. Must never block."""
        return True


def record_too_large(size: int, limit: int) -> str | None:
    """Why a record of ``size`` bytes of key and value is refused, or None when it fits ``limit``."""
    if size <= limit:
        return None
    return (
        f"{size} bytes of key and value, over the producer's message.max.bytes ({limit}); Connect's own producer "
        "refuses a record over its max.request.size (1048576 bytes by default) as well; nothing was written"
    )


def check_record_size(log: OffsetLog, key: bytes, value: bytes | None) -> None:
    """``InvalidRecord`` (400) when ``log`` would refuse the record: checked while a change is planned,
    so a dry run refuses what the write would, and a write refuses before anything is written."""
    limit = log.max_record_bytes
    if limit is None:
        return
    problem = record_too_large(len(key) + (0 if value is None else len(value)), limit)
    if problem is not None:
        shown = key[:200].decode("utf-8", "backslashreplace") + ("…" if len(key) > 200 else "")
        raise InvalidRecord(f"the record for key {shown}: {problem}")
