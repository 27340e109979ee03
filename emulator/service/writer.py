"""Writing planned records: one critical section per connector, a deadline, read-your-writes.

Every modification of the offsets log (PATCH, DELETE, imports, rollbacks) goes through one
``OffsetsWriter``. What it guarantees, and why:

- **One section per connector.** A write takes its connector's lock for check → write → record
  (``WriteSection``): a commit sequence is checked, written and recorded with no other write of
  that connector in between, so two racing commits can never land in the wrong order. Writes to
  different connectors do not wait for each other. A write that spans connectors (an import)
  takes the section of each connector it names, in sorted order (``sections``: an ``ImportSection``);
  the other connectors' writes go on meanwhile. A claim takes its
  connector's section too (``ClaimsService.claim``), so it is ordered wholly before or after every
  write of the connector, an import's included: an import's claim check, made in its section, is
  what fences its unfenced write.
- **A deadline.** Waiting for the section and for the log's acknowledgement both end at the
  request's deadline (``--write-timeout``; an import's write gets a whole one of its own, since its
  checks and diff come between): ``LogTimeout`` when nothing was written yet,
  ``WriteOutcomeUnknown`` once records were handed to the log. Nothing blocks the event loop: the
  log is called in a write thread (``write_threads``), the lock is an asyncio lock. A log that can take a commit
  without blocking (``OffsetLog.start_append_fenced``: Kafka while nobody uses claims) is called on
  the loop instead, and its own thread (the producer's delivery reports) wakes the loop when the
  write is acknowledged: no worker thread parked per write.
- **An unknown outcome keeps the section.** The log keeps waiting for its answer in the background;
  the connector's section (an import's: those of the connectors it names) stays taken until it came, and the write
  is then finished as if it had been on time (applied to the view, its sequence recorded). So a
  client that retries after a 503 with the same commit sequence is applied at most once: its retry
  either waits for the answer or finds the sequence recorded and is dropped as a replay.
- **Read-your-writes.** Acknowledged records are applied to the view at once
  (``OffsetView.apply_acknowledged``), before the answer.

The appends of many sections meet in the log, which group-commits them (one SQLite transaction on
the embedded log: ``emulator/logs/embedded/group_commit.py``; one producer's batches on Kafka), so
sections of different connectors share a commit while each keeps its own order and deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

from emulator.codec.murmur2 import partition_for
from emulator.logs.base import OffsetLog, check_record_size
from emulator.model.errors import (
    LogTimeout,
    LogWriteError,
    OffsetsError,
    WriteOutcomeUnknown,
    partly_unknown,
    partly_written,
)
from emulator.model.records import LogRecord, Position
from emulator.service.bulk import PassAbandoned, abandoned, bulk_pass
from emulator.service.results import PlannedRecord
from emulator.service.write_guard import NO_AUTH, WriteAuth, WriteGuard
from emulator.service.write_threads import WRITE_THREADS
from emulator.view.offset_view import OffsetView

log = logging.getLogger(__name__)

_APPEND_CHUNK = 10_000
_START_MAX_ENTRIES = 256
"""Larger writes (imports, resets of big connectors) go through a worker thread: checking and
handing over their records, and applying them to the view, would hold up the loop or the log's
acknowledgement thread."""
OVERRUN_S = 2.0
"""A log call gets the time left as its timeout; if it overruns that by this much, the outcome is
treated as unknown (the thread is still running) rather than waited for on the request's time."""

Entries = Sequence[tuple[bytes, bytes | None]]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class AppendTarget:
    """Another log a section may write to, and the view its acknowledged records go to: a connector's
    own offsets topic, or a transactional write (KIP-618). Without one a section writes the offsets
    log through the write guard (claims)."""

    description: str
    append: Callable[[Entries, float], list[Position]]
    """Blocking, like ``OffsetLog.append``: ``(entries, timeout_s)`` → positions."""
    view: OffsetView


