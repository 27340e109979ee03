"""Snapshots: raw offsets records in an Avro file, for backup, restore and migration.

Avro because the schema travels inside the file and any Avro reader (Java, Spark, ``avro-tools``)
can open a backup years later without this package; the schema's home is ``schemas/snapshot.avsc``
(the contract), packaged into the wheel as ``emulator/schemas/``. Records carry their bytes
untouched, so a restore writes exactly what was backed up; the source coordinates are kept for
audit and diffs, never for placement.

A snapshot is read completely and checked (schema, record count from the metadata) before
anything is returned, so a truncated backup restores nothing rather than part of the offsets.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any, Final

import fastavro

from emulator.codec.surrogates import printable
from emulator.formats.atomic import atomic_write
from emulator.formats.avro_schemas import schema_text as avro_schema_text
from emulator.formats.file_kinds import STREAM_TIMEOUT_S, read_source
from emulator.formats.model import FormatError, Loaded, RawRecord, Tick, connector_of, tick

__all__ = ["FORMAT", "SnapshotInfo", "dumps", "load_file", "loads", "schema_text", "snapshot_schema", "write_file"]

SCHEMA_FILE: Final = "snapshot.avsc"
FORMAT: Final = "snapshot/1"
META_FORMAT: Final = "connect_offsets.format"
META_SOURCE: Final = "connect_offsets.source"
META_TAKEN_AT: Final = "connect_offsets.taken_at_ms"
META_RECORDS: Final = "connect_offsets.records"


def schema_text(name: str = SCHEMA_FILE) -> str:
    """The snapshot's schema text (``emulator.formats.avro_schemas`` finds it)."""
    return avro_schema_text(name)


@cache
def snapshot_schema() -> Any:
    return fastavro.parse_schema(json.loads(schema_text()))


class SnapshotInfo:
    """The snapshot-level metadata."""

    __slots__ = ("records", "source", "taken_at_ms")

    def __init__(self, source: str | None, taken_at_ms: int | None, records: int | None) -> None:
        self.source = source
        self.taken_at_ms = taken_at_ms
        self.records = records


def _to_avro(record: RawRecord) -> dict[str, Any]:
    connector = connector_of(record.key)
    return {
        "key": record.key,
        "value": record.value,
        # Informational (the key is the truth), and an Avro string is UTF-8: a name holding half a
        # surrogate pair (Connect's data may) as its backslash escape. Raw, it ended the export in a
        # UnicodeEncodeError, every other connector's records unwritten with it.
        "connector": None if connector is None else printable(connector),
        "kafka_partition": record.kafka_partition,
        "log_offset": record.log_offset,
        "timestamp_ms": record.timestamp_ms,
    }


def dumps(
    records: Iterable[RawRecord], source: str, taken_at_ms: int | None = None, progress: Tick | None = None
) -> bytes:
    """A snapshot of ``records`` (``progress``: told every ``TICK_EVERY`` records how many were encoded)."""
    rows = []
    for number, record in enumerate(records, start=1):
        tick(progress, number, None)
        rows.append(_to_avro(record))
    metadata = {
        META_FORMAT: FORMAT,
        META_SOURCE: source,
        META_TAKEN_AT: str(time.time_ns() // 1_000_000 if taken_at_ms is None else taken_at_ms),
        META_RECORDS: str(len(rows)),
    }
    out = io.BytesIO()
    fastavro.writer(out, snapshot_schema(), rows, codec="deflate", metadata=metadata)
    return out.getvalue()


def loads(data: bytes, source: str | None = None, progress: Tick | None = None) -> tuple[Loaded, SnapshotInfo]:
    """A snapshot's records, checked completely (``progress``: told every ``TICK_EVERY`` records how
    many were read, of how many the file declares)."""
    if not data:
        raise FormatError("the file is empty (0 bytes): not a snapshot", source=source)
    stream = io.BytesIO(data)
    rows: list[RawRecord] = []
    try:
        reader = fastavro.reader(stream, reader_schema=snapshot_schema())
        meta = {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for k, v in reader.metadata.items()}
        declared_count = meta.get(META_RECORDS, "")
        expected = int(declared_count) if declared_count.isdigit() else None
        for item in reader:
            tick(progress, len(rows), expected)
            row: dict[str, Any] = item  # type: ignore[assignment]  # a record schema yields dicts
            rows.append(
                RawRecord(row["key"], row["value"], row["kafka_partition"], row["log_offset"], row["timestamp_ms"])
            )
    except FormatError:
        raise
    except Exception as exc:  # fastavro raises many types (EOFError, ValueError, SchemaResolutionError, ...)
        if isinstance(exc, ValueError) and "you need to install" in str(exc):  # fastavro's missing_codec_lib
            raise FormatError(
                f"the snapshot is compressed with a codec this installation cannot decompress ({exc}); the file "
                "is not known to be damaged: install that package (pip install cramjam backports.zstd) and run "
                "the command again",
                source=source,
            ) from exc
        raise FormatError(
            f"not a readable snapshot ({type(exc).__name__}: {exc}); {len(rows)} record(s) were readable before the "
            "damage, none will be imported",
            source=source,
            where=f"byte offset {stream.tell()} of {len(data)}",
        ) from exc
    notes: list[str] = []
    if meta.get(META_FORMAT) != FORMAT:
        notes.append(f"no '{META_FORMAT}: {FORMAT}' marker: not written by connect-offsets; read with its schema")
    declared = meta.get(META_RECORDS)
    if declared is not None and (not declared.isdigit() or int(declared) != len(rows)):
        raise FormatError(
            f"the snapshot declares {declared} records but holds {len(rows)}; it is incomplete or damaged and "
            "none will be imported",
            source=source,
        )
    taken = meta.get(META_TAKEN_AT)
    info = SnapshotInfo(meta.get(META_SOURCE), int(taken) if taken and taken.isdigit() else None, len(rows))
    return Loaded(rows, notes), info


def load_file(path: str | Path) -> tuple[Loaded, SnapshotInfo]:
    path = Path(path)
    try:
        data = read_source(path, timeout_s=STREAM_TIMEOUT_S)
    except OSError as exc:
        raise FormatError(f"cannot read the snapshot: {exc.strerror or exc}", source=str(path)) from exc
    return loads(data, source=str(path))


def write_file(path: str | Path, data: bytes) -> int:
    """Atomically replace ``path`` with a snapshot's bytes."""
    return atomic_write(path, data)
