"""What the offsets services answer: typed shapes handed to the API layer, and Connect's messages.

The API turns these into response bodies; declaring them here (instead of passing
``dict[str, Any]`` along) lets the type checker follow a field from where it is made to where it
is served.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, Protocol, TypedDict

ALTERED = (
    "The Connect framework-managed offsets for this connector have been altered successfully. However, if this "
    "connector manages offsets externally, they will need to be manually altered in the system that the connector uses."
)
RESET = (
    "The Connect framework-managed offsets for this connector have been reset successfully. However, if this "
    "connector manages offsets externally, they will need to be manually reset in the system that the connector uses."
)


class DroppedCommit(TypedDict):
    """A partition whose commit carried a stale sequence and was not applied (reordering detection)."""

    partition: dict[str, Any]
    reason: str


class PlannedRecordBody(TypedDict):
    """A source connector's record a modification would write, as a dry run shows it."""

    key: str
    value: str | None
    kafka_partition: int
    existing_key: bool
    topic: NotRequired[str]
    """The offsets topic it goes to, for a connector whose offsets live in two (docs/connect-cluster.md)."""


class PlannedGroupChangeBody(TypedDict):
    """A sink connector's consumer-group change a modification would make, as a dry run shows it."""

    consumer_group: str
    action: str
    kafka_topic: str | None
    kafka_partition: int | None
    kafka_offset: int | None


DryRunRecord = PlannedRecordBody | PlannedGroupChangeBody


class PlannedChange(Protocol):
    """One step a modification would take (a log record, or a consumer-group change for sinks)."""

    def as_dict(self) -> DryRunRecord: ...


@dataclass(frozen=True, slots=True)
class PlannedRecord:
    """A record a modification would write: exact bytes, and the Kafka partition they land in."""

    key: bytes
    value: bytes | None
    partition: int
    existing: bool
    topic: str | None = None
    """Named only when a write spans a connector's own offsets topic and the worker's."""

    def as_dict(self) -> PlannedRecordBody:
        body: PlannedRecordBody = {
            "key": self.key.decode("utf-8", errors="backslashreplace"),
            "value": None if self.value is None else self.value.decode("utf-8", errors="backslashreplace"),
            "kafka_partition": self.partition,
            "existing_key": self.existing,
        }
        if self.topic is not None:
            body["topic"] = self.topic
        return body


@dataclass(frozen=True, slots=True)
class ModifyResult:
    """The outcome of PATCH/DELETE (and of a rollback): written, or only planned (``dry_run``)."""

    message: str
    records: Sequence[PlannedChange]
    dry_run: bool
    dropped: list[DroppedCommit] = field(default_factory=list)
    """Partitions whose commit carried a stale sequence and was not applied (reordering detection)."""