class AppendProgress:
    """How far a write of several chunks has got, set by its write thread and read on the loop.

    The thread sets ``started`` (when the next chunk is handed to the log) before ``written`` (the
    records acknowledged and applied before it), and the loop reads them in the other order, so a
    ``written`` the loop sees is never paired with an older ``started``."""

    __slots__ = ("started", "total", "written")

    def __init__(self, total: int) -> None:
        self.total = total
        self.written = 0
        self.started = time.monotonic()

    def chunk_done(self, written: int) -> None:
        self.started = time.monotonic()
        self.written = written


class Deadline:
    """When the request must be answered (``time.monotonic`` seconds), and how to wait within it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(self.at - time.monotonic(), 0.0)

    async def within(self, awaitable: Awaitable[T], what: str, then: str = "nothing was written") -> T:
        """Await ``awaitable`` until the deadline; ``LogTimeout`` after it (a step before any write).

        ``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for`` wraps a coroutine in a
        task of its own, a task and two loop turns more on every PATCH's checks."""
        try:
            async with asyncio.timeout(self.remaining()):
                return await awaitable
        except TimeoutError:
            raise LogTimeout(f"{what} took longer than {self.seconds:g} s (--write-timeout); {then}") from None

    async def within_unknown(self, awaitable: Awaitable[T], what: str, overrun_s: float = 0.0) -> T:
        """Await a write that has no way to learn its outcome later (a consumer-group change):
        ``WriteOutcomeUnknown`` after the deadline (a later read says whether it happened).
        ``overrun_s``: for a log call given the time left as its own timeout (a claim), how much
        longer it is waited for, so that its own answer at the deadline (``log_timeout``: nothing
        was done) arrives instead of "it may still happen"."""
        try:
            async with asyncio.timeout(self.remaining() + overrun_s):
                return await awaitable
        except TimeoutError:
            raise WriteOutcomeUnknown(
                f"{what} did not finish within {self.seconds:g} s (--write-timeout); it may still happen"
            ) from None


async def check_writer_within(
    guard: WriteGuard, deadline: Deadline, connector: str, auth: WriteAuth, takes_epoch: bool = True
) -> None:
    """``WriteGuard.check_writer`` within ``deadline`` (503 ``log_timeout`` after it): a Kafka claims
    topic is read to its end for it, which a stalled broker holds for the claims store's own 30 s.
    No timer where no lookup is made (``looks_up``): a timer on every write costs the loop."""
    if guard.looks_up(connector, auth):
        await deadline.within(
            guard.check_writer(connector, auth, deadline.remaining(), takes_epoch=takes_epoch), "Checking claims"
        )


@dataclass(eq=False, slots=True)
class _Held:
    lock: asyncio.Lock
    users: int = 0


class ConnectorLocks:
    """One asyncio lock per connector (kept only while used); a write spanning connectors takes each of
    them (``acquire_many``).

    A write spanning connectors (an import) used to take every connector at once: while a 150,000-record
    import was checked and written (21 s in the lane QA's run), no other connector could be written, and
    on the embedded log Connect's own commits of unrelated connectors were refused at their deadline. It
    now takes the connectors its records name, in sorted order, so two such writes never wait for each
    other in a circle, and a one-connector write waits only for a write of its own connector. (asyncio
    locks are FIFO, so no side starves.)
    """

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}
        self.importing: set[str] = set()
        """Connectors held by a write spanning connectors (an import): what a section that timed out waited for."""

    async def acquire(self, connector: str, timeout_s: float | None) -> None:
        """Take ``connector``'s lock within ``timeout_s`` (``TimeoutError`` otherwise)."""
        async with asyncio.timeout(timeout_s):
            await self._take(connector)

    async def _take(self, connector: str) -> None:
        held = self._held.setdefault(connector, _Held(asyncio.Lock()))
        held.users += 1
        try:
            await held.lock.acquire()
        except BaseException:
            self._forget(connector, held)
            raise

    def release(self, connector: str) -> None:
        held = self._held[connector]
        held.lock.release()
        self._forget(connector, held)

    def _forget(self, connector: str, held: _Held) -> None:
        held.users -= 1
        if held.users == 0:
            del self._held[connector]

    async def acquire_many(self, connectors: Iterable[str], timeout_s: float | None) -> list[str]:
        """Each of ``connectors``' locks, in sorted order, within ``timeout_s`` (``TimeoutError`` otherwise,
        holding none of them); the connectors taken, for ``release_many``. A write handed over to the
        background after an unknown outcome keeps them until the log answers, however long that takes.

        An import may name many thousands of connectors: a lock nobody holds is taken without waiting,
        and the loop is given back every ``_YIELD_EVERY`` of them."""
        taken: list[str] = []
        try:
            async with asyncio.timeout(timeout_s):
                for count, connector in enumerate(sorted(set(connectors)), 1):
                    await self._take(connector)
                    taken.append(connector)
                    self.importing.add(connector)
                    if count % _YIELD_EVERY == 0:
                        await asyncio.sleep(0)
        except BaseException:
            self.release_many(taken)
            raise
        return taken

    def release_many(self, connectors: list[str]) -> None:
        """What ``acquire_many`` took; not necessarily by the task that took it (a write handed over to
        the background releases them once the log answered: ``OffsetsWriter.finish_later``)."""
        for connector in reversed(connectors):
            self.importing.discard(connector)
            self.release(connector)


