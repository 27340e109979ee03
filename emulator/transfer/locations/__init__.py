"""Where offsets can be read from and written to: logs (Kafka, embedded), a daemon, and files.

``base.Location`` is what the pipeline calls; ``logs``, ``daemon`` and ``files`` hold the kinds;
``parse.parse_location`` turns a ``--from``/``--to`` string into one (the table of location strings
is in ``parse.py``).
"""

from emulator.transfer.locations.base import Location
from emulator.transfer.locations.daemon import DaemonLocation
from emulator.transfer.locations.files import (
    CdcLocation,
    DocumentLocation,
    FileLocation,
    Kip875Location,
    SnapshotLocation,
    StandaloneLocation,
)
from emulator.transfer.locations.logs import EmbeddedLocation, KafkaLocation, LogLocation
from emulator.transfer.locations.parse import FILE_KINDS, is_file_location, parse_location

__all__ = [
    "FILE_KINDS",
    "CdcLocation",
    "DaemonLocation",
    "DocumentLocation",
    "EmbeddedLocation",
    "FileLocation",
    "KafkaLocation",
    "Kip875Location",
    "Location",
    "LogLocation",
    "SnapshotLocation",
    "StandaloneLocation",
    "is_file_location",
    "parse_location",
]
