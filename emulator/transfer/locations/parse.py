"""Location strings (``--from``/``--to``) → locations.

=============================  ===================================================================
``kafka://HOST:PORT/TOPIC``    an offsets topic: read to end like Connect; written with murmur2
                               placement over the topic's *current* partition count
``embedded:PATH``              an embedded log: ``PATH`` is a data directory (log ``connect-offsets``)
                               or a ``*.sqlite3`` file
``http://…`` / ``https://…``   a running daemon: ``GET``/``POST /offsets/records`` (STOPPED rule,
                               read-your-writes, the daemon's own diff)
``standalone:PATH``            Connect's standalone offsets file; written by *merging* into it
``cdc:PATH``                   Flink CDC / RisingWave states, JSON lines (see ``formats.cdc_state``)
``kip875:PATH``                KIP-875 bodies per connector (see ``formats.kip875``)
``snapshot:PATH``              an Avro snapshot (``schemas/snapshot.avsc``)
=============================  ===================================================================

A bare path is accepted by extension: ``.avro`` snapshot, ``.jsonl`` cdc, ``.json`` kip875,
``.offsets`` standalone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from emulator.transfer.errors import LocationError
from emulator.transfer.locations.base import Location
from emulator.transfer.locations.daemon import DaemonLocation
from emulator.transfer.locations.files import (
    CdcLocation,
    FileLocation,
    Kip875Location,
    SnapshotLocation,
    StandaloneLocation,
)
from emulator.transfer.locations.logs import EmbeddedLocation, KafkaLocation

_EXTENSIONS: dict[str, Callable[[Path], Location]] = {
    ".avro": SnapshotLocation,
    ".jsonl": CdcLocation,
    ".json": Kip875Location,
    ".offsets": StandaloneLocation,
}
_FILE_KINDS: dict[str, Callable[[Path], Location]] = {
    "standalone": StandaloneLocation,
    "cdc": CdcLocation,
    "kip875": Kip875Location,
    "snapshot": SnapshotLocation,
}
FILE_KINDS = frozenset(_FILE_KINDS)


def parse_location(text: str) -> Location:
    """A location string as documented in the module docstring; ``LocationError`` if it is none."""
    if text.startswith(("http://", "https://")):
        return DaemonLocation(text)
    if text.startswith("kafka://"):
        parts = urlsplit(text)
        topic = parts.path.lstrip("/")
        if not parts.netloc or not topic or "/" in topic:
            raise LocationError(f"{text!r}: expected kafka://HOST:PORT[,HOST:PORT…]/TOPIC")
        return KafkaLocation(parts.netloc, topic)
    kind, sep, rest = text.partition(":")
    if sep and kind == "embedded":
        if not rest:
            raise LocationError("embedded: needs a data directory or a .sqlite3 file")
        path = Path(rest)
        if path.suffix == ".sqlite3":
            return EmbeddedLocation(path.parent, path.stem)
        return EmbeddedLocation(path, "connect-offsets")
    if sep and kind in _FILE_KINDS:
        if not rest:
            raise LocationError(f"{kind}: needs a file path")
        return _FILE_KINDS[kind](Path(rest))
    path = Path(text)
    factory = _EXTENSIONS.get(path.suffix)
    if factory is None:
        raise LocationError(
            f"{text!r} is not a location: use kafka://HOST:PORT/TOPIC, embedded:DIR, http://DAEMON, or "
            "standalone:/cdc:/kip875:/snapshot: followed by a path (bare paths ending in .offsets, .jsonl, "
            ".json or .avro are recognised)"
        )
    return factory(path)


def is_file_location(location: Location) -> bool:
    """True for the file kinds (what ``export`` writes and ``import`` reads)."""
    return isinstance(location, FileLocation)
