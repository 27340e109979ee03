"""The daemon's parts as request handlers reach them (``request.app.state.runtime``).

Its own module, free of FastAPI, so that ``emulator.server.wiring`` can open the log and start
reading it before the HTTP stack is imported (``wiring.serve``): the replay then overlaps those
imports instead of following them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from emulator.connect_cluster.offsets_topics import ConnectorTopics
from emulator.logs.base import OffsetLog
from emulator.server.body_cache import BodyCache
from emulator.service.bulk_lane import BulkLane
from emulator.service.claims import ClaimsService
from emulator.service.connector_stores import SourceOffsets
from emulator.service.health import Health
from emulator.service.history import HistoryQueries
from emulator.service.offsets import OffsetsService
from emulator.service.records import RecordsService
from emulator.service.sinks import SinkOffsets
from emulator.view.offset_view import OffsetView

if TYPE_CHECKING:  # the Kafka client behind it is imported only when a Connect cluster is read
    from emulator.connect_cluster import ConnectCluster


@dataclass(frozen=True, slots=True)
class Runtime:
    """The daemon's parts, built by ``emulator.server.wiring``; routes call one service each."""

    log: OffsetLog
    view: OffsetView
    offsets: OffsetsService
    """KIP-875: list, get, alter, reset."""
    claims: ClaimsService
    records: RecordsService
    """Raw records: export, import, history rollback."""
    history: HistoryQueries
    health: Health
    cluster: ConnectCluster | None = None
    """The Connect cluster's config/status topics (``--config-topic``), read and tailed."""
    sinks: SinkOffsets | None = None
    """Consumer-group offsets of sink connectors (Kafka backend only)."""
    topics: ConnectorTopics | None = None
    """Connectors' own offsets topics (KIP-618), read and tailed (with a Connect cluster)."""
    source: SourceOffsets | None = None
    """Where each source connector's offsets live (the worker topic, its own, or both)."""
    bodies: BodyCache = field(default_factory=BodyCache)
    """Rendered GET bodies of large connectors (and the connector list), until they change."""
    bulk_lane: BulkLane = field(default_factory=BulkLane)
    """Turns for writes with large bodies (PATCH, import), one at a time (``service/bulk_lane.py``)."""
