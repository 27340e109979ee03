"""Awareness of a running Connect cluster, from its config and status topics (read only)."""

from emulator.connect_cluster.cluster import ConnectCluster
from emulator.connect_cluster.kind import connector_kind
from emulator.connect_cluster.state import ClusterState, ConnectorSnapshot, ConnectorStatus
from emulator.model.connectors import ConnectorKind

__all__ = [
    "ClusterState",
    "ConnectCluster",
    "ConnectorKind",
    "ConnectorSnapshot",
    "ConnectorStatus",
    "connector_kind",
]