_YIELD_EVERY = 1000


class _Section:
    """What a write holds from taking its lock(s) until it is answered, and how it waits for the log.

    Held by the request and, after a write's outcome turned out unknown (``WriteOutcomeUnknown``),
    also by the background task that waits for the log's answer (``OffsetsWriter.finish_later``): the
    lock(s) go back once both let go (``leave``), so a retry never overtakes the write it retries. A
    count, not a flag: a section may hand over more than one write (an import of several stores)."""

    def __init__(self, writer: OffsetsWriter, deadline: Deadline, subject: str, release: Callable[[], None]) -> None:
        self._writer = writer
        self.deadline = deadline
        self.subject = subject
        """What is written, for messages: ``a write of connector c``, ``an import's write``."""
        self._release = release
        self._holders = 1

    @property
    def handed_over(self) -> bool:
        """Whether a write of this section still waits for the log's answer in the background."""
        return self._holders > 1

    def leave(self) -> None:
        """One holder (the request, or a write handed over) is done; the last one gives the lock(s) back."""
        self._holders -= 1
        if self._holders == 0:
            self._release()

    async def _in_thread(
        self,
        append: Callable[[float, AppendProgress | None], None],
        count: int,
        timeout_s: float,
        where: str,
        on_applied: Callable[[], None] | None = None,
    ) -> None:
        """``append(timeout_s, progress)`` (a blocking ``OffsetsWriter.append_now`` of ``count``
        records) in a write thread, waited for within ``timeout_s`` + the overrun, chunk by chunk
        (``_settled``), then ``on_applied``.

        A future the write thread resolves (no task around it): the write outlives this request if
        the deadline passes (see ``_hand_over``), and waiting on it costs no task of its own."""
        progress = AppendProgress(count) if count > _APPEND_CHUNK else None
        call = WRITE_THREADS.submit(lambda: append(timeout_s, progress))
        await self._settled(call, timeout_s + OVERRUN_S, on_applied, where, progress)

    async def _settled(
        self,
        call: asyncio.Future[T],
        timeout_s: float,
        on_applied: Callable[[], None] | None,
        where: str,
        progress: AppendProgress | None = None,
    ) -> None:
        """Wait up to ``timeout_s`` for the write ``call``, then ``on_applied``. When the deadline
        passes or the request goes away first, the write goes on and the section with it.

        A write of several chunks (``progress``): each acknowledged chunk starts the next one's wait,
        a whole ``--write-timeout`` (+ the overrun) from when that chunk was handed to the log, so a big
        write that keeps making progress is waited for, while a log that stops answering is answered
        within one chunk's deadline."""
        wait_s = timeout_s
        seen = 0
        while True:
            try:
                done, _ = await asyncio.wait({call}, timeout=wait_s)
            except asyncio.CancelledError:  # the request went away; the write goes on, and so must its end
                self._hand_over(call, on_applied)
                raise
            if done:
                break
            if progress is not None:
                written = progress.written  # read before ``started``: see ``AppendProgress``
                started = progress.started
                if written > seen:  # a chunk was acknowledged meanwhile: wait for the next one
                    seen = written
                    wait_s = max(started + self._writer.write_timeout_s + OVERRUN_S - time.monotonic(), 0.0)
                    continue
            self._hand_over(call, on_applied)
            if seen:
                assert progress is not None
                raise WriteOutcomeUnknown(
                    f"{where} did not answer {self.subject} within "
                    f"{self.deadline.seconds:g} s (--write-timeout) of its previous chunk; the first {seen:,} of "
                    f"this write's {progress.total:,} records were written and are in effect, the other "
                    f"{progress.total - seen:,} may still be applied"
                )
            raise WriteOutcomeUnknown(
                f"{where} did not answer {self.subject} within "
                f"{self.deadline.seconds:g} s (--write-timeout); it may still be applied"
            )
        try:
            call.result()
        except WriteOutcomeUnknown as unknown:
            self._unknown(unknown, on_applied)
            raise
        if on_applied is not None:
            on_applied()

    def _unknown(self, unknown: WriteOutcomeUnknown, on_applied: Callable[[], None] | None) -> None:
        """A write the log will answer later: the section waits for that answer in the background."""
        if unknown.outcome is not None:
            outcome: Awaitable[list[Position]] = asyncio.wrap_future(unknown.outcome)
            self._hand_over(outcome, on_applied)

    def _hand_over(self, outcome: Awaitable[object], on_applied: Callable[[], None] | None) -> None:
        self._holders += 1
        self._writer.finish_later(self, outcome, on_applied)


