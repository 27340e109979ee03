"""Kafka Connect's offset storage, byte for byte.

The package is split by responsibility; see README.md ("Where things live") for the map.
"""

__version__ = "0.1.0"
