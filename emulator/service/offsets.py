"""The KIP-875 offsets operations behind the REST API, CLI and clients: list, get, alter, reset.

This service only does Connect's checks, in Connect's order (body → exists → STOPPED →
validateFormat → write; the body is parsed before it is called), and then hands the request to one
strategy, chosen once per request from the connector's type:
- ``SourceStrategy``: records of the offsets topic, written through to the view;
- ``SinkStrategy``: the committed offsets of the connector's consumer group.

With a Connect cluster, its config topic decides existence, type and the STOPPED rule, and is read
to its end before every modification, as the herder does (``emulator.service.checks``). Claims and
commit sequences (ours) are checked by the ``WriteGuard`` right after Connect's rules, inside the
connector's write section (``emulator.service.writer``): one modification of a connector at a time,
each answered within ``--write-timeout`` (503 after it, saying whether anything may have been
written). A read may ask for freshness (``fresh``): the log is first read to its current end, as
the herder does before a modification, so it reflects every write any daemon acknowledged before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Hashable
from typing import Protocol

from emulator.logs.base import OffsetLog
from emulator.model.connectors import ConnectorKind
from emulator.model.errors import InvalidRequest, LogTimeout, LogUnavailable, NotReady
from emulator.model.offsets import ConnectorOffset
from emulator.service.bodies import OffsetChange
from emulator.service.checks import ConnectorChecks
from emulator.service.connector_stores import SourceOffsets
from emulator.service.results import ModifyResult
from emulator.service.write_guard import NO_AUTH, WriteAuth, WriteGuard
from emulator.service.writer import Deadline, OffsetsWriter, WriteSection, check_writer_within

_READING = "Reading the log to its end"
"""What ``read_to_end`` waits for, as ``Deadline.within`` words its timeout."""


class OffsetsStrategy(Protocol):
    """How one type of connector keeps its offsets; called once Connect's checks have passed."""

    async def offsets(self, connector: str) -> list[ConnectorOffset]: ...

    async def alter(
        self, connector: str, changes: list[OffsetChange], dry_run: bool, auth: WriteAuth, section: WriteSection
    ) -> ModifyResult: ...

    async def reset(self, connector: str, dry_run: bool, auth: WriteAuth, section: WriteSection) -> ModifyResult: ...