class WriteSection(_Section):
    """One connector's critical section: everything between taking its lock and answering.

    Obtained from ``OffsetsWriter.section``; ``append`` writes, and after ``WriteOutcomeUnknown``
    the section belongs to the background task that waits for the log's answer too.
    """

    def __init__(self, writer: OffsetsWriter, connector: str, deadline: Deadline, release: Callable[[], None]) -> None:
        super().__init__(writer, deadline, f"a write of connector {connector}", release)
        self.connector = connector

    async def plan(self, partitions: int, work: Callable[[], T], size: int = 0) -> T:
        """``work()``, the write's planning, as ``bulk_pass`` runs it, within the section's deadline: the
        loops of ``work`` that go through ``bulk.abandonable`` stop there, and the request is answered
        503 ``log_timeout`` then, nothing written (before, a plan of 200,000 partitions ran to its end
        and was answered after 15-27 s on a loaded machine)."""
        try:
            return await bulk_pass(partitions, work, size, stop_at=self.deadline.at)
        except PassAbandoned:
            raise abandoned(f"Planning the write of {partitions:,} partition(s)", self.deadline.seconds) from None

    async def append(
        self,
        records: Sequence[PlannedRecord],
        auth: WriteAuth,
        on_applied: Callable[[], None] | None = None,
        target: AppendTarget | None = None,
    ) -> None:
        """Write ``records`` under the writer's claim (if any), apply them to the view, then call
        ``on_applied`` (e.g. record the commit sequence). Nothing to write: only ``on_applied``.
        ``target``: write another log (and apply to its view) instead, in the same section."""
        entries = [(r.key, r.value) for r in records]
        if not entries:
            if on_applied is not None:
                on_applied()
            return
        remaining = self.deadline.remaining()
        if remaining <= 0:
            raise LogTimeout(
                f"the checks before writing connector {self.connector} took the whole {self.deadline.seconds:g} s "
                "(--write-timeout); nothing was written"
            )
        where = self._writer.description if target is None else target.description
        if target is None:
            try:
                started = self._writer.start_append(self.connector, auth, entries)
            except WriteOutcomeUnknown as unknown:
                self._unknown(unknown, on_applied)
                raise
            if started is not None:  # the log's own thread wakes the loop: no worker parked for it
                await self._settled(asyncio.wrap_future(started), self.deadline.remaining(), on_applied, where)
                return
        append_now = self._writer.append_now
        connector = self.connector

        def append(timeout_s: float, progress: AppendProgress | None) -> None:
            append_now(connector, auth, entries, timeout_s, target, progress)

        await self._in_thread(append, len(entries), remaining, where, on_applied)

    async def outside(self, write: Awaitable[T], what: str, overrun_s: float = 0.0) -> T:
        """Await ``write``, a change this daemon makes outside any log (a sink connector's consumer group
        through the admin client, a claim), within the deadline: ``WriteOutcomeUnknown`` after it, as
        ``Deadline.within_unknown`` answers (no later answer says whether it happened). ``overrun_s``: as
        for ``within_unknown``, for a call given the time left as its own timeout (a claim).

        The write goes on after that answer, and the section with it until it returned, as a log write
        answered late keeps it (``finish_later``): so the connector's next modification through this
        daemon (a PATCH, a reset that lists the group before deleting it) comes wholly after it. Released
        at the answer, a reset listed the group without that write and then deleted it, or, with no claim
        ever made on the topic (nothing else orders the two), deleted the group before the late commit
        landed on it."""
        task = asyncio.ensure_future(write)
        try:
            async with asyncio.timeout(self.deadline.remaining() + overrun_s):
                return await asyncio.shield(task)
        except TimeoutError:
            self._hand_over(task, None)
            raise WriteOutcomeUnknown(
                f"{what} did not finish within {self.deadline.seconds:g} s (--write-timeout); it may still happen"
            ) from None
        except asyncio.CancelledError:  # the request went away; the write goes on, and so must its end
            if not task.done():
                self._hand_over(task, None)
            raise


