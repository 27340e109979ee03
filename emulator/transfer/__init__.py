"""Moving offsets between stores and files, byte for byte: export, import, migrate.

- ``pipeline.transfer``: read the source completely, select, plan the diff, write;
- ``locations``: where offsets live (Kafka topics, embedded logs, daemons, files) and
  ``parse_location`` for ``--from``/``--to`` strings;
- ``selection``: which records travel; ``options``, ``report``, ``progress``, ``errors``: the types
  a caller passes and gets back.
"""

from emulator.transfer.errors import LocationError, TransferError
from emulator.transfer.locations import (
    FILE_KINDS,
    CdcLocation,
    DaemonLocation,
    EmbeddedLocation,
    KafkaLocation,
    Kip875Location,
    Location,
    SnapshotLocation,
    StandaloneLocation,
    is_file_location,
    parse_location,
)
from emulator.transfer.options import Malformed, TransferOptions
from emulator.transfer.pipeline import transfer
from emulator.transfer.progress import Progress
from emulator.transfer.report import ApplyResult, TransferReport

__all__ = [
    "FILE_KINDS",
    "ApplyResult",
    "CdcLocation",
    "DaemonLocation",
    "EmbeddedLocation",
    "KafkaLocation",
    "Kip875Location",
    "Location",
    "LocationError",
    "Malformed",
    "Progress",
    "SnapshotLocation",
    "StandaloneLocation",
    "TransferError",
    "TransferOptions",
    "TransferReport",
    "is_file_location",
    "parse_location",
    "transfer",
]