class OffsetsService:
    def __init__(
        self,
        log: OffsetLog,
        checks: ConnectorChecks,
        guard: WriteGuard,
        writer: OffsetsWriter,
        source: SourceOffsets,
        sink: OffsetsStrategy,
    ) -> None:
        self._log = log
        self._checks = checks
        self._guard = guard
        self._writer = writer
        self._source = source
        self._sink = sink
        self._write_timeout_s = writer.write_timeout_s

    def _strategy(self, kind: ConnectorKind) -> OffsetsStrategy:
        return self._sink if kind == "sink" else self._source

    # -- reads ----------------------------------------------------------------------------
    def serves_reads(self) -> bool:
        """Whether the offsets routes answer reads now: every log replayed once. True while the
        broker is unreachable too (``/readyz`` then 503): reads answer from the view in memory."""
        try:
            self._checks.ensure_ready()
        except NotReady:
            return False
        return True

    async def connectors(self, fresh: bool = False) -> list[str]:
        """With a Connect cluster, Connect's answer: its configured connectors, sources and sinks,
        with or without offsets. Without one, the connectors that have offsets in the log.
        ``fresh``: read the log (and the cluster's config topic) to its end first."""
        self._checks.ensure_ready()
        if fresh:
            await self.read_to_end()
            await self._checks.refresh()
        configured = self._checks.configured_connectors()
        return configured if configured is not None else self._source.connectors()

    async def get_offsets(
        self, connector: str, kind: str | None = None, fresh: bool = False, store: str | None = None
    ) -> list[ConnectorOffset]:
        """GET for any type of connector: a source's from the log (and its own offsets topic, merged as
        Connect merges them; ``store`` picks one, see ``emulator.service.connector_stores``), a sink's from
        its consumer group (always fresh: the broker answers it). ``fresh``: first read the logs to their
        current ends."""
        resolved = await self.prepare_get(connector, kind, fresh, store)
        return await self.rows(connector, resolved, store)

    async def prepare_get(self, connector: str, kind: str | None, fresh: bool, store: str | None) -> ConnectorKind:
        """A GET's checks (and ``fresh`` reads), before its rows: the connector's resolved type."""
        self._checks.ensure_ready()
        resolved = self._checks.connector_type(connector, kind)
        if resolved == "source":
            if fresh:
                await self.read_to_end()
                await self._read_own_topic_to_end(connector, Deadline(self._write_timeout_s))
            self._checks.require_known(connector)
        elif store is not None:
            raise InvalidRequest(f"store= applies to source connectors; {connector} is a sink (its consumer group)")
        return resolved

    async def rows(self, connector: str, resolved: ConnectorKind, store: str | None) -> list[ConnectorOffset]:
        if resolved == "source":
            return await self._source.offsets(connector, store)
        return await self._sink.offsets(connector)

    def source_version(self, connector: str, store: str | None) -> Hashable:
        """Equal while a source connector's GET answers the same (see ``SourceOffsets.version``)."""
        return self._source.version(connector, store)

    def names_version(self) -> Hashable | None:
        """Equal while ``connectors()`` answers the same; None when that is not tracked (a Connect
        cluster's configured connectors)."""
        if self._checks.configured_connectors() is not None:
            return None
        return self._source.names_version()

    async def read_to_end(self, deadline: Deadline | None = None) -> None:
        """Connect's ``readToEnd``: wait (in a worker thread, on the log's condition, not by polling)
        until the reader has applied everything in the log now, within ``--write-timeout`` (or the
        request's ``deadline``).

        Not getting there in time is ``LogTimeout`` (503: retry); a reader that stopped for good
        stays ``LogUnavailable``.
        """
        deadline = deadline or Deadline(self._write_timeout_s)
        try:
            reading = asyncio.to_thread(self._log.read_to_end, deadline.remaining())
            await deadline.within(reading, _READING, "try again")
        except LogTimeout as exc:
            # The log's own reason when it gave one; the deadline's own words would only repeat this.
            why = "" if exc.message.startswith(_READING) else f" ({exc.message})"
            raise LogTimeout(
                f"The offsets log was not read to its end within {self._write_timeout_s:g} s (--write-timeout; "
                f"see /readyz); try again{why}"
            ) from exc
        except LogUnavailable as exc:
            raise LogUnavailable(f"The offsets log cannot be read to its end (see /readyz): {exc.message}") from exc

    # -- writes ---------------------------------------------------------------------------
    async def alter(
        self,
        connector: str,
        changes: list[OffsetChange],
        dry_run: bool = False,
        create: bool = False,
        kind: str | None = None,
        auth: WriteAuth = NO_AUTH,
        deadline: Deadline | None = None,
    ) -> ModifyResult:
        """``create`` (ours, off by default for Connect parity) lets a connector that has never
        committed get its first offsets, e.g. a Spark job seeding a connector that does not exist
        yet; without a Connect cluster there is no other registry of connector names. ``auth``
        carries the writer's claim epoch and commit sequence (``emulator.service.write_guard``).
        ``deadline``: the request's, when it started before (a body that took time to parse)."""
        deadline = self.deadline() if deadline is None else deadline
        resolved = await self._modifiable(deadline, connector, kind, create)
        async with self._writer.section(connector, deadline) as section:
            await self._check_writer(deadline, connector, auth, resolved)
            return await self._strategy(resolved).alter(connector, changes, dry_run, auth, section)

    def deadline(self) -> Deadline:
        """A write's, starting now: ``--write-timeout`` from here."""
        return Deadline(self._write_timeout_s)

    async def reset(
        self,
        connector: str,
        dry_run: bool = False,
        kind: str | None = None,
        auth: WriteAuth = NO_AUTH,
        deadline: Deadline | None = None,
    ) -> ModifyResult:
        """Connect reads the offsets topic to its end before it lists what to reset (docs/protocol.md
        §4.5), and so does this: a reset from a view a moment behind left a partition another writer
        (a Connect task, another daemon) had just committed, and the connector resumed from it.
        A PATCH does not: it writes the partitions it is given, whatever the view holds.
        ``deadline``: the request's, when it started before (a large reset's wait for its turn)."""
        deadline = deadline or Deadline(self._write_timeout_s)
        self._checks.ensure_ready()
        await self.read_to_end(deadline)
        resolved = await self._modifiable(deadline, connector, kind)
        async with self._writer.section(connector, deadline) as section:
            await self._check_writer(deadline, connector, auth, resolved)
            if resolved == "source":
                await self._read_own_topic_to_end(connector, deadline)
            return await self._strategy(resolved).reset(connector, dry_run, auth, section)

    async def read_sources_to_end(self, connectors: Collection[str], deadline: Deadline) -> None:
        """The worker's offsets log, and each of ``connectors``' own offsets topic (KIP-618) where it has
        one, read to their current ends within ``deadline``: what a rollback and an import diff against,
        as a reset does, so that a write another daemon or a Connect task acknowledged before the request
        is in the state it is compared with (503 ``log_timeout`` when the log does not get there in time)."""
        await self.read_to_end(deadline)
        for connector in connectors:
            if self._source.special(connector):
                await self._read_own_topic_to_end(connector, deadline)

    async def _read_own_topic_to_end(self, connector: str, deadline: Deadline) -> None:
        """A connector's own offsets topic (KIP-618 ``offsets.storage.topic``), when it has one."""
        reading = asyncio.to_thread(self._source.read_to_end, connector, deadline.remaining())
        await deadline.within(reading, "Reading the connector's offsets topic to its end", "try again")

    # A check waits within the request's deadline only where it can wait at all: an ``asyncio.timeout``
    # (a timer on the loop, set and cancelled) on every PATCH for checks that return at once was a
    # few per cent of the event loop's time per write, which bounds the commits per second.
    async def _modifiable(
        self, deadline: Deadline, connector: str, kind: str | None, create: bool = False
    ) -> ConnectorKind:
        self._checks.ensure_ready()
        if self._checks.reads_a_registry:
            await self._checks.refresh_within(deadline)
        return self._checks.modifiable(connector, kind, create)

    async def _check_writer(self, deadline: Deadline, connector: str, auth: WriteAuth, kind: ConnectorKind) -> None:
        if kind == "source" and self._source.special(connector):
            self._source.refuse_claimed(connector, auth)  # before the claim lookup: no claim can exist there
        await check_writer_within(self._guard, deadline, connector, auth)
