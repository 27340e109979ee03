"""Source connectors' offsets: records of the offsets topic, planned and written through.

Semantics follow Connect's ``Worker.modifySourceConnectorOffsets``, with two deliberate
refinements that make writes reach the bytes tasks read (docs/protocol.md §4.5):
- a partition that already exists is written under every live raw key that denotes it, not under
  a re-serialized HashMap-ordered key;
- a new partition is encoded in the key order of the request.
Writes return only once the log acknowledged them and the view applied them (read-your-writes).
"""

from __future__ import annotations

from emulator.codec.keys import encode_key, logical_id
from emulator.codec.values import encode_offset
from emulator.history.origins import write_origin
from emulator.model.offsets import ConnectorOffset
from emulator.service.bodies import OffsetChange, validate_changes
from emulator.service.results import ALTERED, RESET, ModifyResult, PlannedRecord
from emulator.service.write_guard import WriteAuth, WriteGuard
from emulator.service.writer import OffsetsWriter
from emulator.view.offset_view import OffsetView


class SourceStrategy:
    def __init__(self, view: OffsetView, writer: OffsetsWriter, guard: WriteGuard) -> None:
        self._view = view
        self._writer = writer
        self._guard = guard

    def connectors(self) -> list[str]:
        return self._view.connectors()

    async def offsets(self, connector: str) -> list[ConnectorOffset]:
        return [ConnectorOffset(partition=row.partition, offset=row.offset) for row in self._view.offsets(connector)]

    async def alter(self, connector: str, changes: list[OffsetChange], dry_run: bool, auth: WriteAuth) -> ModifyResult:
        """Connect's ``validateFormat``, then the commit sequence (a stale commit is dropped per
        partition, not written), then the write."""
        validate_changes(changes)
        sequenced = self._guard.filter_sequence(connector, changes, auth)
        records = self._plan_alter(connector, sequenced.accepted)
        if not dry_run:
            with write_origin("PATCH", connector):
                await self._writer.write(connector, records, auth)
            self._guard.record_sequence(connector, sequenced.accepted, auth)
        return ModifyResult(ALTERED, records, dry_run, sequenced.dropped)

    async def reset(self, connector: str, dry_run: bool, auth: WriteAuth) -> ModifyResult:
        """A tombstone for every live raw key of the connector (all the keys that denote a partition)."""
        records = [
            self._writer.planned(key, None, existing=True) for row in self._view.offsets(connector) for key in row.keys
        ]
        if not dry_run:
            with write_origin("DELETE", connector):
                await self._writer.write(connector, records, auth)
        return ModifyResult(RESET, records, dry_run)

    def _plan_alter(self, connector: str, changes: list[OffsetChange]) -> list[PlannedRecord]:
        records: list[PlannedRecord] = []
        for change in changes:
            value = encode_offset(change.offset)
            existing = self._view.find(connector, logical_id(change.partition))
            if existing:
                records.extend(self._writer.planned(key, value, existing=True) for key in existing)
            else:
                records.append(self._writer.planned(encode_key(connector, change.partition), value, existing=False))
        return records
