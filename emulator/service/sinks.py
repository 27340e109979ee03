"""Sink connectors' offsets: their consumer group's committed offsets, with Connect's semantics.

Connect keeps no offsets of its own for sinks: GET lists the group's committed offsets, PATCH
commits (or, for ``"offset": null``, deletes) them through the admin client, DELETE deletes the
whole group (``Worker.sinkConnectorOffsets`` / ``modifySinkConnectorOffsets``). Zombie tasks are
fenced by the broker itself: a group that still has members refuses those calls, and Connect
answers with the messages reproduced here (``SinkOffsetsFailed``); format errors in a request
are Connect's ``BadRequestException`` texts (``InvalidRequest``).

Messages are Connect 4.3.0's (``Worker.java``, ``SinkUtils.java``); the request format rules are
``SinkUtils.parseSinkConnectorOffsets``, including ``String.valueOf``/``parseInt`` so that ``"5"``
and ``5`` are accepted and ``5.0`` is not. The admin calls are ``emulator.logs.kafka.groups``; each one
runs in a worker thread with a deadline. A modification's group writes (PATCH's commit and deletions,
DELETE's group deletion) run in one worker thread through the caller's ``GroupWrite``, which checks
the connector's claim atomically with them (``WriteGuard.write_outside``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from emulator.connect_cluster.java_text import parse_int, string_value_of
from emulator.model.errors import InvalidRequest, LogTimeout, SinkOffsetsFailed
from emulator.model.offsets import ConnectorOffset
from emulator.service.bodies import OffsetChange
from emulator.service.bulk import abandonable
from emulator.service.results import PlannedGroupChangeBody

if TYPE_CHECKING:
    from emulator.logs.kafka.groups import GroupFailure

log = logging.getLogger(__name__)

T = TypeVar("T")


class GroupWrite(Protocol):
    """Runs ``write`` (admin calls that change the group) on the caller's thread and returns its
    answer, or refuses it first (a claim held by someone else): ``WriteGuard.write_outside``."""

    def __call__(self, write: Callable[[], T]) -> T: ...


def unguarded(write: Callable[[], T]) -> T:
    """A ``GroupWrite`` that checks nothing."""
    return write()


KAFKA_TOPIC_KEY = "kafka_topic"
KAFKA_PARTITION_KEY = "kafka_partition"
KAFKA_OFFSET_KEY = "kafka_offset"
GROUP_OVERRIDE = "consumer.override.group.id"

_ZOMBIE_HINT = (
    "either because its tasks haven't stopped completely yet or the connector was resumed before the request to "
    "{verb} its offsets could be successfully completed. If the connector is in a stopped state, this operation can "
    "be safely retried. If it doesn't eventually succeed, the Connect cluster may need to be restarted to get rid of "
    "the zombie sink tasks."
)
# Broker answers (librdkafka error names) that mean "the group still has members"
# (Worker.alterSinkConnectorOffsets / resetSinkConnectorOffsets), and "there is no such group".
_ALTER_BLOCKED = {"UNKNOWN_MEMBER_ID", "GROUP_SUBSCRIBED_TO_TOPIC"}
_RESET_BLOCKED = {"NON_EMPTY_GROUP"}
_GROUP_GONE = {"GROUP_ID_NOT_FOUND"}
_UNREACHABLE = {"_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "REQUEST_TIMED_OUT", "COORDINATOR_NOT_AVAILABLE"}
"""The cluster gave no answer (in time): a sink read is then a 503 to retry, not Connect's 500."""


def alter_blocked_message(connector: str) -> str:
    return f"Failed to alter consumer group offsets for connector {connector} " + _ZOMBIE_HINT.format(verb="alter")


def reset_blocked_message(connector: str) -> str:
    return f"Failed to reset consumer group offsets for connector {connector} " + _ZOMBIE_HINT.format(verb="reset")


def alter_failed_message(connector: str) -> str:
    return f"Failed to alter consumer group offsets for connector {connector}"


def reset_failed_message(connector: str) -> str:
    return f"Failed to reset consumer group offsets for sink connector {connector}"


def modify_failed_message(connector: str) -> str:
    """What a failure inside the worker before any admin call becomes (``ConnectUtils.maybeWrap``)."""
    return f"Failed to modify offsets for sink connector {connector}"


def retrieve_failed_message(connector: str) -> str:
    return f"Failed to retrieve consumer group offsets for sink connector {connector}"


def list_before_reset_failed_message(connector: str) -> str:
    return f"Failed to list offsets prior to resetting offsets for sink connector {connector}"


def consumer_group_id(connector: str, config: Mapping[str, Any] | None) -> str:
    """``SinkUtils.consumerGroupId``, unless the connector overrides ``group.id`` for its consumer.

    Connect's default override policy (``All`` since 3.0) lets ``consumer.override.group.id`` win, and
    a config that a stricter policy forbids is rejected at creation, so a live config is honoured.
    """
    override = None if config is None else config.get(GROUP_OVERRIDE)
    return f"connect-{connector}" if override is None else str(override)


