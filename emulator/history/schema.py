"""The history record's Avro schema (``schemas/history-record.avsc``), its fields and its checksum."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from functools import cache
from typing import Any

import fastavro

from emulator.formats.avro_schemas import schema_text as avro_schema_text

SCHEMA_FILE = "history-record.avsc"
FIELDS = (
    "log",
    "epoch",
    "kafka_partition",
    "kafka_offset",
    "record_timestamp_ms",
    "archived_at_ms",
    "origin",
    "operation",
    "request_connector",
    "principal",
    "remote",
    "key",
    "value",
    "connector",
    "partition_json",
    "key_problem",
    "crc32",
)


def schema_text(name: str = SCHEMA_FILE) -> str:
    """The history record's schema text (``emulator.formats.avro_schemas`` finds it)."""
    return avro_schema_text(name)


@cache
def history_schema() -> Any:
    """The parsed schema (fastavro's form), loaded once."""
    parsed = fastavro.parse_schema(json.loads(schema_text()))
    assert isinstance(parsed, dict)
    names = tuple(f["name"] for f in parsed["fields"])
    if names != FIELDS:
        raise RuntimeError(f"{SCHEMA_FILE} fields {names} differ from the archiver's {FIELDS}; reinstall the package")
    return parsed


HISTORY_FORMAT = 2
"""The file format this version writes (Avro header metadata ``history_format``) and the newest it
reads. 2: the checksum covers ``principal`` and ``remote`` when set (2026-11-23, ``9cb007a``); files
without the key are read as this format (files of format 1 verify under it too). A reader meeting a
newer format refuses that file by name instead of reading its records as damaged ones, which is all
a version before ``9cb007a`` can do with records of format 2 (docs/operations.md, Upgrades)."""

FORMAT_KEY = "history_format"


def newer_format(metadata: Mapping[str, Any]) -> int | None:
    """The file's format when it is newer than this version reads; None when it can be read."""
    raw = metadata.get(FORMAT_KEY)
    if raw is None:
        return None
    try:
        found = int(raw.decode() if isinstance(raw, bytes) else raw)
    except (ValueError, UnicodeDecodeError):
        return -1  # not a number: nothing this version wrote
    return found if found > HISTORY_FORMAT else None


ADDED_FIELDS = ("principal", "remote")
"""Fields added after the first version of the schema, all nullable with a null default: a file
written before them reads with ``None`` there (``missing_fields``), and their checksum is unchanged."""


def missing_fields(writer_schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The added fields a file's own (writer) schema lacks: the reader fills them with None."""
    present = {f.get("name") for f in writer_schema.get("fields", ())}
    return tuple(name for name in ADDED_FIELDS if name not in present)


def content_crc(row: Mapping[str, Any]) -> int:
    """CRC-32 over every field but ``crc32``, to tell damaged bytes from data (not a signature).

    One f-string rather than a loop over field names: this runs once per archived record. The
    fields added later (``ADDED_FIELDS``) count only when set, so a record of an old file (where
    they are absent, read as None) keeps the checksum it was written with.
    """
    head = (
        f"{row['log']}\x1f{row['epoch']}\x1f{row['kafka_partition']}\x1f{row['kafka_offset']}\x1f"
        f"{row['record_timestamp_ms']}\x1f{row['archived_at_ms']}\x1f{row['origin']}\x1f{row['operation']}\x1f"
        f"{row['request_connector']}\x1f{row['connector']}\x1f{row['partition_json']}\x1f{row['key_problem']}"
    )
    principal, remote = row.get("principal"), row.get("remote")
    if principal is not None or remote is not None:
        head += f"\x1e{principal}\x1f{remote}"
    crc = zlib.crc32(head.encode("utf-8", "surrogatepass"))
    for raw in (row["key"], row["value"]):
        prefix = _NULL if raw is None else b"\x01%d:" % len(raw)
        crc = zlib.crc32(raw or b"", zlib.crc32(prefix, crc))
    return crc


_NULL = b"\x00"