class ImportSection(_Section):
    """The sections of every connector an import names, at once: its checks and diff against the live
    view, and its writes (``OffsetsWriter.sections``).

    Each ``append`` gets a whole ``--write-timeout`` of its own for its first chunk (what came before it,
    the diff of up to ~280,000 records, is the daemon's work, not a wait on the log) and each later chunk
    a whole one from when it is handed to the log, as a PATCH's chunks do. A log that does not answer
    within that (+ the overrun) is answered 503 ``write_outcome_unknown``, and every connector it names
    stays held until the log's answer came: it does not know which of them its write turned out to
    have touched."""

    def __init__(self, writer: OffsetsWriter, deadline: Deadline, release: Callable[[], None]) -> None:
        super().__init__(writer, deadline, "an import's write", release)

    async def append(
        self,
        entries: Entries,
        connector: str | None = None,
        auth: WriteAuth = NO_AUTH,
        target: AppendTarget | None = None,
    ) -> None:
        """Write ``entries`` (the worker's log, unfenced: the import checked every connector's claim in
        this section, and a claim through this daemon takes its connector's section, so none can come
        between that check and this write) and apply them to the view; ``connector`` and ``target``:
        another log and its view (a connector's own offsets topic, ``AppendTarget``)."""
        if not entries:
            return
        self.deadline = self._writer.deadline()
        append_now = self._writer.append_now
        where = self._writer.description if target is None else target.description

        def append(timeout_s: float, progress: AppendProgress | None) -> None:
            append_now(connector, auth, entries, timeout_s, target, progress)

        await self._in_thread(append, len(entries), self.deadline.remaining(), where)