@dataclass(frozen=True, slots=True)
class SinkChange:
    """One parsed PATCH entry: commit ``offset``, or delete the partition's offset when None."""

    topic: str
    partition: int
    offset: int | None


@dataclass(frozen=True, slots=True)
class PlannedGroupChange:
    """What a sink modification would do to the group, shown as-is by dry runs."""

    group: str
    action: str  # "commit", "delete_offset", "delete_group"
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None

    def as_dict(self) -> PlannedGroupChangeBody:
        return PlannedGroupChangeBody(
            consumer_group=self.group,
            action=self.action,
            kafka_topic=self.topic,
            kafka_partition=self.partition,
            kafka_offset=self.offset,
        )


def parse_sink_offsets(changes: Sequence[OffsetChange]) -> list[SinkChange]:
    """``SinkUtils.parseSinkConnectorOffsets``: same checks, same order per entry, same 400 messages.

    Entries sharing a TopicPartition (e.g. ``0`` and ``"0"``) keep the later one.
    """
    parsed: dict[tuple[str, int], SinkChange] = {}
    for change in abandonable(changes):  # a request's deadline stops a pass over many
        partition = change.partition
        if KAFKA_TOPIC_KEY not in partition or KAFKA_PARTITION_KEY not in partition:
            raise InvalidRequest(
                f"The partition for a sink connector offset must contain the keys '{KAFKA_TOPIC_KEY}' and "
                f"'{KAFKA_PARTITION_KEY}'"
            )
        if partition[KAFKA_TOPIC_KEY] is None:
            raise InvalidRequest("Kafka topic names must be valid strings and may not be null")
        if partition[KAFKA_PARTITION_KEY] is None:
            raise InvalidRequest("Kafka partitions must be valid numbers and may not be null")
        topic = string_value_of(partition[KAFKA_TOPIC_KEY])
        raw_partition = string_value_of(partition[KAFKA_PARTITION_KEY])
        try:
            number = parse_int(raw_partition)
        except ValueError:
            raise InvalidRequest(
                f"Failed to parse the following Kafka partition value in the provided offsets: '{raw_partition}'. "
                "Partition values for sink connectors need to be integers."
            ) from None
        offset: int | None = None
        if change.offset is not None:
            if KAFKA_OFFSET_KEY not in change.offset:
                raise InvalidRequest(
                    f"The offset for a sink connector should either be null or contain the key '{KAFKA_OFFSET_KEY}'"
                )
            raw_offset = string_value_of(change.offset[KAFKA_OFFSET_KEY])
            try:
                offset = parse_int(raw_offset, bits=64)
            except ValueError:
                raise InvalidRequest(
                    f"Failed to parse the following Kafka offset value in the provided offsets: '{raw_offset}'. "
                    "Offset values for sink connectors need to be integers."
                ) from None
        parsed.pop((topic, number), None)
        parsed[(topic, number)] = SinkChange(topic, number, offset)
    return list(parsed.values())


def refuse_negative_offsets(connector: str, changes: Sequence[SinkChange]) -> None:
    """Connect's 500 for a negative offset, before any admin call, so a dry run predicts it too.

    ``new OffsetAndMetadata(-1)`` throws ``IllegalArgumentException`` inside the worker, which
    ``maybeWrap`` turns into this ``ConnectException``; the format checks before it pass.
    """
    if any(c.offset is not None and c.offset < 0 for c in changes):
        raise SinkOffsetsFailed(modify_failed_message(connector))


def plan_alter(group: str, changes: Sequence[SinkChange]) -> list[PlannedGroupChange]:
    return [
        PlannedGroupChange(group, "commit" if c.offset is not None else "delete_offset", c.topic, c.partition, c.offset)
        for c in changes
    ]


