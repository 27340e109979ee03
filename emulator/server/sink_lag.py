"""Sink connectors' consumer-group lag, from the broker: log end offset − committed offset.

A sink connector's progress is its consumer group's committed offsets (docs/protocol.md §4.6), so
its lag is what Kafka's own ``kafka-consumer-groups --describe`` shows: per topic-partition the
log end offset (high watermark) minus the committed offset. Which connectors are sinks, and their
groups (``connect-<name>`` unless ``consumer.override.group.id``), come from the Connect cluster's
config topic, so this needs ``--config-topic``.

Asking the broker costs one request per group plus one for all end offsets, so it is done when
Prometheus scrapes, never more often than ``max_age_s`` (scrapes in between, and concurrent ones,
share the last answer), within ``deadline_s`` overall, in the scraping thread (never the event
loop). A group that cannot be read in time keeps its previous values, and the failure is counted.
Only partitions the group has committed are reported: a partition never committed has no lag a
consumer could be measured against yet.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from emulator.connect_cluster.kind import connector_kind
from emulator.service.sinks import consumer_group_id

if TYPE_CHECKING:  # the Kafka client is imported by the daemons that ask a broker (a Connect cluster's sinks)
    from confluent_kafka.admin import AdminClient

    from emulator.connect_cluster import ConnectCluster
    from emulator.logs.kafka.config import KafkaClientConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PartitionLag:
    connector: str
    group: str
    topic: str
    partition: int
    committed: int
    end: int

    @property
    def lag(self) -> int:
        return max(self.end - self.committed, 0)


@dataclass(slots=True)
class SinkLagSnapshot:
    """What the last computation found: every sink's committed partitions with their end offsets."""

    partitions: list[PartitionLag] = field(default_factory=list)
    computed_at: float | None = None
    """Wall-clock time of the last computation that reached the broker for every group."""
    errors: int = 0
    """Computations (or single groups) that failed or ran out of time, since start."""
    last_error: str | None = None


Sinks = Callable[[], Sequence[tuple[str, str]]]
"""Returns ``(connector, consumer group)`` for every sink connector that exists now."""


def cluster_sinks(cluster: ConnectCluster) -> Sinks:
    """The sink connectors of a Connect cluster's config topic, with their consumer groups."""

    def sinks() -> list[tuple[str, str]]:
        found = []
        for name in cluster.state.connectors():
            config = cluster.config(name)
            if config is not None and connector_kind(config) == "sink":
                found.append((name, consumer_group_id(name, config)))
        return found

    return sinks


class SinkLag:
    """Computes sink lag on demand, at most every ``max_age_s``, each time within ``deadline_s``."""

    def __init__(
        self, clients: KafkaClientConfig, sinks: Sinks, *, deadline_s: float = 5.0, max_age_s: float = 15.0
    ) -> None:
        self._clients = clients
        self._sinks = sinks
        self._deadline_s = deadline_s
        self._max_age_s = max_age_s
        self._lock = threading.Lock()  # one computation at a time; others wait and share it
        self._admin: AdminClient | None = None
        self._by_group: dict[tuple[str, str], list[PartitionLag]] = {}
        self._snapshot = SinkLagSnapshot()
        self._checked_at = -float("inf")  # monotonic time of the last attempt

    def snapshot(self) -> SinkLagSnapshot:
        """The cached answer, refreshed first if it is older than ``max_age_s``. Blocking."""
        with self._lock:
            if time.monotonic() - self._checked_at >= self._max_age_s:
                self._checked_at = time.monotonic()
                self._refresh()
            s = self._snapshot
            return SinkLagSnapshot(list(s.partitions), s.computed_at, s.errors, s.last_error)

    def _refresh(self) -> None:
        deadline = time.monotonic() + self._deadline_s
        try:
            sinks = list(self._sinks())
            admin = self._admin_client()
        except Exception as exc:
            self._failed(f"cannot list sink connectors or create the admin client: {exc!r}")
            return
        current = set(sinks)
        self._by_group = {k: v for k, v in self._by_group.items() if k in current}  # deleted connectors go
        complete = True
        committed: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
        for connector, group in sinks:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._failed(f"no time left for the group {group} of {connector} within {self._deadline_s:g} s")
                complete = False
                break
            try:
                committed[(connector, group)] = self._committed(admin, group, remaining)
            except Exception as exc:
                self._failed(f"committed offsets of group {group} (sink connector {connector}): {exc!r}")
                complete = False
        wanted = {tp for offsets in committed.values() for tp in offsets}
        try:
            ends = self._end_offsets(admin, wanted, max(deadline - time.monotonic(), 0.5)) if wanted else {}
        except Exception as exc:
            self._failed(f"end offsets of the sink connectors' topics: {exc!r}")
            return
        for (connector, group), offsets in committed.items():
            self._by_group[(connector, group)] = [
                PartitionLag(connector, group, topic, partition, offset, ends[(topic, partition)])
                for (topic, partition), offset in sorted(offsets.items())
                if (topic, partition) in ends
            ]
        self._snapshot.partitions = [p for group in self._by_group.values() for p in group]
        if complete:
            self._snapshot.computed_at = time.time()

    def _failed(self, message: str) -> None:
        self._snapshot.errors += 1
        self._snapshot.last_error = message
        log.warning("sink lag: %s", message)

    def _admin_client(self) -> AdminClient:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = self._clients.create("admin", AdminClient)
        return self._admin

    @staticmethod
    def _committed(admin: AdminClient, group: str, timeout_s: float) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout_s)[
            group
        ]
        result = future.result(timeout=timeout_s)
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in result.topic_partitions or []
            if tp.error is None and tp.offset >= 0
        }

    @staticmethod
    def _end_offsets(
        admin: AdminClient, partitions: set[tuple[str, int]], timeout_s: float
    ) -> dict[tuple[str, int], int]:
        """High watermarks (``READ_UNCOMMITTED``, as ``kafka-consumer-groups`` reports log end offsets);
        a partition the broker does not answer for is left out."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        from emulator.logs.kafka.topics import answered_offset

        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        request = {TopicPartition(t, p): latest for t, p in sorted(partitions)}
        futures = admin.list_offsets(
            request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=timeout_s
        )
        ends: dict[tuple[str, int], int] = {}
        for tp, future in futures.items():
            try:
                ends[(tp.topic, tp.partition)] = answered_offset(
                    tp, int(future.result(timeout=timeout_s).offset), timeout_s
                )
            except Exception as exc:
                log.debug("sink lag: no end offset for %s[%d]: %r", tp.topic, tp.partition, exc)
        return ends
