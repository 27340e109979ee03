"""Exactly-once source support (KIP-618) as the Connect cluster runs it, and the names it implies.

A Connect worker's ``exactly.once.source.support`` is ``disabled`` (the default), ``preparing`` or
``enabled``. Only ``enabled`` changes how offsets are read and written (``WorkerConfig.
exactlyOnceSourceEnabled``): every source connector's offsets store reads ``read_committed``, each
task writes its offsets in the transactions of its own transactional producer, and a REST
modification is written by a producer with task 0's transactional id, so that the broker fences any
zombie task still holding it (docs/protocol.md §4.7, §5). ``preparing`` only readies the cluster for
a rolling upgrade; offsets are handled as with ``disabled``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, overload

Support = Literal["disabled", "preparing", "enabled"]
SUPPORT_VALUES: tuple[Support, ...] = ("disabled", "preparing", "enabled")


@dataclass(frozen=True, slots=True)
class ExactlyOnceSource:
    """The cluster's setting and the workers' ``group.id`` (which every transactional id starts with)."""

    support: Support = "disabled"
    group_id: str | None = None

    @property
    def enabled(self) -> bool:
        return self.support == "enabled"

    def transactional_id(self, connector: str, task: int = 0) -> str:
        """``Worker.taskTransactionalId``: ``<group.id>-<connector>-<task>``."""
        if self.group_id is None:
            raise ValueError("exactly-once source support needs the Connect workers' group.id")
        return f"{self.group_id}-{connector}-{task}"


class TaskTransactionalIds(Sequence[str]):
    """The transactional ids of tasks ``first``..``count``-1, made as they are read. A task count comes
    from a ``tasks-fencing-<c>`` record, read as Connect reads it (any int up to 2,147,483,647): as a
    list, a hostile or corrupt count held gigabytes before the first id was fenced."""

    __slots__ = ("_connector", "_count", "_eos", "_first")

    def __init__(self, eos: ExactlyOnceSource, connector: str, count: int, first: int = 1) -> None:
        self._eos, self._connector, self._count, self._first = eos, connector, count, first

    def __len__(self) -> int:
        return max(self._count - self._first, 0)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        tasks = range(self._first, max(self._count, self._first))
        if isinstance(index, slice):
            return [self._eos.transactional_id(self._connector, task) for task in tasks[index]]
        return self._eos.transactional_id(self._connector, tasks[index])


DISABLED = ExactlyOnceSource()
