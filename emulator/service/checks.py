"""Connect's preconditions for reading and modifying a connector's offsets, in one small place.

Connect answers only once its log has been read to the end, refuses an unknown connector, and
modifies offsets only while the connector is STOPPED with zero tasks
(``DistributedHerder.modifyConnectorOffsetsChecks``). Which registry decides depends on the
deployment: with a Connect cluster, its config topic (read to its end before every modification,
as the herder does); without one, the offsets themselves (``ConnectorStates`` answers None).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from emulator.logs.base import OffsetLog
from emulator.model.connectors import (
    ConnectorKind,
    ConnectorStates,
    NoConnectCluster,
    not_found_message,
    not_stopped_message,
)
from emulator.model.errors import (
    ConnectorNotFound,
    InvalidRequest,
    NotReady,
    NotReadyYet,
    NotStopped,
    WrongConnectorType,
)
from emulator.view.offset_view import OffsetView

if TYPE_CHECKING:
    from emulator.service.writer import Deadline

READING_CONFIG = "Reading Connect's config topic to its end (the connector's state is checked there first)"
NOTHING_WRITTEN = "nothing was written; is the Kafka cluster answering? Try again"


_PAST_DEADLINE_S = 1.0
"""How much longer than the deadline the config topic's read may go on in its thread: the deadline's
503 is the answer, and the thread is free again soon after (a stalled broker must not pile them up)."""


class ConnectorChecks:
    def __init__(self, log: OffsetLog, view: OffsetView, states: ConnectorStates, refresh_timeout_s: float) -> None:
        self._log = log
        self._view = view
        self._states = states
        self._refresh_timeout_s = refresh_timeout_s
        self._has_registry = not isinstance(states, NoConnectCluster)

    def ensure_ready(self) -> None:
        """Connect's startup rule: nothing is answered from a log that has not been read to its end."""
        if self._log.serving():
            self._states.ensure_ready()
            return
        progress = self._log.progress()
        if progress.error is not None:
            raise NotReady(f"The offsets log cannot be read: {progress.error}")
        if not progress.caught_up:
            raise NotReadyYet(
                "The offsets log has not been read to the end yet "
                f"({progress.records_read} records read; {progress.partitions_done}/"
                f"{len(progress.end_offsets)} partitions at their end offsets); try again shortly"
            )
        self._states.ensure_ready()

    async def refresh(self) -> None:
        """The herder reads the config topic to its end before checking a modification.

        Without a Connect cluster there is nothing to read: no hop to a worker thread (and back) to
        call ``NoConnectCluster.refresh``, a no-op, on every PATCH and DELETE."""
        if self._has_registry:
            await asyncio.to_thread(self._states.refresh, self._refresh_timeout_s)

    async def refresh_within(self, deadline: Deadline, then: str = NOTHING_WRITTEN) -> None:
        """``refresh`` within the request's deadline: 503 ``log_timeout`` at it, as every step of a
        modification that waits on the broker answers (docs/connect-cluster.md). The read's own
        timeout (Connect's 500 text when it fails before the deadline) is no longer than the time left."""
        if self._has_registry:
            timeout_s = min(self._refresh_timeout_s, deadline.remaining() + _PAST_DEADLINE_S)
            await deadline.within(asyncio.to_thread(self._states.refresh, timeout_s), READING_CONFIG, then)

    def require_known(self, connector: str) -> None:
        """Connect's not-found: with a Connect cluster, a live config decides; without one, having offsets."""
        exists = self._states.exists(connector)
        if exists is None:
            exists = self._view.knows(connector)
        if not exists:
            raise ConnectorNotFound(not_found_message(connector))

    def configured_connectors(self) -> list[str] | None:
        """The Connect cluster's connectors (Connect's ``GET /connectors``); None without a cluster."""
        return self._states.connectors()

    def is_stopped(self, connector: str) -> bool:
        return self._states.is_stopped(connector)

    def require_stopped(self, connector: str) -> None:
        if not self._states.is_stopped(connector):
            raise NotStopped(not_stopped_message(connector))

    def config(self, connector: str) -> Mapping[str, Any] | None:
        return self._states.config(connector)

    def connector_type(self, connector: str, kind: str | None, create: bool = False) -> ConnectorKind:
        """Sink or source. The Connect cluster's config decides; without one, ``kind`` (ours) does.

        Raises Connect's not-found for a connector the cluster does not know, except a source with
        ``create`` (ours: seeding offsets for a connector that is not, or not yet, in Connect).
        """
        if kind not in (None, "source", "sink"):
            raise InvalidRequest(f"kind must be 'source' or 'sink', got {kind!r}")
        exists = self._states.exists(connector)
        if exists is None:
            return "sink" if kind == "sink" else "source"
        if not exists:
            if create and kind != "sink":
                return "source"
            raise ConnectorNotFound(not_found_message(connector))
        registered = self._states.kind(connector) or "source"
        if kind is not None and kind != registered:
            raise WrongConnectorType(
                f"Connector {connector} is a {registered} connector according to the Connect cluster's config "
                f"topic; kind={kind} does not apply to it"
            )
        return registered

    @property
    def reads_a_registry(self) -> bool:
        """Whether ``refresh`` waits (for a Connect cluster's config topic); without one it returns at once."""
        return self._has_registry

    def modifiable(self, connector: str, kind: str | None, create: bool = False) -> ConnectorKind:
        """Connect's order for PATCH/DELETE: read to end → exists → STOPPED with 0 tasks. The caller
        has checked ``ensure_ready`` and awaited ``refresh`` first (within its deadline)."""
        resolved = self.connector_type(connector, kind, create)
        if resolved == "source" and not create:
            self.require_known(connector)
        self.require_stopped(connector)
        return resolved
