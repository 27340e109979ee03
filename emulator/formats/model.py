"""The neutral model every offset format converts to and from: raw records, bytes untouched.

Connect looks offsets up by exact key bytes, so a transfer between two byte-preserving formats
(a topic, the embedded log, a standalone file, a snapshot) must never decode and re-encode a key:
one changed escape or digit makes it another partition that no task will ever read. Formats that
can only carry parsed JSON (KIP-875 bodies, CDC state) say so when the bytes they produce differ.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from emulator.codec.keys import KeyProblem, ParsedKey, parse_key


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One offsets entry: key bytes and value bytes, ``value is None`` being a tombstone.

    The coordinates are where the record sat in the log it was read from, kept for snapshots and
    diffs; they are never used to place a record (placement is murmur2 over the destination's
    partition count).
    """

    key: bytes
    value: bytes | None
    kafka_partition: int | None = None
    log_offset: int | None = None
    timestamp_ms: int | None = None
    value_at: int | None = field(default=None, compare=False)
    """Byte offset of the value's first byte in the file it was read from (standalone files), so a
    refusal can point at the damage; ``None`` where the source has no such place. Where a record
    came from is not part of what it is, so equality ignores it."""


@dataclass(slots=True)
class Loaded:
    """What a reader produced: the records in source order, and what the operator should know."""

    records: list[RawRecord]
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Encoded:
    """What a writer produced for a document file: its bytes, the records it really holds, and what
    the operator should know.

    ``records`` are as the format's own reader reads them back from ``data``: a format may be unable
    to hold some (tombstones in a CDC state, keys Connect ignores in KIP-875 JSON), and one that
    carries parsed JSON holds each key and value as Jackson encodes its content, not the bytes it
    was given (``["c", {"a": 1}]`` is held as ``["c",{"a":1}]``). A diff against the existing file,
    read by that reader, then compares like with like."""

    data: bytes
    records: list[RawRecord]
    notes: list[str] = field(default_factory=list)


Tick = Callable[[int, int | None], None]
"""Told how far a long read or write got: records done, and of how many (None: not known yet).
Readers and writers call it every ``TICK_EVERY`` records; the caller decides what to print
(``emulator.transfer.progress.Progress``)."""

TICK_EVERY = 1000


def tick(progress: Callable[[int, int | None], None] | None, done: int, total: int | None) -> None:
    """Tell ``progress`` how far ``done`` got, every ``TICK_EVERY`` records only: printing each
    record would cost more than reading it, and a caller with no progress passes None."""
    if progress is not None and done and done % TICK_EVERY == 0:
        progress(done, total)


class FormatError(ValueError):
    """Input that does not have the shape its format promises; nothing from it may be imported.

    ``where`` names the place (a byte offset, a line number, a JSON path) so that a damaged file can
    be inspected by hand.
    """

    def __init__(self, message: str, *, source: str | None = None, where: str | None = None) -> None:
        self.detail = message
        self.source = source
        self.where = where
        prefix = f"{source}: " if source else ""
        suffix = f" (at {where})" if where else ""
        super().__init__(f"{prefix}{message}{suffix}")


class KeyIndex:
    """Each distinct key parsed once per transfer: selection, grouping and diffs all ask, and a
    100,000-record migration should not parse every key three times."""

    __slots__ = ("_parsed",)

    def __init__(self) -> None:
        self._parsed: dict[bytes, ParsedKey | KeyProblem] = {}

    def parse(self, key: bytes) -> ParsedKey | KeyProblem:
        found = self._parsed.get(key)
        if found is None:
            found = self._parsed[key] = parse_key(key)
        return found

    def connector(self, key: bytes) -> str | None:
        parsed = self.parse(key)
        return None if isinstance(parsed, KeyProblem) else parsed.connector


def connector_of(key: bytes) -> str | None:
    """The connector name Connect would file this key under, or ``None`` if Connect ignores the key."""
    parsed = parse_key(key)
    return None if isinstance(parsed, KeyProblem) else parsed.connector


def latest_per_key(records: Iterable[RawRecord]) -> dict[bytes, RawRecord]:
    """Last write wins per key, in first-seen key order: how every offset store applies a batch."""
    latest: dict[bytes, RawRecord] = {}
    for record in records:
        latest[record.key] = record
    return latest


def duplicate_names_note(names: list[str]) -> list[str]:
    """The note for names a JSON object held twice inside partitions, offsets or bodies (none: no note)."""
    if not names:
        return []
    return [
        f"{len(names)} name(s) appear twice in one JSON object (first: {json.dumps(names[0], ensure_ascii=False)}); "
        "the later value was kept, as Connect's JSON reader (Jackson) keeps it"
    ]
