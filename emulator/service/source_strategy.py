"""Source connectors' offsets: records of the offsets topic, planned and written through.

Semantics follow Connect's ``Worker.modifySourceConnectorOffsets``, with two deliberate
refinements that make writes reach the bytes tasks read (docs/protocol.md §4.5):
- a partition that already exists is written under every live raw key that denotes it, not under
  a re-serialized HashMap-ordered key (plus that key where no task reads any of them);
- a new partition is encoded in the key order of the request.
``OffsetChange.keys`` decides the keys for both strategies.
Writes return only once the log acknowledged them and the view applied them (read-your-writes).
Everything from the commit sequence's check to its record happens in the connector's write section
(``emulator.service.writer``), so racing commits of one connector are decided one at a time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from emulator.history.origins import write_origin
from emulator.model.offsets import ConnectorOffset
from emulator.service.audit_notes import note_planned
from emulator.service.bodies import OffsetChange, validate_changes
from emulator.service.bulk import abandonable, bulk_pass, note_request_bytes
from emulator.service.results import ALTERED, RESET, DroppedCommit, ModifyResult, PlannedRecord
from emulator.service.write_guard import SequencedChanges, WriteAuth, WriteGuard
from emulator.service.writer import OffsetsWriter, WriteSection
from emulator.view.offset_view import OffsetView

_LISTED = 10
"""Partitions named in a message before "and N more" (the full list is in ``dropped``)."""


def _partitions(partitions: list[Mapping[str, Any]]) -> str:
    shown = ", ".join(json.dumps(p, separators=(",", ":")) for p in partitions[:_LISTED])
    more = len(partitions) - _LISTED
    return shown if more <= 0 else f"{shown} and {more} more"


def altered_message(applied: list[OffsetChange], dropped: list[DroppedCommit]) -> str:
    """Connect's message when every partition was applied; otherwise which were and which were not.

    A commit whose every partition carried a stale sequence altered nothing and must not say it did
    (the status stays 200, as Connect answers a PATCH it accepted).
    """
    if not dropped:
        return ALTERED
    stale = _partitions([d["partition"] for d in dropped])
    not_applied = f"dropped, because the commit sequence is stale (see 'dropped'): {stale}"
    if not applied:
        return f"No offsets were altered for this connector: every partition of the commit was {not_applied}"
    return f"{ALTERED} Applied: {_partitions([c.partition for c in applied])}; {not_applied}"


class SourceStrategy:
    def __init__(self, view: OffsetView, writer: OffsetsWriter, guard: WriteGuard) -> None:
        self._view = view
        self._writer = writer
        self._guard = guard

    def connectors(self) -> list[str]:
        return self._view.connectors()

    async def offsets(self, connector: str) -> list[ConnectorOffset]:
        """The rows of a GET: every value parsed, so a big connector's leave the event loop."""
        return await view_offsets(self._view, connector)

    def version(self, connector: str) -> int:
        return self._view.version(connector)

    def names_version(self) -> int:
        return self._view.names_version

    async def alter(
        self, connector: str, changes: list[OffsetChange], dry_run: bool, auth: WriteAuth, section: WriteSection
    ) -> ModifyResult:
        """Connect's ``validateFormat``, then the commit sequence (a stale commit is dropped per
        partition, not written), then the write, then the sequence's record: all in ``section``.
        The record also happens when a write that timed out turns out applied later."""

        def planned() -> tuple[SequencedChanges, list[PlannedRecord]]:
            validate_changes(changes)
            sequenced = self._guard.filter_sequence(connector, changes, auth)
            return sequenced, self._plan_alter(connector, sequenced.accepted)

        sequenced, records = await section.plan(len(changes), planned)
        if not dry_run:
            with write_origin("PATCH", connector):
                await section.append(
                    records, auth, on_applied=lambda: self._guard.record_sequence(connector, sequenced.accepted, auth)
                )
        return ModifyResult(altered_message(sequenced.accepted, sequenced.dropped), records, dry_run, sequenced.dropped)

    async def reset(self, connector: str, dry_run: bool, auth: WriteAuth, section: WriteSection) -> ModifyResult:
        """A tombstone for every live raw key of the connector (all the keys that denote a partition)."""

        def planned() -> list[PlannedRecord]:
            rows = self._view.offsets(connector)
            records = [self._writer.planned(key, None, existing=True) for row in abandonable(rows) for key in row.keys]
            note_planned(records)  # audited even if the write then fails or times out
            return records

        partitions, size = self._view.extent(connector)  # one partition may be a map of 100,000 keys
        records = await section.plan(partitions, planned, size)
        if not dry_run:
            with write_origin("DELETE", connector):
                await section.append(records, auth)
        return ModifyResult(RESET, records, dry_run)

    def _plan_alter(self, connector: str, changes: list[OffsetChange]) -> list[PlannedRecord]:
        records: list[PlannedRecord] = []
        for change in abandonable(changes):
            value = change.encoded_offset()
            live = self._view.find(connector, change.partition_id)
            records.extend(
                self._writer.planned(key, value, existing=key in live) for key in change.keys(connector, live)
            )
        return records


async def view_offsets(view: OffsetView, connector: str) -> list[ConnectorOffset]:
    """A connector's rows in ``view``, on a worker thread past ``BULK_ITEMS`` partitions or
    ``BULK_BYTES`` of records: parsing 10,000 values on the event loop held every other request up to
    ~100 ms (``bulk.py``; benchmarks/RESULTS.md round 19), one partition of 100,000 keys ~0.6 s. A
    request that read that many bytes encodes its answer off the loop too (``note_request_bytes``)."""
    partitions, size = view.extent(connector)
    note_request_bytes(size)
    return await bulk_pass(
        partitions,
        lambda: [ConnectorOffset(partition=row.partition, offset=row.offset) for row in view.listing(connector)],
        size,
    )
