"""Who may modify a connector's offsets, and what kind of connector it is, behind one small interface.

Connect refuses offset changes unless the connector exists (404) and is STOPPED with zero tasks
(400). Without a Connect cluster to consult there is no registry of connectors and nobody runs any
of them, so every connector counts as stopped and existence is left to the offsets themselves
(``exists`` answers None). ``emulator.connect_cluster.ConnectCluster`` is the implementation backed
by the cluster's config and status topics; the service and API see only this protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

ConnectorKind = Literal["source", "sink"]


class ConnectorStates(Protocol):
    def exists(self, connector: str) -> bool | None:
        """True/False from the registry (a live ``connector-<c>`` config); None when there is none."""
        ...

    def connectors(self) -> list[str] | None:
        """The registry's connectors (those with a live config), sorted; None when there is none."""
        ...

    def is_stopped(self, connector: str) -> bool:
        """True when the connector's offsets may be modified now."""
        ...

    def kind(self, connector: str) -> ConnectorKind | None:
        """``source`` or ``sink`` per the registry; None when unknown (no registry, no config)."""
        ...

    def config(self, connector: str) -> Mapping[str, Any] | None:
        """The connector's config as the registry holds it, if any."""
        ...

    def ensure_ready(self) -> None:
        """Raise ``NotReady`` until the registry has been read to its end (Connect's startup rule)."""
        ...

    def refresh(self, timeout_s: float) -> None:
        """Catch up with the registry before a modification (the herder's read-to-end); raises on timeout."""
        ...

    def readiness(self) -> dict[str, Any] | None:
        """Progress and counters for health endpoints; None when there is no registry."""
        ...


class NoConnectCluster:
    """No config topic configured: no worker can be running any connector."""

    def exists(self, connector: str) -> bool | None:
        return None

    def connectors(self) -> list[str] | None:
        return None

    def is_stopped(self, connector: str) -> bool:
        return True

    def kind(self, connector: str) -> ConnectorKind | None:
        return None

    def config(self, connector: str) -> Mapping[str, Any] | None:
        return None

    def ensure_ready(self) -> None:
        return None

    def refresh(self, timeout_s: float) -> None:
        return None

    def readiness(self) -> dict[str, Any] | None:
        return None


def not_stopped_message(connector: str) -> str:
    """Connect's exact 400 message (``DistributedHerder.modifyConnectorOffsetsChecks``)."""
    return (
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done "
        f"for the specified connector by issuing a 'PUT' request to the '/connectors/{connector}/stop' endpoint"
    )


def not_found_message(connector: str) -> str:
    """Connect's exact 404 message (``AbstractHerder.connectorOffsets``, ``modifyConnectorOffsetsChecks``)."""
    return f"Connector {connector} not found"


def control_characters(name: str) -> list[int]:
    """The code points of ``name`` that Connect's name validator refuses
    (``ConfigDef.NonEmptyStringWithoutControlChars``: Java's ``Character.isISOControl``). The log may
    hold such a name (any tool may write one); no URL of the daemon's, as of Connect's, may name it."""
    return [ord(c) for c in name if ord(c) <= 0x1F or 0x7F <= ord(c) <= 0x9F]
