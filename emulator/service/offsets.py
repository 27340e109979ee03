"""The KIP-875 offsets operations behind the REST API, CLI and clients: list, get, alter, reset.

This service only does Connect's checks, in Connect's order (body → exists → STOPPED →
validateFormat → write; the body is parsed before it is called), and then hands the request to one
strategy, chosen once per request from the connector's type:
- ``SourceStrategy``: records of the offsets topic, written through to the view;
- ``SinkStrategy``: the committed offsets of the connector's consumer group.

With a Connect cluster, its config topic decides existence, type and the STOPPED rule, and is read
to its end before every modification, as the herder does (``emulator.service.checks``). Claims and
commit sequences (ours) are checked by the ``WriteGuard`` right after Connect's rules.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from emulator.logs.base import OffsetLog
from emulator.model.connectors import ConnectorKind
from emulator.model.errors import LogUnavailable
from emulator.model.offsets import ConnectorOffset
from emulator.service.bodies import OffsetChange
from emulator.service.checks import ConnectorChecks
from emulator.service.results import ModifyResult
from emulator.service.source_strategy import SourceStrategy
from emulator.service.write_guard import NO_AUTH, WriteAuth, WriteGuard


class OffsetsStrategy(Protocol):
    """How one type of connector keeps its offsets; called once Connect's checks have passed."""

    async def offsets(self, connector: str) -> list[ConnectorOffset]: ...

    async def alter(
        self, connector: str, changes: list[OffsetChange], dry_run: bool, auth: WriteAuth
    ) -> ModifyResult: ...

    async def reset(self, connector: str, dry_run: bool, auth: WriteAuth) -> ModifyResult: ...


class OffsetsService:
    def __init__(
        self,
        log: OffsetLog,
        checks: ConnectorChecks,
        guard: WriteGuard,
        source: SourceStrategy,
        sink: OffsetsStrategy,
        write_timeout_s: float = 60.0,
    ) -> None:
        self._log = log
        self._checks = checks
        self._guard = guard
        self._source = source
        self._sink = sink
        self._write_timeout_s = write_timeout_s

    def _strategy(self, kind: ConnectorKind) -> OffsetsStrategy:
        return self._sink if kind == "sink" else self._source

    # -- reads ----------------------------------------------------------------------------
    def connectors(self) -> list[str]:
        """With a Connect cluster, Connect's answer: its configured connectors, sources and sinks,
        with or without offsets. Without one, the connectors that have offsets in the log."""
        self._checks.ensure_ready()
        configured = self._checks.configured_connectors()
        return configured if configured is not None else self._source.connectors()

    async def get_offsets(self, connector: str, kind: str | None = None) -> list[ConnectorOffset]:
        """GET for any type of connector: a source's from the log, a sink's from its consumer group."""
        self._checks.ensure_ready()
        resolved = self._checks.connector_type(connector, kind)
        if resolved == "source":
            self._checks.require_known(connector)
        return await self._strategy(resolved).offsets(connector)

    async def read_to_end(self) -> None:
        """Connect's ``readToEnd``: wait (in a worker thread, on the log's condition, not by polling)
        until the reader has applied everything in the log now."""
        try:
            await asyncio.to_thread(self._log.read_to_end, self._write_timeout_s)
        except LogUnavailable as exc:
            raise LogUnavailable(
                f"The offsets log was not read to its end within {self._write_timeout_s:.0f} s (see /readyz)"
            ) from exc

    # -- writes ---------------------------------------------------------------------------
    async def alter(
        self,
        connector: str,
        changes: list[OffsetChange],
        dry_run: bool = False,
        create: bool = False,
        kind: str | None = None,
        auth: WriteAuth = NO_AUTH,
    ) -> ModifyResult:
        """``create`` (ours, off by default for Connect parity) lets a connector that has never
        committed get its first offsets, e.g. a Spark job seeding a connector that does not exist
        yet; without a Connect cluster there is no other registry of connector names. ``auth``
        carries the writer's claim epoch and commit sequence (``emulator.service.write_guard``)."""
        resolved = await self._checks.modifiable(connector, kind, create)
        await self._guard.check_writer(connector, auth)
        return await self._strategy(resolved).alter(connector, changes, dry_run, auth)

    async def reset(
        self, connector: str, dry_run: bool = False, kind: str | None = None, auth: WriteAuth = NO_AUTH
    ) -> ModifyResult:
        resolved = await self._checks.modifiable(connector, kind)
        await self._guard.check_writer(connector, auth)
        return await self._strategy(resolved).reset(connector, dry_run, auth)
