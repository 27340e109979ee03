"""Sink connectors' offsets: the committed offsets of the connector's consumer group.

Connect keeps no offsets of its own for sinks (docs/protocol.md §4.6); ``emulator.service.sinks``
talks to the group through Kafka's admin API. This strategy adds what every request needs first:
the group's id (``connect-<name>`` unless the connector's config overrides it) and a clear refusal
on a daemon without Kafka, whose embedded log has no consumer groups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from emulator.model.connectors import ConnectorStates
from emulator.model.errors import SinksUnsupported
from emulator.model.offsets import ConnectorOffset
from emulator.service.audit_notes import note_planned
from emulator.service.bodies import OffsetChange
from emulator.service.results import ALTERED, RESET, ModifyResult
from emulator.service.sinks import (
    GroupWrite,
    SinkOffsets,
    consumer_group_id,
    parse_sink_offsets,
    plan_alter,
    refuse_negative_offsets,
)
from emulator.service.write_guard import WriteAuth, WriteGuard
from emulator.service.writer import WriteSection

NO_SINKS_MESSAGE = (
    "Sink connector offsets are the committed offsets of the connector's consumer group; they need a Kafka "
    "cluster (--bootstrap-servers): the embedded log has no consumer groups"
)

T = TypeVar("T")

_LOCK_ANSWER_S = 0.5
"""The wait for the connector's lock ends this long before the request's deadline, so that a write that
never started answers "nothing was written" (``LogTimeout``) before the deadline's "it may still happen"."""


class SinkStrategy:
    def __init__(self, sinks: SinkOffsets | None, states: ConnectorStates, guard: WriteGuard) -> None:
        self._sinks = sinks
        self._states = states
        self._guard = guard

    async def offsets(self, connector: str) -> list[ConnectorOffset]:
        sinks = self._require_sinks()
        return await sinks.offsets(connector, self._group(connector))

    async def alter(
        self, connector: str, changes: list[OffsetChange], dry_run: bool, auth: WriteAuth, section: WriteSection
    ) -> ModifyResult:
        """``SinkUtils.parseSinkConnectorOffsets`` (Connect's format checks for sinks), then the
        group's commits and deletions. Claims are checked before, and again atomically with the
        group's writes (``_fenced``; the broker fences zombie tasks itself); commit sequences apply
        to source records only."""
        sinks = self._require_sinks()
        parsed = await section.plan(len(changes), lambda: parse_sink_offsets(changes))  # off the loop when big
        refuse_negative_offsets(connector, parsed)  # a dry run answers what the write would
        group = self._group(connector)
        if not dry_run:
            altering = sinks.alter(connector, group, parsed, self._fenced(connector, auth, section))
            await section.outside(altering, f"altering group {group}")
        return ModifyResult(ALTERED, plan_alter(group, parsed), dry_run)

    async def reset(self, connector: str, dry_run: bool, auth: WriteAuth, section: WriteSection) -> ModifyResult:
        """List the group's committed offsets, then delete the group, both in the connector's write
        section, which a group write of this daemon answered late keeps until its admin call returned
        (``WriteSection.outside``): the listing (what the answer and the audit line name) holds every
        group write made through this daemon before the reset, and none of them lands after it."""
        sinks, group = self._require_sinks(), self._group(connector)
        if dry_run:
            plan = await sinks.plan_reset(connector, group)
            note_planned(plan)
            return ModifyResult(RESET, plan, dry_run)
        # Noted once listed, before the group is deleted: audited even if the deletion fails or times out.
        resetting = sinks.reset(connector, group, self._fenced(connector, auth, section), on_planned=note_planned)
        planned = await section.outside(resetting, f"resetting group {group}")
        return ModifyResult(RESET, planned, dry_run)

    def _fenced(self, connector: str, auth: WriteAuth, section: WriteSection) -> GroupWrite:
        """The group's writes, run (in their worker thread) under the connector's claim check, which
        waits for the connector's lock until just before the request's deadline at most. A write
        answered late (503, outcome unknown) keeps that lock until the admin client returns, so no
        claim made through this daemon answers while it may still land; and its write section
        (``WriteSection.outside``), so no other modification of the connector does either."""

        def fenced(write: Callable[[], T]) -> T:
            wait_s = max(section.deadline.remaining() - _LOCK_ANSWER_S, 0.0)
            return self._guard.write_outside(connector, auth, write, wait_s)

        return fenced

    def _require_sinks(self) -> SinkOffsets:
        if self._sinks is None:
            raise SinksUnsupported(NO_SINKS_MESSAGE)
        return self._sinks

    def _group(self, connector: str) -> str:
        return consumer_group_id(connector, self._states.config(connector))
