"""Which source records a transfer carries: by connector, live only, and what to do with keys
Connect ignores or values Connect cannot read back (refuse, skip, keep), or keys wrapped in a schema
envelope (report, or unwrap).

Refusing is the default because a record Connect ignores usually means the source is not what the
operator thinks it is, and a value its reader cannot parse (a flipped byte, a non-object, a value
beyond Jackson's limits; ``emulator.codec.readable``) would replace a good offset with none at all.
Refusing before anything is written leaves the destination untouched; a dry run refuses the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from emulator.codec.readable import ValueProblem, value_problem
from emulator.formats import cdc_state
from emulator.formats.model import KeyIndex, Loaded, RawRecord, latest_per_key
from emulator.transfer.errors import TransferError
from emulator.transfer.options import TransferOptions


@dataclass(slots=True)
class Selection:
    records: list[RawRecord]
    notes: list[str] = field(default_factory=list)
    unreadable_keys: set[bytes] = field(default_factory=set)
    """Keys whose last selected record has a value Connect cannot read back (``--malformed keep``)."""


def select(loaded: Loaded, options: TransferOptions, keys: KeyIndex, source: str = "the source") -> Selection:
    """The records to offer the destination, in source order; ``TransferError`` when refused."""
    notes: list[str] = []
    selected: list[RawRecord] = []
    malformed: list[RawRecord] = []
    unreadable: list[tuple[int, RawRecord, ValueProblem]] = []
    enveloped = reencoded = 0
    for number, record in enumerate(loaded.records, start=1):
        if options.live_only and record.value is None:
            continue
        name = keys.connector(record.key)
        if name is None and (unwrapped := cdc_state.connect_key(record.key)) is not None:
            enveloped += 1
            if options.unwrap_envelopes:
                key, exact = unwrapped
                reencoded += not exact
                record = RawRecord(key, record.value, record.kafka_partition, record.log_offset, record.timestamp_ms)
                name = keys.connector(key)
        if name is None:
            if options.connectors:
                continue
            malformed.append(record)
            if options.malformed == "skip":
                continue
        elif options.connectors and name not in options.connectors:
            continue
        # A record whose key Connect ignores is never read, whatever its value: only its key matters.
        problem = None if name is None else value_problem(record.value)
        if problem is not None:
            unreadable.append((number, record, problem))
            if options.malformed == "skip":
                continue
        selected.append(record)
    if unreadable:
        notes.extend(_unreadable_values(unreadable, len(loaded.records), options, source))
    if malformed:
        first = malformed[0].key[:200].decode("utf-8", "backslashreplace")
        if options.malformed == "refuse":
            raise TransferError(
                f'{len(malformed)} record(s) have keys Connect ignores (not ["<connector>",{{…}}]; first: {first}); '
                "nothing was written. Use --malformed skip to leave them out or --malformed keep to copy them as-is"
            )
        verb = "left out" if options.malformed == "skip" else "copied as-is"
        notes.append(f"{len(malformed)} record(s) with keys Connect ignores {verb} (first: {first})")
    if enveloped and options.unwrap_envelopes:
        notes.append(
            f"{enveloped} schema-envelope key(s) (Flink CDC / Debezium 1.x, schemas.enable=true) unwrapped into "
            f"Connect keys ({enveloped - reencoded} byte-exact payloads, {reencoded} re-encoded)"
        )
    elif enveloped:
        notes.append(
            f"{enveloped} key(s) have a schema envelope (Flink CDC / Debezium 1.x, schemas.enable=true), which Connect "
            "never matches; --unwrap-envelopes turns them into Connect keys"
        )
    unreadable_keys: set[bytes] = set()
    if unreadable and options.malformed == "keep":
        unreadable_keys = {k for k, r in latest_per_key(selected).items() if value_problem(r.value) is not None}
    return Selection(selected, notes, unreadable_keys)


def describe_record(record: RawRecord, number: int, total: int) -> str:
    """Which record: its place in the source, its key, and where it sits (log coordinates or file offset)."""
    shown = record.key[:120].decode("utf-8", "backslashreplace") + ("…" if len(record.key) > 120 else "")
    where = f"record {number} of {total}, key {shown}"
    if record.kafka_partition is not None and record.log_offset is not None:
        where += f", Kafka partition {record.kafka_partition} offset {record.log_offset}"
    if record.value_at is not None:
        where += f", value at byte offset {record.value_at} of the file"
    return where


def _unreadable_values(
    found: list[tuple[int, RawRecord, ValueProblem]], total: int, options: TransferOptions, source: str
) -> list[str]:
    """Refuse (the default), or the note saying what ``skip``/``keep`` did with such values."""
    number, record, problem = found[0]
    first = f"{describe_record(record, number, total)}: {problem.describe(record.value_at)}"
    if options.malformed == "refuse":
        raise TransferError(
            f"{len(found)} record(s) of {source} have values Connect cannot read back (first: {first}); a task "
            "would get no offset for them. Nothing was written. Use --malformed skip to leave them out (the "
            "destination keeps its value for those keys) or --malformed keep to copy them as-is"
        )
    verb = "left out" if options.malformed == "skip" else "copied as-is"
    return [f"{len(found)} record(s) with values Connect cannot read back {verb} (first: {first})"]


def prune(incoming: list[RawRecord], current: list[RawRecord], connectors: set[str], keys: KeyIndex) -> list[RawRecord]:
    """Tombstones for live destination records of ``connectors`` that the incoming set lacks."""
    present = {r.key for r in incoming}
    return [
        RawRecord(r.key, None)
        for r in current
        if r.value is not None and r.key not in present and keys.connector(r.key) in connectors
    ]