class SinkOffsets:
    """Connect's sink-offset operations over one ``ConsumerGroups`` admin for the daemon's life.

    ``client_config`` is the daemon's librdkafka pass-through (SASL, SSL, ...), the same the offsets
    log uses, as Connect's worker passes its settings to the admin clients it creates for sinks.
    """

    def __init__(
        self, bootstrap_servers: str, client_config: Mapping[str, str] | None = None, timeout_s: float = 30.0
    ) -> None:
        # The Kafka client (confluent_kafka) only here: a daemon on the embedded log has no sinks to read,
        # and imports this module for its request rules alone.
        from emulator.logs.kafka.config import KafkaClientConfig
        from emulator.logs.kafka.groups import ConsumerGroups

        self._groups = ConsumerGroups(
            KafkaClientConfig(bootstrap_servers, dict(client_config or {}), "sink connectors' offsets"), timeout_s
        )
        self._timeout_s = timeout_s

    # ------------------------------------------------------------------ reads

    async def offsets(self, connector: str, group: str) -> list[ConnectorOffset]:
        """GET: the group's committed offsets in Connect's shape, sorted by topic and partition.

        The partition map lists ``kafka_partition`` before ``kafka_topic``, the order Connect's
        ``HashMap`` serializes them in; an unknown group has no offsets (``[]``), as in Connect.
        """
        from emulator.logs.kafka.groups import GroupAdminError  # loaded by __init__ already

        try:
            committed = await asyncio.to_thread(self._groups.committed, group)
        except GroupAdminError as exc:
            log.error("Failed to retrieve consumer group offsets for sink connector %s: %r", connector, exc)
            if exc.error in _UNREACHABLE or exc.error is None:  # no answer in time: a 503 to retry, with why
                raise LogTimeout(
                    f"{retrieve_failed_message(connector)}: the Kafka cluster did not answer within "
                    f"{self._timeout_s:g} s (--write-timeout; {exc.error or 'no answer'}); try again"
                ) from exc
            raise SinkOffsetsFailed(retrieve_failed_message(connector)) from exc
        return [
            ConnectorOffset(
                partition={KAFKA_PARTITION_KEY: partition, KAFKA_TOPIC_KEY: topic},
                offset={KAFKA_OFFSET_KEY: offset},
            )
            for (topic, partition), offset in sorted(committed.items())
        ]

    # ------------------------------------------------------------------ writes

    async def alter(
        self, connector: str, group: str, changes: Sequence[SinkChange], guard: GroupWrite = unguarded
    ) -> None:
        """PATCH: commit the given offsets and delete the offsets of partitions given ``null``, both
        in one worker thread through ``guard``."""
        refuse_negative_offsets(connector, changes)
        commits = [(c.topic, c.partition, c.offset) for c in changes if c.offset is not None]
        deletions = [(c.topic, c.partition) for c in changes if c.offset is None]

        def write() -> list[GroupFailure]:
            failures: list[GroupFailure] = []
            if commits:
                failures += self._groups.commit(group, commits)
            if deletions:
                failures += self._groups.delete_offsets(group, deletions)
            return failures

        failures = await asyncio.to_thread(guard, write)
        if not failures:
            return
        for failure in failures:
            log.error(
                "Failed to alter consumer group offsets for connector %s (group %s): %s",
                connector,
                group,
                failure.detail,
            )
        if any(f.error in _ALTER_BLOCKED for f in failures):
            raise SinkOffsetsFailed(alter_blocked_message(connector))
        # Connect's words, then the broker's reason: Connect leaves it in the worker's log only.
        raise SinkOffsetsFailed(f"{alter_failed_message(connector)}: {'; '.join(f.detail for f in failures)}")

    async def reset(
        self,
        connector: str,
        group: str,
        guard: GroupWrite = unguarded,
        on_planned: Callable[[list[PlannedGroupChange]], None] | None = None,
    ) -> list[PlannedGroupChange]:
        """DELETE: delete the group (through ``guard``, after listing its offsets). A group that is
        already gone counts as reset (idempotent). ``on_planned`` learns the partitions to reset once
        they are listed, before the deletion."""
        from emulator.logs.kafka.groups import GroupAdminError  # loaded by __init__ already

        try:
            committed = await asyncio.to_thread(self._groups.committed, group)
        except GroupAdminError as exc:
            log.error("Failed to list offsets prior to resetting offsets for sink connector %s: %r", connector, exc)
            raise SinkOffsetsFailed(list_before_reset_failed_message(connector)) from exc
        planned = [PlannedGroupChange(group, "delete_offset", t, p, None) for t, p in sorted(committed)]
        if on_planned is not None:
            on_planned(planned)
        try:
            await asyncio.to_thread(guard, lambda: self._groups.delete_group(group))
        except GroupAdminError as exc:
            if exc.error not in _GROUP_GONE:
                log.error("Failed to reset consumer group offsets for sink connector %s: %r", connector, exc)
                if exc.error in _RESET_BLOCKED:
                    raise SinkOffsetsFailed(reset_blocked_message(connector)) from exc
                raise SinkOffsetsFailed(reset_failed_message(connector)) from exc
        return planned

    async def plan_reset(self, connector: str, group: str) -> list[PlannedGroupChange]:
        """Dry run of DELETE: the group and the committed offsets it would lose."""
        from emulator.logs.kafka.groups import GroupAdminError  # loaded by __init__ already

        try:
            committed = await asyncio.to_thread(self._groups.committed, group)
        except GroupAdminError as exc:
            raise SinkOffsetsFailed(list_before_reset_failed_message(connector)) from exc
        return [PlannedGroupChange(group, "delete_group")] + [
            PlannedGroupChange(group, "delete_offset", t, p, None) for t, p in sorted(committed)
        ]

    def close(self) -> None:
        self._groups.close()
