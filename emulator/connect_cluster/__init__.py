"""Awareness of a running Connect cluster, from its config and status topics (read only).

``ConnectCluster`` (and the Kafka client behind it, confluent_kafka) is loaded when first asked for:
importing any module of this package runs this file, and a daemon on the embedded log imports
``emulator.connect_cluster.state`` and its neighbours but never reads a Connect cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.connect_cluster.kind import connector_kind
from emulator.connect_cluster.state import ClusterState, ConnectorSnapshot, ConnectorStatus
from emulator.model.connectors import ConnectorKind

if TYPE_CHECKING:
    from emulator.connect_cluster.cluster import ConnectCluster


def __getattr__(name: str) -> Any:
    if name == "ConnectCluster":
        from emulator.connect_cluster.cluster import ConnectCluster

        return ConnectCluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ClusterState",
    "ConnectCluster",
    "ConnectorKind",
    "ConnectorSnapshot",
    "ConnectorStatus",
    "connector_kind",
]
