"""The materialized view of the offsets log: raw key bytes → latest value, plus a logical index.

Bytes are the truth: lookups by a Connect task are by exact key bytes, so the store is keyed by
raw bytes exactly as ``KafkaOffsetBackingStore.data`` is. Listing needs the logical view
(connector → partition maps), kept separately as Connect's ``connectorPartitions`` is, with one
deliberate refinement: several byte-different keys can denote the same logical partition (other
whitespace, key order or number formatting), and we remember every live one, so that an alter or
reset reaches the bytes the task really uses instead of only Connect's re-serialized HashMap order.

Keys are parsed once per distinct key (cached) rather than once per record, so a restore of a
long log costs a dict lookup per record.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.codec.keys import KeyProblem, ParsedKey, logical_id, parse_key, problem_message
from emulator.codec.values import CodecError, parse_offset
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)

_KeyInfo = tuple[ParsedKey, str] | KeyProblem


@dataclass(slots=True)
class Entry:
    """The latest live value of one raw key, with where and when it was written."""

    value: bytes
    partition: int
    offset: int
    timestamp_ms: int
    parsed: Any = field(default=None, compare=False)
    """The parsed offset, filled on first read (values are parsed lazily, once per record)."""
    parse_state: int = field(default=0, compare=False)
    """0 not parsed yet, 1 parsed, 2 unparseable (counted once, logged once)."""


@dataclass(slots=True)
class _LogicalPartition:
    """One logical source partition and the raw keys that currently denote it, oldest first."""

    partition: dict[str, Any]
    keys: dict[bytes, None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OffsetRow:
    """One row of a connector's offsets as the API lists it."""

    partition: dict[str, Any]
    offset: Any
    keys: tuple[bytes, ...]
    entry: Entry


@dataclass(slots=True)
class ViewStats:
    records_applied: int = 0
    tombstones_applied: int = 0
    empty_values: int = 0
    skipped_keys: Counter[str] = field(default_factory=Counter)
    unparseable_values: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "records_applied": self.records_applied,
            "tombstones_applied": self.tombstones_applied,
            "empty_values_applied": self.empty_values,
            "skipped_keys": dict(self.skipped_keys),
            "skipped_keys_total": sum(self.skipped_keys.values()),
            "unparseable_values": self.unparseable_values,
        }


