"""The archive's row: one log record with its origin and coordinates, as archived and as read back.

The row is the one shape shared by the writer (records → rows), retention and recovery (rows read
back to fold or to rebuild the watermark) and the queries (rows → changes, past states). Typing it
once here keeps those modules from disagreeing about a field's name or whether it may be null; the
fields and their order are those of ``schemas/history-record.avsc`` (``schema.FIELDS``).
"""

from __future__ import annotations

import json
from typing import TypedDict

from emulator.codec.keys import KeyProblem, parse_key
from emulator.history.origins import EXTERNAL_ORIGIN, OriginRegistry
from emulator.history.schema import content_crc
from emulator.model.records import LogRecord

_KEY_CACHE_MAX = 200_000
_PARTITION_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=True).encode


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


KeyInfo = tuple[str | None, str | None, str | None]
"""``(connector, partition as JSON text, key problem)`` of a raw key."""


class RowMaker:
    """Turns log records into rows for one log; owned by the archiver thread (no locking).

    Key parsing is cached by raw key bytes: a replay meets the same few keys millions of times, and
    parsing JSON per record would make the archiver, not the disk, the bottleneck.
    """

    def __init__(self, identity: str, origins: OriginRegistry) -> None:
        self._identity = identity
        self._origins = origins
        self._key_cache: dict[bytes, KeyInfo] = {}

    def row(self, record: LogRecord, epoch: int, received_ms: int) -> ArchiveRow:
        origin = self._origins.lookup(record) if self._origins.enabled else EXTERNAL_ORIGIN
        connector, partition_json, problem = self._classify(record.key)
        operation = origin.operation
        if origin.uncertain and operation is not None:
            operation += " (unacknowledged)"
        row: ArchiveRow = {
            "log": self._identity,
            "epoch": epoch,
            "kafka_partition": record.partition,
            "kafka_offset": record.offset,
            "record_timestamp_ms": record.timestamp_ms,
            "archived_at_ms": received_ms,
            "origin": origin.origin,
            "operation": operation,
            "request_connector": origin.connector,
            "principal": origin.principal,
            "remote": origin.remote,
            "key": record.key,
            "value": record.value,
            "connector": connector,
            "partition_json": partition_json,
            "key_problem": problem,
            "crc32": 0,
        }
        row["crc32"] = content_crc(row)
        return row

    def _classify(self, key: bytes | None) -> KeyInfo:
        if key is None:
            return None, None, KeyProblem.NULL_KEY.value
        cached = self._key_cache.get(key)
        if cached is not None:
            return cached
        parsed = parse_key(key)
        if isinstance(parsed, KeyProblem):
            info: KeyInfo = (None, None, parsed.value)
        else:
            try:
                text = _PARTITION_JSON(parsed.partition)
            except (TypeError, ValueError):
                text = None
            info = (parsed.connector, text, None)
        if len(self._key_cache) >= _KEY_CACHE_MAX:
            self._key_cache.clear()
        self._key_cache[key] = info
        return info
