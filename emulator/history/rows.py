"""The archive's row: one log record with its origin and coordinates, as archived and as read back.

The row is the one shape shared by retention and recovery (rows read
back to fold or to rebuild the watermark) and the queries (rows → changes, past states). Typing it
once here keeps those modules from disagreeing about a field's name or whether it may be null; the
fields and their order are those of ``schemas/history-record.avsc`` (``schema.FIELDS``).
"""

from __future__ import annotations

from typing import TypedDict


class ArchiveRow(TypedDict):
    """One archived record: the Avro fields, raw key and value bytes (``value`` None: a tombstone)."""

    log: str
    epoch: int
    kafka_partition: int
    kafka_offset: int
    record_timestamp_ms: int
    """The log record's timestamp, -1 when it carries none."""
    archived_at_ms: int
    origin: str
    operation: str | None
    request_connector: str | None
    principal: str | None
    """Who made the request that wrote the record (daemon writes only; None in older files)."""
    remote: str | None
    """The client's address as the daemon saw it (daemon writes only; None in older files)."""
    key: bytes | None
    value: bytes | None
    connector: str | None
    partition_json: str | None
    key_problem: str | None
    crc32: int


class HistoryRow(ArchiveRow):
    """A row as the queries hand it out: the archived fields plus the time the queries order by."""

    time_ms: int


def record_time(row: ArchiveRow) -> int:
    """A row's time for queries and retention: the log record's timestamp, else when we archived it."""
    ts = row["record_timestamp_ms"]
    return ts if ts >= 0 else row["archived_at_ms"]
