"""A consumer group's committed offsets through the admin client: list, commit, delete, drop the group.

Sink connectors keep their offsets in their consumer group (``connect-<name>``), not in the offsets
topic. This module only talks to the broker; Connect's semantics (which broker answers mean zombie
tasks, the messages users see) stay in ``emulator.service.sinks``. Broker errors are reported by
librdkafka's error *name* (e.g. ``UNKNOWN_MEMBER_ID``), so callers need not know the client library.

Every call blocks for at most about ``timeout_s`` (plus a margin for the answer): run it in a worker
thread from async code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from emulator.logs.kafka.config import KafkaClientConfig
from emulator.logs.kafka.group_offset_delete import OffsetDeleteFailed, delete_group_offsets

_ANSWER_MARGIN_S = 5.0


@dataclass(frozen=True, slots=True)
class GroupFailure:
    """One refusal: ``error`` is librdkafka's error name (``None`` if there was none to name)."""

    error: str | None
    detail: str


class GroupAdminError(Exception):
    """A group operation failed as a whole (no answer, or the broker refused the request)."""

    def __init__(self, failure: GroupFailure) -> None:
        super().__init__(failure.detail)
        self.failure = failure

    @property
    def error(self) -> str | None:
        return self.failure.error


def _error_name(exc: BaseException) -> str | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].name())
    return None


def _failed(exc: BaseException) -> GroupAdminError:
    return GroupAdminError(GroupFailure(_error_name(exc), repr(exc)))


class ConsumerGroups:
    """One admin client for the daemon's life, shared by every group operation."""

    def __init__(self, clients: KafkaClientConfig, timeout_s: float = 30.0) -> None:
        self._clients = clients
        self._timeout_s = timeout_s
        self._admin: AdminClient = clients.create("admin", AdminClient)

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offset per ``(topic, partition)``; an unknown group has none."""
        try:
            future = self._admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self._timeout_s
            )[group]
            result = future.result(timeout=self._timeout_s + _ANSWER_MARGIN_S)
            committed: dict[tuple[str, int], int] = {}
            for tp in result.topic_partitions or []:
                if tp.error is not None:
                    raise KafkaException(tp.error)
                if tp.offset >= 0:  # a partition listed without a committed offset has none
                    committed[(tp.topic, tp.partition)] = tp.offset
        except Exception as exc:
            raise _failed(exc) from exc
        return committed

    def commit(self, group: str, offsets: Sequence[tuple[str, int, int]]) -> list[GroupFailure]:
        """Commit ``(topic, partition, offset)`` for the group; the refusals, per partition or whole."""
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for t, p, o in offsets])
        try:
            future = self._admin.alter_consumer_group_offsets([request], request_timeout=self._timeout_s)[group]
            result = future.result(timeout=self._timeout_s + _ANSWER_MARGIN_S)
        except Exception as exc:
            return [GroupFailure(_error_name(exc), repr(exc))]
        return [
            GroupFailure(str(tp.error.name()), f"{tp.topic}[{tp.partition}]: {tp.error.str()} ({tp.error.name()})")
            for tp in result.topic_partitions or []
            if tp.error is not None
        ]

    def delete_offsets(self, group: str, partitions: Sequence[tuple[str, int]]) -> list[GroupFailure]:
        """Delete the group's committed offsets of ``(topic, partition)`` (KIP-496); the refusals."""
        try:
            result = delete_group_offsets(self._clients.plain("admin"), group, partitions, self._timeout_s)
        except OffsetDeleteFailed as exc:
            return [GroupFailure(None, f"deleting group offsets: {exc}")]
        failures: list[GroupFailure] = []
        if result.error is not None:
            failures.append(GroupFailure(result.error, f"{result.error}: {result.message}"))
        failures += [GroupFailure(e, f"{t}[{p}]: {e}") for (t, p), e in result.partitions.items() if e is not None]
        return failures

    def delete_group(self, group: str) -> None:
        """Delete the group and its offsets; ``GroupAdminError`` (e.g. ``NON_EMPTY_GROUP``) if refused."""
        try:
            future = self._admin.delete_consumer_groups([group], request_timeout=self._timeout_s)[group]
            future.result(timeout=self._timeout_s + _ANSWER_MARGIN_S)
        except Exception as exc:
            raise _failed(exc) from exc

    def close(self) -> None:
        """The admin client has no close; polling drains its queue so nothing is left pending."""
        self._admin.poll(0)