class OffsetsWriter:
    def __init__(self, log: OffsetLog, view: OffsetView, guard: WriteGuard, write_timeout_s: float) -> None:
        self._log = log
        self._view = view
        self._guard = guard
        self.write_timeout_s = write_timeout_s
        self._locks = ConnectorLocks()
        self._background: set[asyncio.Task[None]] = set()

    @property
    def description(self) -> str:
        return self._log.description

    @contextlib.asynccontextmanager
    async def sections(self, connectors: Iterable[str]) -> AsyncIterator[ImportSection]:
        """The sections of ``connectors`` at once, for a caller that must check and write atomically across
        them (an import diffs against the live view), taken within ``--write-timeout`` or ``LogTimeout``;
        it writes with ``ImportSection.append``. Writes of other connectors go on meanwhile."""
        deadline = self.deadline()
        try:
            taken = await self._locks.acquire_many(connectors, deadline.remaining())
        except TimeoutError:
            raise LogTimeout(
                f"an import waits for the writes in progress of the connectors it names, and one still held its "
                f"connector after {deadline.seconds:g} s (--write-timeout): its log has not answered that write "
                "yet; nothing was written"
            ) from None
        section = ImportSection(self, deadline, lambda: self._locks.release_many(taken))
        try:
            yield section
        finally:
            section.leave()

    def planned(self, key: bytes, value: bytes | None, existing: bool) -> PlannedRecord:
        """A record to write, placed as Connect's producer places it (murmur2 over the partitions);
        ``InvalidRecord`` when the log would refuse it (so a dry run refuses it too)."""
        self.check_size(key, value)
        return PlannedRecord(key, value, partition_for(key, self._log.partition_count), existing)

    def check_size(self, key: bytes, value: bytes | None) -> None:
        """``InvalidRecord`` when the log would refuse the record (``logs.base.check_record_size``)."""
        check_record_size(self._log, key, value)

    def deadline(self) -> Deadline:
        return Deadline(self.write_timeout_s)

    @contextlib.asynccontextmanager
    async def section(
        self, connector: str, deadline: Deadline, then: str = "nothing was written"
    ) -> AsyncIterator[WriteSection]:
        """``connector``'s critical section, taken before ``deadline`` or ``LogTimeout`` (whose message
        ends with ``then``: what the request did not do, e.g. ``nothing was claimed``)."""
        try:
            await self._locks.acquire(connector, deadline.remaining())
        except TimeoutError:
            if connector in self._locks.importing:
                raise LogTimeout(
                    f"an import held connector {connector} (with the others it names) for {deadline.seconds:g} s "
                    "(--write-timeout): it is still being checked or written (or its log has not answered its "
                    f"write yet); {then}"
                ) from None
            raise LogTimeout(
                f"connector {connector}'s previous write still held it after {deadline.seconds:g} s "
                "(--write-timeout): that write has not finished (it waits for its log's answer, a sink group's "
                "admin call on the broker, or a rollback's read of the history), or a claim of it is still being made; "
                f"{then}"
            ) from None
        section = WriteSection(self, connector, deadline, lambda: self._locks.release(connector))
        try:
            yield section
        finally:
            section.leave()

    async def write(self, connector: str, records: Sequence[PlannedRecord], auth: WriteAuth = NO_AUTH) -> None:
        """Write ``records`` for ``connector`` in its own section, within the write deadline."""
        if not records:
            return
        async with self.section(connector, self.deadline()) as section:
            await section.append(records, auth)

    def start_append(self, connector: str, auth: WriteAuth, entries: Entries) -> Future[list[Position]] | None:
        """On the event loop: ``append_now``'s write of a commit-sized ``entries`` without a worker
        thread, when the log can take it without blocking (``OffsetLog.start_append_fenced``). The
        future completes once the records are acknowledged *and* applied to the view, on the log's
        thread; None when the log declined (then ``append_now`` in a worker)."""
        if len(entries) > _START_MAX_ENTRIES:
            return None
        try:
            started = self._guard.start_append(connector, auth, entries)
        except WriteOutcomeUnknown as unknown:
            if unknown.outcome is None:
                raise
            raise WriteOutcomeUnknown(unknown.message, self._applied_when_known(entries, unknown.outcome, 0)) from None
        return None if started is None else self._applied_when_known(entries, started, 0)

    def append_now(
        self,
        connector: str | None,
        auth: WriteAuth,
        entries: Entries,
        timeout_s: float,
        target: AppendTarget | None = None,
        progress: AppendProgress | None = None,
    ) -> None:
        """In a worker thread: append in chunks, applying each acknowledged chunk to the view at once.

        Chunks keep one huge write from needing one huge timeout: ``timeout_s`` (what is left of the
        request's deadline) bounds the first, and each later one gets a whole ``--write-timeout`` of
        its own from when it is handed to the log; ``progress`` tells the waiting request how far the
        write has got. Read-your-writes without waiting for the reader: the log acknowledged exactly
        these records at exactly these positions (see ``OffsetView.apply_acknowledged``).
        """
        for start in range(0, len(entries), _APPEND_CHUNK):
            chunk = entries[start : start + _APPEND_CHUNK]
            view = self._view if target is None else target.view
            if start:
                timeout_s = self.write_timeout_s
            try:
                if target is not None:
                    positions = target.append(chunk, timeout_s)
                elif connector is None:
                    positions = self._log.append(chunk, timeout_s)
                else:
                    positions = self._guard.append(connector, auth, chunk, timeout_s)
            except WriteOutcomeUnknown as unknown:
                unwritten = len(entries) - start - len(chunk)
                message = (
                    unknown.message if start == 0 else partly_unknown(unknown.message, start, len(chunk), unwritten)
                )
                if unknown.outcome is None:
                    raise WriteOutcomeUnknown(message) from None
                outcome = self._applied_when_known(chunk, unknown.outcome, unwritten, view)
                raise WriteOutcomeUnknown(message, outcome) from None
            except OffsetsError as error:
                if start == 0:
                    raise
                raise partly_written(error, start, len(entries)) from error
            self._apply(chunk, positions, view)
            if progress is not None:
                progress.chunk_done(start + len(chunk))

    def _apply(self, chunk: Entries, positions: Sequence[Position], view: OffsetView | None = None) -> None:
        now_ms = time.time_ns() // 1_000_000
        (view or self._view).apply_acknowledged(
            [LogRecord(k, v, p.partition, p.offset, now_ms) for (k, v), p in zip(chunk, positions, strict=True)]
        )

    def _applied_when_known(
        self, chunk: Entries, outcome: Future[list[Position]], unwritten: int, view: OffsetView | None = None
    ) -> Future[list[Position]]:
        """``outcome``, with the chunk applied to the view first when it turns out written; a failure
        if records after the chunk were never attempted (the write as a whole did not happen)."""
        applied: Future[list[Position]] = Future()
        applied.set_running_or_notify_cancel()  # only the log's answer completes it, never a cancel

        def settle(done: Future[list[Position]]) -> None:
            try:
                positions = done.result()
                self._apply(chunk, positions, view)
            except BaseException as exc:
                applied.set_exception(exc)
                return
            if unwritten:
                applied.set_exception(
                    LogWriteError(f"{len(chunk)} records were written late; the {unwritten} after them were not")
                )
            else:
                applied.set_result(positions)

        outcome.add_done_callback(settle)
        return applied

    def finish_later(
        self, section: _Section, outcome: Awaitable[object], on_applied: Callable[[], None] | None
    ) -> None:
        """Keep ``section``'s connector(s) until ``outcome`` is known, then finish the write as if on time."""
        task = asyncio.get_running_loop().create_task(self._finish(section, outcome, on_applied))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _finish(
        self, section: _Section, outcome: Awaitable[object], on_applied: Callable[[], None] | None
    ) -> None:
        started = time.monotonic()
        try:
            while True:
                try:
                    await outcome
                    break
                except WriteOutcomeUnknown as unknown:  # a log call that overran: now it says how to learn
                    if unknown.outcome is None:
                        raise
                    resolved: Awaitable[list[Position]] = asyncio.wrap_future(unknown.outcome)
                    outcome = resolved
        except Exception as exc:
            log.warning(
                "%s that timed out was not applied (known %.1f s after it timed out): %s",
                section.subject,
                time.monotonic() - started,
                getattr(exc, "message", repr(exc)),
            )
            section.leave()
            return
        try:
            if on_applied is not None:
                on_applied()
            log.warning(
                "%s that timed out was applied (known %.1f s after it timed out)",
                section.subject,
                time.monotonic() - started,
            )
        finally:
            section.leave()
