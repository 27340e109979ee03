"""Who may modify a connector's offsets: Connect's STOPPED rule, behind one small interface.

Connect refuses offset changes unless the connector is STOPPED with zero tasks. Without a Connect
cluster to consult, nobody runs the connector, so every known connector counts as stopped; the
config-topic-backed implementation plugs in here without touching the API or the service.
"""

from __future__ import annotations

from typing import Protocol


class ConnectorStates(Protocol):
    def is_stopped(self, connector: str) -> bool:
        """True when the connector's offsets may be modified now."""
        ...


class NoConnectCluster:
    """No config topic configured: no worker can be running any connector."""

    def is_stopped(self, connector: str) -> bool:
        return True


def not_stopped_message(connector: str) -> str:
    """Connect's exact 400 message (``DistributedHerder.modifyConnectorOffsetsChecks``)."""
    return (
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done "
        f"for the specified connector by issuing a 'PUT' request to the '/connectors/{connector}/stop' endpoint"
    )
