"""The offsets operations behind the REST API, CLI and clients: list, get, alter, reset.

Semantics follow Connect's ``Worker.modifySourceConnectorOffsets`` and herder checks (order:
body → exists → STOPPED → validateFormat → write), with two deliberate refinements that exist to
make writes reach the bytes tasks read (see connect-offsets-protocol.md §4.5):
- a partition that already exists is written under every live raw key that denotes it, not under
  a re-serialized HashMap-ordered key;
- a new partition is encoded in the key order of the request.
Writes return only once the log acknowledged them and the view applied them (read-your-writes).

Sink connectors (per the Connect cluster's config, or ``kind="sink"`` without one) have no offsets
in the log: their GET/PATCH/DELETE work on the connector's consumer group (``emulator.service.sinks``).
With a Connect cluster, its config topic decides existence (404) and the STOPPED rule (400), and is
read to its end before every modification, as the herder does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from emulator.codec.keys import encode_key, logical_id
from emulator.codec.murmur2 import partition_for
from emulator.codec.values import encode_offset
from emulator.formats.diff import Diff, compute_diff
from emulator.formats.model import KeyIndex, RawRecord
from emulator.history.origins import write_origin
from emulator.logs.base import OffsetLog
from emulator.model.claims import Claim
from emulator.model.connectors import ConnectorKind, ConnectorStates, not_found_message, not_stopped_message
from emulator.model.errors import BadRequest, EmulatorError, LogReadError, NotFound, NotReady
from emulator.model.records import LogRecord
from emulator.model.sequences import SequenceTracker
from emulator.service.bodies import OffsetChange, validate_changes
from emulator.service.sinks import SinkOffsets, consumer_group_id, parse_sink_offsets, plan_alter
from emulator.service.write_guard import WriteAuth, WriteGuard
from emulator.view.offset_view import OffsetView

NO_AUTH = WriteAuth()
"""Connect's own API: no claim epoch, no sequence."""

ALTERED = (
    "The Connect framework-managed offsets for this connector have been altered successfully. However, if this "
    "connector manages offsets externally, they will need to be manually altered in the system that the connector uses."
)
RESET = (
    "The Connect framework-managed offsets for this connector have been reset successfully. However, if this "
    "connector manages offsets externally, they will need to be manually reset in the system that the connector uses."
)


@dataclass(frozen=True, slots=True)
class PlannedRecord:
    """A record a modification would write, shown as-is by dry runs."""

    key: bytes
    value: bytes | None
    partition: int
    existing: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key.decode("utf-8", errors="backslashreplace"),
            "value": None if self.value is None else self.value.decode("utf-8", errors="backslashreplace"),
            "kafka_partition": self.partition,
            "existing_key": self.existing,
        }


_APPEND_CHUNK = 10_000


@dataclass(frozen=True, slots=True)
class ImportResult:
    diff: Diff
    written: int
    dry_run: bool


class PlannedChange(Protocol):
    """One step a modification would take (a log record, or a consumer-group change for sinks)."""

    def as_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ModifyResult:
    message: str
    records: Sequence[PlannedChange]
    dry_run: bool
    dropped: list[dict[str, Any]] = field(default_factory=list)
    """Partitions whose commit carried a stale sequence and was not applied (reordering detection)."""


NO_SINKS_MESSAGE = (
    "Sink connector offsets are the committed offsets of the connector's consumer group; they need a Kafka "
    "cluster (--bootstrap-servers): the embedded log has no consumer groups"
)


