"""``connect-debezium``'s Spark offsets, and how they map to the connector's Connect offsets.

A Spark offset is self-describing, so the listener and ``spark-handoff`` can publish it from the
checkpoint alone, as they do for ``connect-file``::

    {"connector": "inventory", "seq": 42,
     "source_offsets": [{"partition": {"server": "inv"}, "offset": {"lsn_proc": 23, "lsn": 23, ...}}]}

- ``seq`` counts the changes this query has read since it started from the daemon (the first change
  after the daemon's offsets is 1). It orders Spark's batches; it means nothing to Connect.
- ``source_offsets`` is what Connect would commit after the change ``seq``: for each source
  partition, the ``sourceOffset`` of the last change of that partition up to ``seq``, in the key
  order the connector's own map has (Connect's offset converter writes it that way, and the daemon
  keeps a request's key order), sorted by partition so the JSON text is stable (Spark compares
  offsets as strings).

Commits must never move a connector backwards, but Debezium offsets are not ordered field by field
(a transaction that began earlier can commit later, so ``txId`` goes down while the log position
goes up; a MySQL binlog rotation resets ``pos``). ``debezium_backwards_reason`` compares positions
the way each connector family orders them; ``DaemonOffsets.commit`` takes it as its ``order``, and
``behind_daemon`` uses it to tell a query resumed from a checkpoint that Connect has moved on since.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from emulator.codec.jackson_reader import CodecError, loads_lenient
from emulator.codec.keys import ParsedKey, parse_key
from emulator.spark.committer import same_offset
from emulator.spark.gtid_sets import contained_within, parse_gtid_set

Entry = tuple[dict[str, Any], dict[str, Any]]
KEYS = ("connector", "seq", "source_offsets")


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class DebeziumOffset:
    connector: str
    seq: int
    entries: tuple[Entry, ...]
    """(partition, offset) per source partition, sorted by the partition's canonical JSON."""

    @classmethod
    def of(cls, connector: str, seq: int, entries: Sequence[Entry]) -> DebeziumOffset:
        by_partition = {_text(partition): (partition, offset) for partition, offset in entries}
        return cls(connector, seq, tuple(by_partition[k] for k in sorted(by_partition)))

    def spark(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "seq": self.seq,
            "source_offsets": [{"partition": p, "offset": o} for p, o in self.entries],
        }

    def connect_entries(self) -> list[Entry]:
        """Connect's (partition, offset) entries: what the connector resumes after."""
        return [(dict(p), dict(o)) for p, o in self.entries]

    def same_position(self, other: DebeziumOffset) -> bool:
        return self.seq == other.seq and _text(self.spark()["source_offsets"]) == _text(other.spark()["source_offsets"])

    @classmethod
    def parse(cls, value: Any) -> DebeziumOffset | None:
        """A ``connect-debezium`` Spark offset, or ``None`` if ``value`` is not one."""
        if not isinstance(value, dict) or set(value) != set(KEYS):
            return None
        connector, seq, listed = value["connector"], value["seq"], value["source_offsets"]
        if not isinstance(connector, str) or not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            return None
        if not isinstance(listed, list):
            return None
        entries: list[Entry] = []
        for item in listed:
            if not isinstance(item, dict) or set(item) != {"partition", "offset"}:
                return None
            partition, offset = item["partition"], item["offset"]
            if not isinstance(partition, dict) or not isinstance(offset, dict):
                return None
            entries.append((partition, offset))
        return cls(connector, seq, tuple(entries))


def daemon_position(connector: str, records: Mapping[bytes, bytes | None]) -> DebeziumOffset:
    """Where a fresh query starts: the connector's offsets in the daemon's raw records (keys Connect
    would not read as this connector's, and values that are not offset maps, are left out)."""
    entries: list[Entry] = []
    for key, value in records.items():
        parsed = parse_key(key)
        if not isinstance(parsed, ParsedKey) or parsed.connector != connector or value is None:
            continue
        try:
            offset = loads_lenient(value)
        except CodecError:
            continue
        if isinstance(offset, dict):
            entries.append((parsed.partition, offset))
    return DebeziumOffset.of(connector, 0, entries)


