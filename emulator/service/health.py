"""Readiness and counters for probes and operators: Connect's read-to-end rule, made visible.

The daemon is ready once the offsets log has been read to the end it had at startup and, with a
Connect cluster, once its config and status topics have been too; before that every offsets read
is refused rather than answered from partial state. It is not ready either while the log's storage
cannot be reached (a Kafka cluster that did not answer its last metadata request): a load balancer
then sends writes elsewhere, or nowhere, instead of to a daemon that can only answer 503 after its
write timeout. Reads of the view go on being served meanwhile.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from emulator.connect_cluster import ConnectCluster
from emulator.logs.base import OffsetLog
from emulator.view.offset_view import OffsetView


class Readiness(TypedDict):
    ready: bool
    error: str | None
    records_read: int
    partitions_at_end: int
    partitions: int
    positions: dict[str, int]
    end_offsets: dict[str, int]
    connect_cluster: NotRequired[dict[str, Any]]
    """Present with a Connect cluster: read progress of its config and status topics."""
    unreachable: NotRequired[str]
    """Present while the log's storage cannot be reached: what failed, and for how long."""


class Status(Readiness):
    log: str
    view: dict[str, Any]
    live_keys: int


class Health:
    def __init__(self, log: OffsetLog, view: OffsetView, cluster: ConnectCluster | None) -> None:
        self._log = log
        self._view = view
        self._cluster = cluster

    def readiness(self) -> Readiness:
        progress = self._log.progress()
        body: Readiness = {
            "ready": progress.caught_up,
            "error": progress.error,
            "records_read": progress.records_read,
            "partitions_at_end": progress.partitions_done,
            "partitions": len(progress.end_offsets),
            "positions": {str(p): v for p, v in sorted(progress.positions.items())},
            "end_offsets": {str(p): v for p, v in sorted(progress.end_offsets.items())},
        }
        if self._cluster is not None:
            # With a Connect cluster, its config and status topics must be read to their end as well.
            cluster = self._cluster.readiness()
            body["ready"] = progress.caught_up and bool(cluster["ready"])
            body["connect_cluster"] = cluster
        unreachable = self._log.reachability()
        if unreachable is not None:
            body["ready"] = False
            body["unreachable"] = unreachable
        return body

    def status(self) -> Status:
        return {
            **self.readiness(),
            "log": self._log.description,
            "view": self._view.stats.as_dict(),
            "live_keys": self._view.live_keys(),
        }
