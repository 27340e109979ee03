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
``KIND:-``                     a file kind on standard input (``--from``) or output (``--to``)
=============================  ===================================================================

A bare path is accepted by extension: ``.avro`` snapshot, ``.jsonl`` cdc, ``.json`` kip875,
``.offsets`` standalone. A path whose text before its first ``:`` looks like a scheme (a letter, then
letters or digits; one letter alone is a Windows drive) is refused unless the scheme is one of the
above: ``risingwave:rw.jsonl`` is a mistyped format far more often than a file name, and
``./risingwave:rw.jsonl`` names such a file.
"""

from __future__ import annotations

import difflib
import re
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

_EXTENSIONS: dict[str, Callable[[Path, bool], Location]] = {
    ".avro": SnapshotLocation,
    ".jsonl": CdcLocation,
    ".json": Kip875Location,
    ".offsets": StandaloneLocation,
}
_FILE_KINDS: dict[str, Callable[[Path, bool], Location]] = {
    "standalone": StandaloneLocation,
    "cdc": CdcLocation,
    "kip875": Kip875Location,
    "snapshot": SnapshotLocation,
}
FILE_KINDS = frozenset(_FILE_KINDS)
_SCHEMES = ("kafka", "embedded", "http", "https", *_FILE_KINDS)
_SCHEME_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9]+")
"""Text before a location's first ':' that reads as a scheme: ``C:`` (a drive) and ``./x:y`` do not."""


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
        return _FILE_KINDS[kind](Path(rest), rest == "-")
    if sep and _SCHEME_LIKE.fullmatch(kind):
        raise LocationError(_unknown_scheme(text, kind))
    path = Path(text)
    factory = _EXTENSIONS.get(path.suffix)
    if factory is None:
        raise LocationError(
            f"{text!r} is not a location: use kafka://HOST:PORT/TOPIC, embedded:DIR, http://DAEMON, or "
            "standalone:/cdc:/kip875:/snapshot: followed by a path (bare paths ending in .offsets, .jsonl, "
            ".json or .avro are recognised)"
        )
    return factory(path, False)


_ALIASES = {
    "risingwave": "cdc",
    "flink": "cdc",
    "flinkcdc": "cdc",
    "jsonl": "cdc",
    "avro": "snapshot",
    "json": "kip875",
}
"""Names a user may reach for, and the kind that reads or writes that format."""


def _unknown_scheme(text: str, kind: str) -> str:
    """Why ``kind:…`` is refused: a known scheme written without its ``//``, or an unknown one."""
    lowered = kind.lower()
    if lowered == "kafka":
        return f"{text!r}: expected kafka://HOST:PORT[,HOST:PORT…]/TOPIC"
    if lowered in ("http", "https"):
        return f"{text!r}: expected {lowered}://HOST:PORT (a daemon)"
    known = [*sorted(("embedded", *_FILE_KINDS)), "kafka", "http", "https"]
    close = _ALIASES.get(lowered) or next(iter(difflib.get_close_matches(lowered, known, n=1, cutoff=0.5)), None)
    hint = ""
    if close in ("kafka", "http", "https"):
        hint = f" (did you mean {close}://?)"
    elif close is not None:
        flag = " with --risingwave" if lowered == "risingwave" else ""
        hint = f" (did you mean {close}:{text[len(kind) + 1 :]}{flag}?)"
    listed = ", ".join(f"{k}://" if k in ("kafka", "http", "https") else f"{k}:" for k in known)
    return (
        f"{text!r}: {kind!r} is not a location kind{hint}; known: {listed}. For a file whose name holds a ':', "
        f"write it as a path: ./{text}"
    )


def is_file_location(location: Location) -> bool:
    """True for the file kinds (what ``export`` writes and ``import`` reads)."""
    return isinstance(location, FileLocation)
