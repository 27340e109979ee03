"""Kafka Connect's offset storage, byte for byte.

The package is split by responsibility; see docs/architecture.md ("Layout") for the map.
"""

__version__ = "0.1.0"
