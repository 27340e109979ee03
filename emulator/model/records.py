"""The record model shared by every log backend.

Connect reads only a record's key and value; we additionally keep where a record sits in the log
and when it was written, because history, readiness and read-your-writes all need coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of the offsets log, exactly as stored: raw bytes, never re-encoded.

    ``value is None`` is a tombstone; ``value == b""`` is *not* (Connect stores it as a live entry).
    """

    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class Position:
    """Where an acknowledged write landed; the view is caught up with it once it has applied
    a record at ``offset`` (or later) in ``partition``."""

    partition: int
    offset: int