# -- ordering -----------------------------------------------------------------------------------


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _postgres(offset: Mapping[str, Any]) -> tuple[int, ...] | None:
    """Postgres: the last completely processed LSN (``lsn_proc``), else the event's ``lsn``; a
    finished snapshot is after any unfinished one at the same LSN."""
    lsn = _int(offset.get("lsn_proc"))
    if lsn is None:
        lsn = _int(offset.get("lsn"))
    if lsn is None or ("txId" not in offset and "lsn_proc" not in offset):
        return None
    in_snapshot = offset.get("snapshot") not in (None, False, "false") and offset.get("snapshot_completed") is not True
    return (lsn, 0 if in_snapshot else 1)


_BINLOG_NUMBER = re.compile(r"\.(\d+)$")


def _binlog(offset: Mapping[str, Any]) -> tuple[int, ...] | None:
    """MySQL / MariaDB: binlog file number, then ``pos``, ``event``, ``row``."""
    file, pos = offset.get("file"), _int(offset.get("pos"))
    if not isinstance(file, str) or pos is None:
        return None
    match = _BINLOG_NUMBER.search(file)
    if match is None:
        return None
    return (int(match.group(1)), pos, _int(offset.get("event")) or 0, _int(offset.get("row")) or 0)


def position(offset: Mapping[str, Any]) -> tuple[int, ...] | None:
    """An ordered position for the connector families this module knows, else ``None``."""
    return _postgres(offset) or _binlog(offset)


def _gtid_order(current: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """``forward``: ``new``'s GTID set holds ``current``'s and more; ``backward``: the reverse;
    ``unordered``: neither holds the other; None: no GTID sets to compare, or the same set (the
    binlog coordinates decide)."""
    old_text, new_text = current.get("gtids"), new.get("gtids")
    if not isinstance(old_text, str) or not isinstance(new_text, str):
        return None
    old_set, new_set = parse_gtid_set(old_text), parse_gtid_set(new_text)
    if old_set is None or new_set is None:
        return None
    forward, backward = contained_within(old_set, new_set), contained_within(new_set, old_set)
    if forward and backward:
        return None
    if forward or backward:
        return "forward" if forward else "backward"
    return "unordered"


def debezium_backwards_reason(current: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str | None:
    """Why writing ``new`` over ``current`` must not happen (``DaemonOffsets.commit``'s ``order``).

    Equal offsets are "unchanged". Where both have a position this module can order (Postgres LSNs,
    MySQL binlog coordinates), a smaller one is backwards. Offsets it cannot order (other
    connectors, or a snapshot against a stream of another family) are written: refusing them would
    stall the handoff, and Connect itself never compares offsets."""
    if current is None:
        return None
    if same_offset(current, new):
        return "unchanged"
    applied = _gtid_order(current, new)  # MySQL with GTIDs: what was applied decides, not coordinates
    if applied == "backward":
        return "would move backwards (its GTID set lacks transactions the current one has)"
    if applied in ("forward", "unordered"):  # a failover restarts coordinates; sets neither holds: written
        return None
    old_position, new_position = position(current), position(new)
    if old_position is not None and new_position is not None and new_position < old_position:
        return f"would move backwards (position {list(old_position)} -> {list(new_position)})"
    return None


def behind_daemon(checkpoint: DebeziumOffset, daemon: DebeziumOffset) -> list[tuple[Entry, dict[str, Any] | None]]:
    """The daemon's entries that ``checkpoint`` is behind, each with the checkpoint's offset for that
    partition: where committing the checkpoint would move the connector backwards (the order of
    ``debezium_backwards_reason``, as ``spark-handoff`` decides it), or where the checkpoint has no
    offset for a partition the daemon has (the engine would start that partition from scratch).
    Equal or ahead, or offsets this module cannot order: not listed. The two sides are alike, so
    ``behind_daemon(daemon, checkpoint)`` lists the checkpoint's entries the daemon is behind on or
    lacks (a rewind or reset since), each with the daemon's offset."""
    mine = {_text(partition): offset for partition, offset in checkpoint.entries}
    behind: list[tuple[Entry, dict[str, Any] | None]] = []
    for partition, offset in daemon.entries:
        own = mine.get(_text(partition))
        if own is None or debezium_backwards_reason(offset, own) not in (None, "unchanged"):
            behind.append(((partition, offset), own))
    return behind
