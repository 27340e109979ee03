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

from dataclasses import dataclass
from typing import Literal

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


DISABLED = ExactlyOnceSource()
