"""Sink connectors' offsets: the committed offsets of the connector's consumer group.

Connect keeps no offsets of its own for sinks (docs/protocol.md §4.6); ``emulator.service.sinks``
talks to the group through Kafka's admin API. This strategy adds what every request needs first:
the group's id (``connect-<name>`` unless the connector's config overrides it) and a clear refusal
on a daemon without Kafka, whose embedded log has no consumer groups.
"""

from __future__ import annotations

from emulator.model.connectors import ConnectorStates
from emulator.model.errors import SinksUnsupported
from emulator.model.offsets import ConnectorOffset
from emulator.service.bodies import OffsetChange
from emulator.service.results import ALTERED, RESET, ModifyResult
from emulator.service.sinks import (
    SinkOffsets,
    consumer_group_id,
    parse_sink_offsets,
    plan_alter,
    refuse_negative_offsets,
)
from emulator.service.write_guard import WriteAuth
from emulator.service.writer import WriteSection

NO_SINKS_MESSAGE = (
    "Sink connector offsets are the committed offsets of the connector's consumer group; they need a Kafka "
    "cluster (--bootstrap-servers): the embedded log has no consumer groups"
)


class SinkStrategy:
    def __init__(self, sinks: SinkOffsets | None, states: ConnectorStates) -> None:
        self._sinks = sinks
        self._states = states

    async def offsets(self, connector: str) -> list[ConnectorOffset]:
        sinks = self._require_sinks()
        return await sinks.offsets(connector, self._group(connector))

    async def alter(
        self, connector: str, changes: list[OffsetChange], dry_run: bool, auth: WriteAuth, section: WriteSection
    ) -> ModifyResult:
        """``SinkUtils.parseSinkConnectorOffsets`` (Connect's format checks for sinks), then the
        group's commits and deletions. Claims are checked before (the broker fences zombie tasks
        itself); commit sequences apply to source records only."""
        sinks = self._require_sinks()
        parsed = parse_sink_offsets(changes)
        refuse_negative_offsets(connector, parsed)  # a dry run answers what the write would
        group = self._group(connector)
        if not dry_run:
            await section.deadline.within_unknown(sinks.alter(connector, group, parsed), f"altering group {group}")
        return ModifyResult(ALTERED, plan_alter(group, parsed), dry_run)

    async def reset(self, connector: str, dry_run: bool, auth: WriteAuth, section: WriteSection) -> ModifyResult:
        sinks, group = self._require_sinks(), self._group(connector)
        if dry_run:
            return ModifyResult(RESET, await sinks.plan_reset(connector, group), dry_run)
        planned = await section.deadline.within_unknown(sinks.reset(connector, group), f"resetting group {group}")
        return ModifyResult(RESET, planned, dry_run)

    def _require_sinks(self) -> SinkOffsets:
        if self._sinks is None:
            raise SinksUnsupported(NO_SINKS_MESSAGE)
        return self._sinks

    def _group(self, connector: str) -> str:
        return consumer_group_id(connector, self._states.config(connector))
