"""The materialized view of the offsets log: raw key bytes → latest value, plus a logical index.

Bytes are the truth: lookups by a Connect task are by exact key bytes, so the store is keyed by
raw bytes exactly as ``KafkaOffsetBackingStore.data`` is. Listing needs the logical view
(connector → partition maps), kept separately as Connect's ``connectorPartitions`` is, with one
deliberate refinement: several byte-different keys can denote the same logical partition (other
whitespace, key order or number formatting), and we remember every live one, so that an alter or
reset reaches the bytes the task really uses instead of only Connect's re-serialized HashMap order.

Memory follows live keys and stays small (benchmarks/RESULTS.md, rounds 7-8): records live in one
``RecordArena`` (``emulator.view.record_arena``: key bytes and one packed slot, ``emulator.view.slots``,
per record, found through tables of 32-bit cells), not in Python objects. Parsed partitions are not
kept: a key is parsed when it first appears, when it is deleted, and when its connector is listed —
a rewrite of a live key (most records of a restore) reads its owner from the slot and parses nothing.

Several byte-different keys of one logical partition (aliases) are found through a 30-bit hash of
the logical id (``bucket_of``); keys whose logical ids collide share it, and readers re-parse them
and compare logical ids, so a collision costs a parse, never a wrong answer.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.codec.key_forms import KeyForm, key_form, shown_variant
from emulator.codec.keys import KeyProblem, ParsedKey, logical_id, parse_key, problem_message
from emulator.codec.readable import Refused, UnreadableOffset, looked_up, offset_as_read
from emulator.codec.values import loads_lenient
from emulator.model.records import LogRecord
from emulator.view import slots
from emulator.view.record_arena import ABSENT, Member, Members, RecordArena

log = logging.getLogger(__name__)

_BUCKET_MASK = (1 << 30) - 1

FAILED_RECORD = "failed-record"
"""The ``skipped_keys`` reason of a record the view failed on (``OffsetView._skip_failed``): not one of
Connect's (``KeyProblem``), as Connect's reader takes the record; counted where they are, so that
``/status`` and ``connect_offsets_records_skipped_total`` show it."""


def bucket_of(logical_id: str) -> int:
    """The 30-bit hash of a logical partition id (``emulator.codec.keys.logical_id``) in this process.

    ``hash`` of a str is salted per process: fine for an index that lives only in memory, and it
    keeps another process from choosing keys that all collide."""
    return hash(logical_id) & _BUCKET_MASK


@dataclass(frozen=True, slots=True)
class Entry:
    """The latest live value of one raw key, with where and when it was written (built on read)."""

    value: bytes
    partition: int
    offset: int
    timestamp_ms: int

    @classmethod
    def of(cls, slot: bytes) -> Entry:
        offset, timestamp_ms, partition, _, _ = slots.head(slot)
        return cls(slots.value_of(slot), partition, offset, timestamp_ms)


@dataclass(frozen=True, slots=True)
class OffsetRow:
    """One row of a connector's offsets as the API lists it."""

    partition: dict[str, Any]
    offset: Any
    keys: tuple[bytes, ...]
    slot: bytes
    listed: bool = True
    """Whether Connect's GET lists the partition (``looked_up``: one holding a map or a list it
    leaves out), judged once where the row is built, for ``OffsetView.listing``."""

    @property
    def entry(self) -> Entry:
        """The newest key's record (built on demand: listings rarely need it)."""
        return Entry.of(self.slot)