class OffsetView:
    """Applied from the log's reader thread, read from API threads; one lock guards it all."""

    _WARN_EVERY = 1000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[bytes | None, Entry] = {}
        self._key_info: dict[bytes, _KeyInfo] = {}
        self._connectors: dict[str, dict[str, _LogicalPartition]] = {}
        self._versions: dict[str, int] = {}
        """Per connector, bumped on every change to what ``offsets`` lists (read caches key on it)."""
        self._names_version = 0
        """Bumped when a connector name appears (names never disappear, as in Connect)."""
        self.stats = ViewStats()
        self._listeners: list[Callable[[Sequence[LogRecord]], None]] = []
        self._written_through = False  # until the first write-through, replay needs no ordering guard
        self._deleted_ahead: dict[bytes, tuple[int, int]] = {}
        """Keys deleted by write-through whose tombstone the reader has not delivered yet."""
        self.listener_failures = 0

    def add_listener(self, listener: Callable[[Sequence[LogRecord]], None]) -> None:
        """Have ``listener(records)`` called with every batch once it is applied (history archive).

        Called on the reader thread, after the batch is applied. A listener that raises is logged
        and counted and never stops the view; listeners must be quick (queue and return) because
        the reader waits for them.
        """
        self._listeners.append(listener)

    # -- applying -------------------------------------------------------------------------
    def apply(self, records: Sequence[LogRecord]) -> None:
        """Apply records in log order (last write wins; a ``None`` value deletes)."""
        with self._lock:
            for record in records:
                self._apply_one(record)
        for listener in self._listeners:
            try:
                listener(records)
            except Exception:
                self.listener_failures += 1
                log.exception("view listener %r failed on %d records", listener, len(records))

    def apply_acknowledged(self, records: Sequence[LogRecord]) -> None:
        """Apply the daemon's own writes as soon as the log acknowledged them (write-through).

        Read-your-writes then costs no round trip through the reader, whose fetches some brokers
        hold until their wait expires. The reader delivers the same records later; the per-key
        guard in ``_apply_one`` keeps that (and any older record of the key still in flight) from
        undoing them. Listeners (history) and counters see only what the reader delivers, once.
        """
        with self._lock:
            for record in records:
                self._apply_one(record, own=True)

    def _is_older(self, record: LogRecord) -> bool:
        """Has this key already been applied from a later offset of the same partition?

        Only write-through can cause it (the reader delivers each partition in order); keys live in
        one partition (murmur2), so per-partition order is the order Connect's reader sees.
        """
        key = record.key
        current = self._data.get(key)
        if current is not None and current.partition == record.partition and current.offset > record.offset:
            return True
        ghost = self._deleted_ahead.get(key)  # type: ignore[arg-type]
        if ghost is not None and ghost[0] == record.partition:
            if ghost[1] > record.offset:
                return True
            del self._deleted_ahead[key]  # type: ignore[arg-type]  # the reader has reached that tombstone
        return False

    def _apply_one(self, record: LogRecord, own: bool = False) -> None:
        key = record.key
        stats = self.stats
        if not own:
            stats.records_applied += 1
        info = self._classify(key, count=not own)
        if own:
            self._written_through = True
        if key is not None and self._written_through and self._is_older(record):
            return
        if record.value is None:
            if not own:
                stats.tombstones_applied += 1
            self._data.pop(key, None)
            if key is not None:
                if own:
                    self._deleted_ahead[key] = (record.partition, record.offset)
                self._key_info.pop(key, None)
                if not isinstance(info, KeyProblem):
                    self._unindex(key, info)
            return
        if not record.value and not own:
            stats.empty_values += 1
        current = self._data.get(key)
        if current is not None and current.partition == record.partition and current.offset == record.offset:
            return  # the reader delivering a record already applied by write-through
        self._data[key] = Entry(record.value, record.partition, record.offset, record.timestamp_ms)
        if not isinstance(info, KeyProblem):
            self._index(key, info)  # type: ignore[arg-type]  # parsed keys are never None

    def _classify(self, key: bytes | None, count: bool = True) -> _KeyInfo:
        if key is None:
            info: _KeyInfo = KeyProblem.NULL_KEY
        else:
            cached = self._key_info.get(key)
            if cached is not None:
                info = cached
            else:
                parsed = parse_key(key)
                info = parsed if isinstance(parsed, KeyProblem) else (parsed, logical_id(parsed.partition))
                self._key_info[key] = info
        if isinstance(info, KeyProblem) and count:
            self._count_skip(info, key)
        return info

    def _count_skip(self, problem: KeyProblem, key: bytes | None) -> None:
        count = self.stats.skipped_keys[problem.value] + 1
        self.stats.skipped_keys[problem.value] = count
        if problem is not KeyProblem.PARTITION_NULL and (count == 1 or count % self._WARN_EVERY == 0):
            log.warning("%s (%d such record(s) so far)", problem_message(problem, key), count)

    def _index(self, key: bytes, info: tuple[ParsedKey, str]) -> None:
        parsed, lid = info
        self._bump(parsed.connector)
        partitions = self._connectors.get(parsed.connector)
        if partitions is None:
            partitions = self._connectors[parsed.connector] = {}
            self._names_version += 1
        logical = partitions.get(lid)
        if logical is None:
            logical = partitions[lid] = _LogicalPartition(parsed.partition)
        logical.keys.pop(key, None)  # re-insert: the newest write is last
        logical.keys[key] = None

    def _bump(self, connector: str) -> None:
        self._versions[connector] = self._versions.get(connector, 0) + 1

    def _unindex(self, key: bytes, info: tuple[ParsedKey, str]) -> None:
        parsed, lid = info
        self._bump(parsed.connector)
        partitions = self._connectors.get(parsed.connector)
        if partitions is None:
            # A tombstone for a connector never seen live still makes the name known, as in
            # Connect's connectorPartitions (the outer map never shrinks).
            self._connectors[parsed.connector] = {}
            self._names_version += 1
            return
        logical = partitions.get(lid)
        if logical is None:
            return
        logical.keys.pop(key, None)
        if not logical.keys:
            del partitions[lid]

    # -- reading --------------------------------------------------------------------------
    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self._connectors)

    def version(self, connector: str) -> int:
        """Changes with every record that changes ``offsets(connector)`` (a lock-free read of one int:
        a cache compares it before and after it renders)."""
        return self._versions.get(connector, 0)

    @property
    def names_version(self) -> int:
        """Changes whenever ``connectors()`` does."""
        return self._names_version

    def knows(self, connector: str) -> bool:
        with self._lock:
            return connector in self._connectors

    def live_keys(self) -> int:
        with self._lock:
            return len(self._data)

    def get_raw(self, key: bytes | None) -> Entry | None:
        with self._lock:
            return self._data.get(key)

    def raw_entries(self) -> list[tuple[bytes | None, Entry]]:
        """Every live raw key with its entry, keys Connect ignores included: a byte-exact export
        must carry what the log holds, not only what Connect lists."""
        with self._lock:
            return list(self._data.items())

    def find(self, connector: str, partition_lid: str) -> tuple[bytes, ...]:
        """The live raw keys denoting that logical partition (oldest first), or ``()``."""
        with self._lock:
            logical = self._connectors.get(connector, {}).get(partition_lid)
            return tuple(logical.keys) if logical else ()

    def offsets(self, connector: str) -> list[OffsetRow]:
        """Every live partition of a connector with its latest offset (from the newest key)."""
        with self._lock:
            snapshot = [
                (logical.partition, tuple(logical.keys)) for logical in self._connectors.get(connector, {}).values()
            ]
            rows = []
            for _, keys in snapshot:
                newest = keys[-1]
                rows.append((keys, newest, self._data[newest], self._key_info[newest]))
        result = []
        for keys, newest, entry, info in rows:
            assert not isinstance(info, KeyProblem)
            result.append(OffsetRow(info[0].partition, self._parsed(newest, entry), keys, entry))
        return result

    def _parsed(self, key: bytes, entry: Entry) -> Any:
        """Parse a value once per record; an unparseable one is counted and logged once, as
        Connect logs ``CRITICAL`` and leaves it out (we show it as ``null``)."""
        if entry.parse_state == 0:
            try:
                entry.parsed = parse_offset(entry.value)
                entry.parse_state = 1
            except CodecError as exc:
                with self._lock:
                    if entry.parse_state == 0:
                        self.stats.unparseable_values += 1
                        entry.parse_state = 2
                        log.error(
                            "CRITICAL: Failed to deserialize offset data for key %r (partition %d, offset %d): %s",
                            key,
                            entry.partition,
                            entry.offset,
                            exc,
                        )
        return entry.parsed