class OffsetsService:
    def __init__(
        self,
        log: OffsetLog,
        view: OffsetView,
        states: ConnectorStates,
        write_timeout_s: float = 60.0,
        sinks: SinkOffsets | None = None,
        guard: WriteGuard | None = None,
    ) -> None:
        self._log = log
        self.guard = guard or WriteGuard(log, states, SequenceTracker())
        self._view = view
        self._states = states
        self._write_timeout_s = write_timeout_s
        self._sinks = sinks
        # One modification at a time per daemon: a reset racing an alter of the same connector
        # must not interleave their records.
        self._write_lock = asyncio.Lock()

    # -- reads ----------------------------------------------------------------------------
    def ensure_ready(self) -> None:
        progress = self._log.progress()
        if progress.error is not None:
            raise NotReady(f"The offsets log cannot be read: {progress.error}")
        if not progress.caught_up:
            raise NotReady(
                "The offsets log has not been read to the end yet "
                f"({progress.records_read} records read; {progress.partitions_done}/"
                f"{len(progress.end_offsets)} partitions at their end offsets); try again shortly"
            )
        self._states.ensure_ready()

    def connectors(self) -> list[str]:
        self.ensure_ready()
        return self._view.connectors()

    def offsets(self, connector: str) -> list[dict[str, Any]]:
        self.ensure_ready()
        self._require_known(connector)
        return [{"partition": row.partition, "offset": row.offset} for row in self._view.offsets(connector)]

    async def get_offsets(self, connector: str, kind: str | None = None) -> list[dict[str, Any]]:
        """GET for any kind of connector: a sink's come from its consumer group."""
        self.ensure_ready()
        if self._resolve_kind(connector, kind) == "sink":
            return await self._require_sinks().offsets(connector, self._group(connector))
        return self.offsets(connector)

    def _require_known(self, connector: str) -> None:
        """Connect's 404: with a Connect cluster, a live config decides; without one, having offsets."""
        exists = self._states.exists(connector)
        if exists is None:
            exists = self._view.knows(connector)
        if not exists:
            raise NotFound(not_found_message(connector))

    def _require_modifiable(self, connector: str, create: bool = False) -> None:
        self.ensure_ready()
        if not create:
            self._require_known(connector)
        if not self._states.is_stopped(connector):
            raise BadRequest(not_stopped_message(connector))

    async def _refresh_states(self) -> None:
        """The herder reads the config topic to its end before checking a modification."""
        await asyncio.to_thread(self._states.refresh, self._write_timeout_s)

    def _resolve_kind(self, connector: str, kind: str | None, create: bool = False) -> ConnectorKind:
        """Sink or source. The Connect cluster's config decides; without one, ``kind`` (ours) does.

        Raises Connect's 404 for a connector the cluster does not know, except a source with
        ``create`` (ours: seeding offsets for a connector that is not, or not yet, in Connect).
        """
        if kind not in (None, "source", "sink"):
            raise BadRequest(f"kind must be 'source' or 'sink', got {kind!r}")
        exists = self._states.exists(connector)
        if exists is None:
            return "sink" if kind == "sink" else "source"
        if not exists:
            if create and kind != "sink":
                return "source"
            raise NotFound(not_found_message(connector))
        registered = self._states.kind(connector) or "source"
        if kind is not None and kind != registered:
            raise BadRequest(
                f"Connector {connector} is a {registered} connector according to the Connect cluster's config "
                f"topic; kind={kind} does not apply to it"
            )
        return registered

    async def _checked_kind(self, connector: str, kind: str | None, create: bool = False) -> ConnectorKind:
        """Connect's order for PATCH/DELETE: read to end → exists (404) → STOPPED with 0 tasks (400)."""
        self.ensure_ready()
        await self._refresh_states()
        resolved = self._resolve_kind(connector, kind, create)
        if resolved == "source" and not create:
            self._require_known(connector)
        if not self._states.is_stopped(connector):
            raise BadRequest(not_stopped_message(connector))
        return resolved

    def _require_sinks(self) -> SinkOffsets:
        if self._sinks is None:
            raise BadRequest(NO_SINKS_MESSAGE)
        return self._sinks

    def _group(self, connector: str) -> str:
        return consumer_group_id(connector, self._states.config(connector))

    # -- claims ---------------------------------------------------------------------------
    async def claim(self, connector: str, owner: str, force: bool = False) -> Claim:
        """Claim, then read the log to its end before answering: the new owner's next read must see
        every write of the owner it fenced (none can follow: the fence is in the log), or it could
        resume from a stale offset and move it backwards."""
        self.ensure_ready()
        claim = await self.guard.claim(connector, owner, force)
        await self.read_to_end()
        return claim

    async def read_to_end(self) -> None:
        """Connect's ``readToEnd``: wait (in a worker thread, on the log's condition, not by polling)
        until the reader has applied everything in the log now."""
        try:
            await asyncio.to_thread(self._log.read_to_end, self._write_timeout_s)
        except LogReadError as exc:
            raise EmulatorError(
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
        resolved = await self._checked_kind(connector, kind, create)
        await self.guard.check_writer(connector, auth)
        if resolved == "sink":
            sinks = self._require_sinks()
            parsed = parse_sink_offsets(changes)
            group = self._group(connector)
            if not dry_run:
                await sinks.alter(connector, group, parsed)
            return ModifyResult(ALTERED, plan_alter(group, parsed), dry_run)
        validate_changes(changes)
        sequenced = self.guard.filter_sequence(connector, changes, auth)
        with write_origin("PATCH", connector):
            result = await self._modify(
                connector, self._plan_alter(connector, sequenced.accepted), ALTERED, dry_run, auth
            )
        if not dry_run:
            self.guard.record_sequence(connector, sequenced.accepted, auth)
        return replace(result, dropped=sequenced.dropped)

    async def reset(
        self, connector: str, dry_run: bool = False, kind: str | None = None, auth: WriteAuth = NO_AUTH
    ) -> ModifyResult:
        resolved = await self._checked_kind(connector, kind)
        await self.guard.check_writer(connector, auth)
        if resolved == "sink":
            sinks, group = self._require_sinks(), self._group(connector)
            planned = await (sinks.plan_reset if dry_run else sinks.reset)(connector, group)
            return ModifyResult(RESET, planned, dry_run)
        records = [self._planned(key, None, existing=True) for row in self._view.offsets(connector) for key in row.keys]
        with write_origin("DELETE", connector):
            return await self._modify(connector, records, RESET, dry_run, auth)

    async def write_raw(
        self,
        connector: str,
        entries: list[tuple[bytes, bytes | None]],
        message: str,
        *,
        operation: str,
        dry_run: bool = False,
    ) -> ModifyResult:
        """Write exact key/value bytes for one connector (history rollback), under the same rules as
        PATCH: read to the end, STOPPED, read-your-writes. The connector need not be live now: a
        rollback may bring back a connector that was reset since."""
        await self._refresh_states()
        self._require_modifiable(connector, create=True)
        await self.guard.check_writer(connector, NO_AUTH)
        records = [self._planned(key, value, existing=self._view.get_raw(key) is not None) for key, value in entries]
        with write_origin(operation, connector):
            return await self._modify(connector, records, message, dry_run)

    def _plan_alter(self, connector: str, changes: list[OffsetChange]) -> list[PlannedRecord]:
        records: list[PlannedRecord] = []
        for change in changes:
            value = encode_offset(change.offset)
            existing = self._view.find(connector, logical_id(change.partition))
            if existing:
                records.extend(self._planned(key, value, existing=True) for key in existing)
            else:
                records.append(self._planned(encode_key(connector, change.partition), value, existing=False))
        return records

    def _planned(self, key: bytes, value: bytes | None, existing: bool) -> PlannedRecord:
        return PlannedRecord(key, value, partition_for(key, self._log.partition_count), existing)

    async def _modify(
        self,
        connector: str,
        records: list[PlannedRecord],
        message: str,
        dry_run: bool,
        auth: WriteAuth = NO_AUTH,
    ) -> ModifyResult:
        if dry_run or not records:
            return ModifyResult(message, records, dry_run)
        entries = [(r.key, r.value) for r in records]
        async with self._write_lock:
            await self._append_locked(entries, connector, auth)
        return ModifyResult(message, records, dry_run)

    async def _append_locked(
        self,
        entries: list[tuple[bytes, bytes | None]],
        connector: str | None = None,
        auth: WriteAuth = NO_AUTH,
    ) -> None:
        """Append (in chunks, each bounded by the write timeout) and apply it to the view once acknowledged.

        The caller holds ``_write_lock``. Chunks keep one huge import from needing one huge timeout.
        """
        for start in range(0, len(entries), _APPEND_CHUNK):
            chunk = entries[start : start + _APPEND_CHUNK]
            if connector is None:
                positions = await asyncio.to_thread(self._log.append, chunk, self._write_timeout_s)
            else:
                positions = await asyncio.to_thread(self.guard.append, connector, auth, chunk, self._write_timeout_s)
            # Read-your-writes without waiting for the reader's next fetch: the log acknowledged
            # exactly these records at exactly these positions (see OffsetView.apply_acknowledged).
            now_ms = time.time_ns() // 1_000_000
            self._view.apply_acknowledged(
                [LogRecord(k, v, p.partition, p.offset, now_ms) for (k, v), p in zip(chunk, positions, strict=True)]
            )

    # -- raw import (byte-exact transfers: POST /offsets/records) ----------------------------
    async def import_records(
        self,
        records: list[RawRecord],
        *,
        dry_run: bool = False,
        allow_malformed: bool = False,
        write_all: bool = False,
    ) -> ImportResult:
        """Write raw records as-is (no re-encoding) and answer the diff against the live view.

        Connect's rules still hold: every key must be a Connect offsets key unless
        ``allow_malformed`` (a record no task can read is almost always a mistake), and every
        connector touched must be STOPPED. Records that change nothing are not written unless
        ``write_all``, so re-running an import is a no-op.
        """
        self.ensure_ready()
        await self._refresh_states()
        keys = KeyIndex()
        malformed = [r.key for r in records if keys.connector(r.key) is None]
        if malformed and not allow_malformed:
            first = malformed[0][:200].decode("utf-8", "backslashreplace")
            raise BadRequest(
                f'{len(malformed)} record key(s) are not Connect offsets keys ["<connector>",{{…}}] '
                f"(first: {first}); Connect would ignore them. Pass allow_malformed=true to import them as-is"
            )
        async with self._write_lock:
            diff = compute_diff(self._live_value, records, keys)
            for connector in diff.connectors():
                if not self._states.is_stopped(connector):
                    raise BadRequest(not_stopped_message(connector))
                await self.guard.check_writer(connector, NO_AUTH)
            to_write = diff.records_to_write(write_all)
            if not dry_run and to_write:
                touched = diff.connectors()
                with write_origin("import", touched[0] if len(touched) == 1 else None):
                    await self._append_locked([(r.key, r.value) for r in to_write])
        return ImportResult(diff, 0 if dry_run else len(to_write), dry_run)

    def _live_value(self, key: bytes) -> bytes | None:
        entry = self._view.get_raw(key)
        return None if entry is None else entry.value