@dataclass(slots=True)
class ViewStats:
    records_applied: int = 0
    tombstones_applied: int = 0
    empty_values: int = 0
    skipped_keys: Counter[str] = field(default_factory=Counter)
    unparseable_values: int = 0
    keys_in_two_partitions: int = 0
    """Records whose key the view last had from another Kafka partition (see ``_note_other_partition``)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "records_applied": self.records_applied,
            "tombstones_applied": self.tombstones_applied,
            "empty_values_applied": self.empty_values,
            "skipped_keys": dict(self.skipped_keys),
            "skipped_keys_total": sum(self.skipped_keys.values()),
            "unparseable_values": self.unparseable_values,
            "keys_in_two_partitions": self.keys_in_two_partitions,
        }


class OffsetView:
    """Applied from the log's reader thread, read from API threads; one lock guards it all."""

    _WARN_EVERY = 1000

    def __init__(self, source: str | None = None) -> None:
        self.source = source
        """Which log this view reads (its description, naming the topic), opening its log lines."""
        self._lock = threading.Lock()
        self._records = RecordArena()
        """Raw key → its slot (``emulator.view.slots``); per connector id (a group), its live keys
        by logical partition."""
        self._names: list[str] = []
        """Connector names in order of appearance; a slot's owner is an index into this list."""
        self._ids: dict[str, int] = {}
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
        """Apply records in log order (last write wins; a ``None`` value deletes).

        A record the view fails on is skipped alone (``_skip_failed``), never the batch: the reader
        would retry the batch and then drop all of it, the good records around the bad one too,
        which Connect's reader keeps.
        """
        with self._lock:
            for record in records:
                try:
                    self._apply_one(record)
                except Exception as exc:
                    self._skip_failed(record, exc)
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

    def _is_older(self, record: LogRecord, current: slots.Head | None) -> bool:
        """Has this key already been applied from a later offset of the same partition?

        Only write-through can cause it (the reader delivers each partition in order); keys live in
        one partition (murmur2), so per-partition order is the order Connect's reader sees.
        """
        if current is not None and current.partition == record.partition and current.offset > record.offset:
            return True
        key: bytes = record.key  # type: ignore[assignment]  # callers pass keyed records only
        ghost = self._deleted_ahead.get(key)
        if ghost is not None and ghost[0] == record.partition:
            if ghost[1] > record.offset:
                return True
            del self._deleted_ahead[key]  # the reader has reached that tombstone
        return False

    def _apply_one(self, record: LogRecord, own: bool = False) -> None:
        key = record.key
        stats = self.stats
        records = self._records
        if own:
            self._written_through = True
        else:
            stats.records_applied += 1
        position = records.locate(key)
        current = None if position == ABSENT else records.read_slot(position, slots.head)
        parsed: ParsedKey | None = None
        if current is not None:
            problem = slots.owner_problem(current.owner)
        else:
            classified = parse_key(key)
            problem = classified if isinstance(classified, KeyProblem) else None
            parsed = None if problem is not None else classified  # type: ignore[assignment]
        value = record.value
        if not own:
            # Counted for every record the reader delivers, before the write-through guard below may
            # skip it: a tombstone older than this daemon's own newer write of the key (another
            # daemon's DELETE between two of our PATCHes) is still a tombstone in the log, and
            # ``records_applied`` counted it. Counted after the guard, the tombstones fell behind the
            # log on a daemon that writes (QA D4: 263 of 424), while a restarted one counted them all.
            if problem is not None:
                self._count_skip(problem, key)
            if value is None:
                stats.tombstones_applied += 1
            elif not value:
                stats.empty_values += 1
            if current is not None and current.partition != record.partition:
                self._note_other_partition(key, current.partition, record.partition, value is None)
        if key is not None and self._written_through and self._is_older(record, current):
            return
        if value is None:
            if key is not None and own:
                self._deleted_ahead[key] = (record.partition, record.offset)
            if current is not None:
                records.delete_at(position)
                if problem is None:
                    self._bump(self._names[current.owner])
            elif parsed is not None:
                # A tombstone for a connector never seen live still makes the name known, as in
                # Connect's connectorPartitions (the outer map never shrinks).
                self._connector_id(parsed.connector)
                self._bump(parsed.connector)
            return
        if current is not None:
            if current.partition == record.partition and current.offset == record.offset:
                return  # the reader delivering a record already applied by write-through
            owner = current.owner
            flags = current.flags & slots.KEY_FLAGS
            new_slot = slots.pack(value, record.partition, record.offset, record.timestamp_ms, owner, flags)
            records.rewrite_at(position, new_slot)
            if problem is None:
                self._bump(self._names[owner])
        elif parsed is None:
            owner = slots.problem_owner(problem)  # type: ignore[arg-type]  # unparsed keys have a problem
            records.insert(key, slots.pack(value, record.partition, record.offset, record.timestamp_ms, owner), None, 0)
        else:
            owner = self._connector_id(parsed.connector)
            self._bump(parsed.connector)
            new_slot = slots.pack(value, record.partition, record.offset, record.timestamp_ms, owner)
            records.insert(key, new_slot, owner, bucket_of(logical_id(parsed.partition)))

    def _note_other_partition(self, key: bytes | None, before: int, now: int, tombstone: bool) -> None:
        """One key in two Kafka partitions: a producer that placed it without murmur2 (librdkafka's
        default partitioner), or a topic whose partition count changed. Connect's reader has no order
        across partitions, so which record wins differs from one reader (one restart) to the next, and
        a tombstone removes the key from one partition only: a DELETE answered 200 can come back after
        a restart. Cheap to see here (the key's current record is at hand), so counted and logged."""
        self.stats.keys_in_two_partitions += 1
        count = self.stats.keys_in_two_partitions
        if count == 1 or count % self._WARN_EVERY == 0:
            shown = (key or b"")[:200].decode("utf-8", "backslashreplace")
            what = "a tombstone" if tombstone else "a record"
            log.warning(
                "key %s: %s in Kafka partition %d while its last record was in partition %d; a key in two "
                "partitions has no defined winner for Connect's reader, and a deletion may not last a restart "
                "(docs/protocol.md, §3) (%d such record(s) so far)",
                shown,
                what,
                now,
                before,
                count,
            )

    def _count_skip(self, problem: KeyProblem, key: bytes | None) -> None:
        count = self.stats.skipped_keys[problem.value] + 1
        self.stats.skipped_keys[problem.value] = count
        if problem is not KeyProblem.PARTITION_NULL and (count == 1 or count % self._WARN_EVERY == 0):
            # Counted per reason (the first of each and every 1,000th are logged) and in all, per log:
            # a connector's own offsets topic (KIP-618) has a view of its own, so the line names it.
            log.warning(
                "%s%s (%d such record(s) so far, %d skipped key(s) in all)",
                "" if self.source is None else f"{self.source}: ",
                problem_message(problem, key),
                count,
                sum(self.stats.skipped_keys.values()),
            )

    def _skip_failed(self, record: LogRecord, exc: Exception) -> None:
        """Count and log a record ``_apply_one`` raised on, as a skipped key of reason
        ``FAILED_RECORD`` (``records_applied`` counted it already, as it counts every skipped key).

        Every key Connect's reader takes, this view takes too (the codec reads and identifies keys
        to Jackson's limits, without recursion), so this is a defect of the daemon's: logged with
        the record's exact position, and the first and every 1,000th with its traceback."""
        count = self.stats.skipped_keys[FAILED_RECORD] + 1
        self.stats.skipped_keys[FAILED_RECORD] = count
        shown = (record.key or b"")[:200].decode("utf-8", "backslashreplace")
        log.error(
            "%srecord at partition %d offset %d (key %s) could not be applied and is skipped; the records "
            "around it are applied: %r (%d such record(s) so far)",
            "" if self.source is None else f"{self.source}: ",
            record.partition,
            record.offset,
            shown,
            exc,
            count,
            exc_info=count == 1 or count % self._WARN_EVERY == 0,
        )

    def _connector_id(self, name: str) -> int:
        found = self._ids.get(name)
        if found is not None:
            return found
        if len(self._names) >= slots.MAX_CONNECTORS:
            raise OverflowError(f"more than {slots.MAX_CONNECTORS} connector names")
        new = self._ids[name] = len(self._names)
        self._names.append(name)
        self._records.add_group()
        self._names_version += 1
        return new

    def _bump(self, connector: str) -> None:
        self._versions[connector] = self._versions.get(connector, 0) + 1

    # -- reading --------------------------------------------------------------------------
    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self._ids)

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
            return connector in self._ids

    def live_keys(self) -> int:
        with self._lock:
            return len(self._records)

    def get_raw(self, key: bytes | None) -> Entry | None:
        with self._lock:
            slot = self._records.get(key)
        return None if slot is None else Entry.of(slot)

    def raw_entries(self) -> list[tuple[bytes | None, Entry]]:
        """Every live raw key with its entry, keys Connect ignores included: a byte-exact export
        must carry what the log holds, not only what Connect lists."""
        with self._lock:
            items = self._records.items()
        return [(key, Entry.of(slot)) for key, slot in items]

    def find(self, connector: str, partition_lid: str) -> tuple[bytes, ...]:
        """The live raw keys denoting that logical partition (oldest first), or ``()``."""
        with self._lock:
            owner = self._ids.get(connector)
            if owner is None:
                return ()
            members = self._records.members_with(owner, bucket_of(partition_lid))
        return tuple(m.key for m in members if logical_id(_indexed(m.key).partition) == partition_lid)

    def offsets(self, connector: str) -> list[OffsetRow]:
        """Every live partition of a connector with its latest offset (from the newest key)."""
        with self._lock:
            owner = self._ids.get(connector)
            if owner is None:
                return []
            members = self._records.members(owner)
        logicals = members.logicals
        if len(set(logicals)) == len(logicals):  # no aliases and no collisions (the common case)
            return [self._row_of_one(key, slot) for key, slot in zip(members.keys, members.slots, strict=True)]
        buckets: dict[int, list[Member]] = {}
        for member in zip(members.keys, members.slots, logicals, members.sequences, strict=True):
            buckets.setdefault(member[2], []).append(Member._make(member))
        result = []
        for bucket in buckets.values():
            if len(bucket) == 1:
                result.append(self._row_of_one(bucket[0].key, bucket[0].slot))
            else:
                result.extend(self._rows_of_crowded(bucket))
        return result

    def listing(self, connector: str) -> list[OffsetRow]:
        """The rows Connect's GET lists: ``offsets`` less the partitions its reader refuses to look up
        (``looked_up``: a partition holding a map or a list), which Connect's GET leaves out. Kept out
        here too, not listed with ``null`` as an unreadable value is: such a partition may nest as deep
        as Jackson reads (1,000 levels), and inside an answer it would nest deeper than any JSON reader
        with Jackson's limits, or Python's ``json``, reads back. ``offsets`` still has them, so a reset
        deletes them."""
        return [row for row in self.offsets(connector) if row.listed]

    def partition_count(self, connector: str) -> int:
        """``len(offsets(connector))`` without parsing a key or value where no two keys share a bucket:
        the console's connectors page counts every connector's partitions on each refresh."""
        with self._lock:
            owner = self._ids.get(connector)
            if owner is None:
                return 0
            members = self._records.members(owner)
        return _partitions_of(members)

    def extent(self, connector: str) -> tuple[int, int]:
        """The connector's live keys (at least its partitions: aliases of one partition are keys of
        their own) and the bytes of those keys and their slots: what reading its offsets back costs
        grows with both (one partition may hold a map of 100,000 keys). Kept by the arena with every
        change, so deciding whether a listing leaves the event loop reads none of it (counting them
        here took ~30 ms of the loop for 10,000 partitions: benchmarks/RESULTS.md round 32)."""
        with self._lock:
            owner = self._ids.get(connector)
            if owner is None:
                return 0, 0
            return self._records.extent(owner)

    def _row_of_one(self, key: bytes, slot: bytes) -> OffsetRow:
        """The row of a key alone in its bucket (an indexed key is a valid ``[name, {partition}]``:
        its partition is item 1). Bytes no converter writes are listed, as Connect lists them, with
        the ``null`` Connect's GET and every task read for them (``emulator.codec.key_forms``)."""
        form, slot = self._form(key, slot)
        partition = loads_lenient(key)[1]
        if form is KeyForm.FOREIGN:
            return OffsetRow(partition, None, (key,), slot, looked_up(partition))
        offset, listed = self._offset_of(key, partition, slot)
        return OffsetRow(partition, offset, (key,), slot, listed)

    def _rows_of_crowded(self, bucket: list[Member]) -> list[OffsetRow]:
        """Rows of a bucket holding several keys: grouped by logical partition, oldest key first; the
        value shown is the one ``shown_variant`` picks (Connect's own form first), the same whatever
        order the keys arrived in."""
        groups: dict[str, list[tuple[Member, ParsedKey]]] = {}
        for member in sorted(bucket, key=lambda m: m.sequence):
            parsed = _indexed(member.key)
            groups.setdefault(logical_id(parsed.partition), []).append((member, parsed))
        rows = []
        for group in groups.values():
            keys = tuple(member.key for member, _ in group)
            judged = [self._form(member.key, member.slot) for member, _ in group]
            listed = looked_up(group[0][1].partition)
            chosen = shown_variant([form for form, _ in judged]) if listed else None
            if chosen is None:
                _, parsed = group[-1]
                rows.append(OffsetRow(parsed.partition, None, keys, judged[-1][1], listed))
            else:
                (shown, parsed), slot = group[chosen], judged[chosen][1]
                offset, _ = self._offset_of(shown.key, parsed.partition, slot)
                rows.append(OffsetRow(parsed.partition, offset, keys, slot))
        return rows

    def _form(self, key: bytes, slot: bytes) -> tuple[KeyForm, bytes]:
        """The key's form and its slot: the form is found on the key's first read and kept in the
        slot's flags (a rewrite of the key carries them), so a listing judges each key once. The slot
        returned holds the flags, as the view now does (``_offset_of`` compares it with the view's)."""
        flags = slot[slots.FLAGS_AT]
        form = slots.form_in(flags)
        if form is not None:
            return form, slot
        form = key_form(key)
        marked = slots.with_flags(slot, slots.with_form(flags, form))
        with self._lock:
            position = self._records.locate(key)
            if position != ABSENT and self._records.slot_at(position) == slot:
                self._records.rewrite_at(position, marked, newest=False)
                return form, marked
        return form, slot

    def _offset_of(self, key: bytes, partition: dict[str, Any], slot: bytes) -> tuple[Any, bool]:
        """The offset Connect's reader gives (``offset_as_read``: the one rule GET, ``?as_of=`` and the
        console share), and whether it looks the partition up at all (``OffsetRow.listed``, known here
        without judging the partition a second time); where it gives none (a value that does not parse
        or that ``validateFormat`` refuses, a partition holding a nested map or list) the row shows
        ``null``, and the record is counted and logged once, as Connect logs ``CRITICAL`` and leaves
        the partition out."""
        try:
            return offset_as_read(partition, slots.value_of(slot)), True
        except UnreadableOffset as exc:
            with self._lock:
                head = slots.head(slot)
                position = self._records.locate(key)
                live = position != ABSENT and self._records.slot_at(position) == slot
                if live and not head.flags & slots.FLAG_UNPARSEABLE_COUNTED:
                    marked = slots.with_flags(slot, head.flags | slots.FLAG_UNPARSEABLE_COUNTED)
                    self._records.rewrite_at(position, marked, newest=False)
                    self.stats.unparseable_values += 1
                    log.error(
                        "CRITICAL: %s for key %r (partition %d, offset %d): %s",
                        exc.refused.value,
                        key,
                        head.partition,
                        head.offset,
                        exc.reason,
                    )
            return None, exc.refused is not Refused.PARTITION


def _indexed(key: bytes) -> ParsedKey:
    """Parse a key the view has indexed: it classified as valid when it first appeared, and the
    same bytes always classify the same."""
    parsed = parse_key(key)
    assert isinstance(parsed, ParsedKey)
    return parsed


def _partitions_of(members: Members) -> int:
    """How many logical partitions ``members`` denote (keys of one bucket may alias one partition)."""
    logicals = members.logicals
    if len(set(logicals)) == len(logicals):
        return len(logicals)
    buckets: dict[int, list[bytes]] = {}
    for key, bucket in zip(members.keys, logicals, strict=True):
        buckets.setdefault(bucket, []).append(key)
    return sum(
        1 if len(keys) == 1 else len({logical_id(_indexed(key).partition) for key in keys}) for keys in buckets.values()
    )
