"""The partitions a modification plans, noted for its audit line (``emulator.model.audit``) as soon
as they are known.

A PATCH names its partitions in the request, and its route notes them before anything is written.
A DELETE (reset) or a rollback names none: the partitions are those the service finds to reset or
to restore, so the service notes them once it has planned the write, before writing. A write that
then fails or times out (503 ``write_outcome_unknown``: it may well have been applied) is audited
with every partition it attempted, not as "0 partition(s)". Outside an audited request (tests,
tools) the notes go nowhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from emulator.codec.keys import KeyProblem, logical_id, parse_key
from emulator.history.rollback import RollbackChange
from emulator.model import audit
from emulator.service.results import PlannedChange, PlannedRecord
from emulator.service.sinks import PlannedGroupChange


def note_planned(records: Iterable[PlannedChange]) -> None:
    """The partitions a reset is about to write (or a dry run would): each partition once."""
    audit.note_partitions(unique(partition_of(r) for r in records))


def note_rollback_plan(changes: Iterable[RollbackChange]) -> None:
    """The partitions a rollback is about to restore (or a dry run would): each partition once."""
    audit.note_partitions(unique(key_partition(c.key) for c in changes))


def partition_of(change: Any) -> Any:
    if isinstance(change, PlannedRecord):
        return key_partition(change.key)
    if isinstance(change, PlannedGroupChange):
        if change.topic is None:
            return {"consumer_group": change.group}
        return {"kafka_topic": change.topic, "kafka_partition": change.partition}
    return str(change)


def key_partition(key: bytes) -> Any:
    """The partition map of a Connect key, else the key as text (an auditor still sees what it was)."""
    parsed = parse_key(key)
    return key_text(key) if isinstance(parsed, KeyProblem) else parsed.partition


def key_text(raw: bytes) -> str:
    return raw[:200].decode("utf-8", "backslashreplace")


def unique(partitions: Iterable[Any]) -> Iterator[Any]:
    """Each partition once: a partition written under several raw keys is still one partition (told
    apart as Connect's ``Map.equals`` does, by ``logical_id``, which also takes a partition nested as
    deep as Jackson reads: ``json.dumps`` stopped at Python's recursion limit, and a DELETE or rollback
    of a connector holding a 990-level partition answered 500)."""
    seen: set[str] = set()
    for partition in partitions:
        marker = logical_id(partition)
        if marker not in seen:
            seen.add(marker)
            yield partition
