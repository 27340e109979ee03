"""``ConnectorStates`` backed by a live Connect cluster's config and status topics.

With it the daemon answers as the cluster's herder would: an unknown connector is a 404 even if it
has offsets, and offsets may be modified only while the connector is STOPPED with zero tasks
(``DistributedHerder.modifyConnectorOffsetsChecks``). Before each modification the config topic is
read to its current end, as the herder does, so a ``PUT /stop`` issued a moment earlier is seen.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from emulator.connect_cluster.kind import connector_kind
from emulator.connect_cluster.reader import InternalTopicReader
from emulator.connect_cluster.state import ClusterState, ConnectorSnapshot
from emulator.logs.base import ReadProgress
from emulator.logs.kafka.config import DEFAULT_TAIL_FETCH_WAIT_MS
from emulator.model.connectors import ConnectorKind
from emulator.model.errors import LogUnavailable, NotReadyYet
from emulator.model.times import format_time_ms

log = logging.getLogger(__name__)

CONFIG_SETTING = "--config-topic (the Connect workers' config.storage.topic)"
STATUS_SETTING = "--status-topic (the Connect workers' status.storage.topic)"
READ_TO_END_FAILED = "Failed to read to end of config topic before modifying connector offsets"
"""Connect's own text (a 500 there) when the herder cannot catch up with the config topic."""


class ConnectCluster:
    """The herder's view of one Connect cluster, kept current by two reader threads."""

    def __init__(
        self,
        bootstrap_servers: str,
        config_topic: str,
        status_topic: str | None = None,
        *,
        client_config: Mapping[str, str] | None = None,
        read_committed: bool = False,
        timeout_s: float = 30.0,
        tail_fetch_wait_ms: str = DEFAULT_TAIL_FETCH_WAIT_MS,
    ) -> None:
        self.state = ClusterState()
        # The config topic is read read_committed when the cluster runs exactly-once source support
        # (its leader then writes transactionally); the status topic never is, as in Connect.
        self._config = InternalTopicReader(
            bootstrap_servers,
            config_topic,
            self.state.apply_config,
            what="config topic",
            setting=CONFIG_SETTING,
            client_config=client_config,
            read_committed=read_committed,
            timeout_s=timeout_s,
            tail_fetch_wait_ms=tail_fetch_wait_ms,
            single_partition=True,
        )
        self._status = (
            None
            if status_topic is None
            else InternalTopicReader(
                bootstrap_servers,
                status_topic,
                self.state.apply_status,
                what="status topic",
                setting=STATUS_SETTING,
                client_config=client_config,
                timeout_s=timeout_s,
                tail_fetch_wait_ms=tail_fetch_wait_ms,
            )
        )

    def _readers(self) -> list[InternalTopicReader]:
        return [r for r in (self._config, self._status) if r is not None]

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Check both topics exist (``LogConfigError`` naming the setting otherwise)."""
        for reader in self._readers():
            reader.open()

    def start_reading(self) -> None:
        for reader in self._readers():
            reader.start()

    def close(self) -> None:
        for reader in self._readers():
            reader.close()

    # ------------------------------------------------------------------ ConnectorStates

    def snapshot(self, connector: str) -> ConnectorSnapshot:
        return self.state.snapshot(connector)

    def exists(self, connector: str) -> bool | None:
        return self.state.snapshot(connector).exists

    def connectors(self) -> list[str] | None:
        """Connect's ``GET /connectors``: ``ClusterConfigState.connectors()``, those with a live config."""
        return self.state.connectors()

    def is_stopped(self, connector: str) -> bool:
        """Connect's rule: target state STOPPED and the latest task commit says 0 tasks.

        A connector without a config runs nowhere; it counts as stopped unless a target state other
        than STOPPED was written for it (KIP-980 writes one just before creating a connector).
        """
        snap = self.state.snapshot(connector)
        if not snap.exists and snap.target_state is None:
            return True
        return snap.target_state == "STOPPED" and snap.task_count == 0

    def kind(self, connector: str) -> ConnectorKind | None:
        config = self.state.snapshot(connector).config
        return None if config is None else connector_kind(config)

    def config(self, connector: str) -> Mapping[str, Any] | None:
        return self.state.snapshot(connector).config

    def ensure_ready(self) -> None:
        for reader in self._readers():
            progress = reader.progress()
            if not progress.caught_up:
                raise NotReadyYet(
                    f"Connect's {reader.what} '{reader.topic}' has not been read to its end yet "
                    f"({progress.records_read} records read; {progress.partitions_done}/{len(progress.end_offsets)} "
                    "partitions at their end offsets); try again shortly"
                )

    def refresh(self, timeout_s: float) -> None:
        """Read the config topic to its current end (the herder's ``refreshConfigSnapshot``)."""
        try:
            self._config.read_to_end(timeout_s)
        except LogUnavailable as exc:
            log.error("config topic %s not read to its end within %.0f s: %s", self._config.topic, timeout_s, exc)
            raise LogUnavailable(READ_TO_END_FAILED) from exc

    def topic_progress(self) -> dict[str, ReadProgress]:
        """Each topic's reader progress and health (for ``/status`` and the metrics), by topic name."""
        return {reader.topic: reader.progress() for reader in self._readers()}

    def readiness(self) -> dict[str, Any]:
        """For ``/readyz`` and ``/status``: read progress per topic and record counters."""
        topics = {}
        for topic, progress in self.topic_progress().items():
            topics[topic] = {
                "ready": progress.caught_up,
                "records_read": progress.records_read,
                "partitions_at_end": progress.partitions_done,
                "partitions": len(progress.end_offsets),
                "lag": sum(progress.lag().values()),
                "alive": progress.alive,
                "last_error": progress.last_error,
                "last_error_at": None
                if progress.last_error_at is None
                else format_time_ms(int(progress.last_error_at * 1000)),
            }
        return {
            "ready": all(t["ready"] for t in topics.values()),
            "config_topic": self._config.topic,
            "status_topic": None if self._status is None else self._status.topic,
            "topics": topics,
            **self.state.stats(),
        }
