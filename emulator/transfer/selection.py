"""Which source records a transfer carries: by connector, live only, and what to do with keys
Connect ignores or values Connect cannot read back (refuse, skip, keep), or keys wrapped in a schema
envelope (report, or unwrap).

Refusing is the default because a record Connect ignores usually means the source is not what the
operator thinks it is, and a value its reader cannot parse (a flipped byte, a non-object, a value
beyond Jackson's limits; ``emulator.codec.readable``) would replace a good offset with none at all.
Refusing before anything is written leaves the destination untouched; a dry run refuses the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from emulator.codec.readable import ValueProblem, value_problem
from emulator.formats import cdc_state
from emulator.formats.model import KeyIndex, Loaded, RawRecord, tick
from emulator.transfer.errors import TransferError
from emulator.transfer.options import TransferContext, TransferOptions
from emulator.transfer.progress import Progress


@dataclass(slots=True)
class Selection:
    records: list[RawRecord]
    notes: list[str] = field(default_factory=list)
    unreadable_keys: set[bytes] = field(default_factory=set)
    """Keys whose last selected record has a value Connect cannot read back (``--malformed keep``)."""


def select(
    loaded: Loaded,
    options: TransferOptions,
    keys: KeyIndex,
    source: str = "the source",
    progress: Progress | None = None,
) -> Selection:
    """The records to offer the destination, in source order; ``TransferError`` when refused.
    ``progress`` hears how far the selection and the value checks got (a long source)."""
    progress = progress or Progress(enabled=False)
    total = len(loaded.records)
    notes: list[str] = []
    selected: list[tuple[int, RawRecord]] = []
    malformed: list[RawRecord] = []
    enveloped = reencoded = 0
    # Per Connect key an envelope was unwrapped into: the last selected record of each envelope spelling.
    unwrapped_from: dict[bytes, dict[bytes, tuple[int, bytes | None]]] = {}
    named_seen: set[str] = set()
    selecting = progress.ticker(f"selecting from {source}")
    for number, record in enumerate(loaded.records, start=1):
        tick(selecting, number, total)
        if options.live_only and record.value is None:
            continue
        name = keys.connector(record.key)
        spelling = None
        if name is None and (unwrapped := cdc_state.connect_key(record.key)) is not None:
            enveloped += 1
            if options.unwrap_envelopes:
                key, exact = unwrapped
                reencoded += not exact
                spelling = record.key
                record = RawRecord(
                    key, record.value, record.kafka_partition, record.log_offset, record.timestamp_ms, record.value_at
                )
                name = keys.connector(key)
        if name is None:
            if options.connectors:
                continue
            malformed.append(record)
            if options.malformed == "skip":
                continue
        elif options.connectors:
            if name not in options.connectors:
                continue
            named_seen.add(name)
        selected.append((number, record))
        if spelling is not None:
            unwrapped_from.setdefault(record.key, {})[spelling] = (number, record.value)
    notes.extend(
        f"{source} has no record of {name!r} (--connector)"
        for name in _unnamed(options.connectors, named_seen, source, refuse=not options.prune)
    )
    if unwrapped_from:
        notes.extend(_collisions(unwrapped_from, selected, total, source))
    records, unreadable_keys = _judge_values(selected, keys, options, notes, total, source, progress)
    if malformed:
        first = _shown(malformed[0].key)
        if options.malformed == "refuse":
            wrapped = "" if options.unwrap_envelopes else _envelope_hint(malformed)
            raise TransferError(
                f'{len(malformed)} record(s) have keys Connect ignores (not ["<connector>",{{…}}]; first: {first}); '
                "nothing was written. Use --malformed skip to leave them out or --malformed keep to copy them as-is"
                + wrapped
            )
        verb = "left out" if options.malformed == "skip" else "kept as-is (--malformed keep)"
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
    return Selection(records, notes, unreadable_keys)


def _shown(raw: bytes | None, limit: int = 200) -> str:
    """Key or value bytes for a message (``null`` for a tombstone's value)."""
    if raw is None:
        return "null"
    if not raw:
        return "(empty: 0 bytes)"
    return raw[:limit].decode("utf-8", "backslashreplace") + ("…" if len(raw) > limit else "")


def _envelope_hint(malformed: list[RawRecord]) -> str:
    """For a refusal of keys Connect ignores: how many of them wear a schema envelope, which
    ``--unwrap-envelopes`` turns into Connect keys."""
    wrapped = sum(1 for r in malformed if cdc_state.connect_key(r.key) is not None)
    if not wrapped:
        return ""
    return (
        f"; {wrapped} of them have a schema envelope (Flink CDC / Debezium 1.x, schemas.enable=true): "
        "--unwrap-envelopes turns those into Connect keys"
    )


_COLLISIONS_NAMED = 5


def _collisions(
    unwrapped_from: dict[bytes, dict[bytes, tuple[int, bytes | None]]],
    selected: list[tuple[int, RawRecord]],
    total: int,
    source: str,
) -> list[str]:
    """Notes for Connect keys that two records of different spellings (an envelope and the plain
    key, or two envelopes) both become, with different values. A destination keeps the later one in
    the source's order, as a log's compaction keeps the last record per key: say which, and what
    the other held, so that a stale offset does not replace a newer one unseen."""
    unwrapped = {n for origins in unwrapped_from.values() for n, _ in origins.values()}
    for number, record in selected:  # the plain spelling's last record, where there is one
        if number not in unwrapped and (origins := unwrapped_from.get(record.key)) is not None:
            origins[record.key] = (number, record.value)
    found: list[str] = []
    for key, origins in unwrapped_from.items():
        if len(origins) < 2 or len({value for _, value in origins.values()}) < 2:
            continue
        spellings = sorted(origins.items(), key=lambda item: item[1][0])
        kept_key, (kept_number, kept_value) = spellings[-1]
        others = "; ".join(f"record {n} of {total}, key {_shown(k)}, value {_shown(v)}" for k, (n, v) in spellings[:-1])
        found.append(
            f"key {_shown(key)} is given twice with different values once schema envelopes are unwrapped ({others}; "
            f"record {kept_number} of {total}, key {_shown(kept_key)}, value {_shown(kept_value)}): the later one in "
            f"{source}'s order, value {_shown(kept_value)}, was kept, as a log's compaction keeps the last record "
            "of a key"
        )
    if len(found) > _COLLISIONS_NAMED:
        rest = len(found) - _COLLISIONS_NAMED
        found = [*found[:_COLLISIONS_NAMED], f"{rest} more key(s) given twice with different values once unwrapped"]
    return found


def _judge_values(
    selected: list[tuple[int, RawRecord]],
    keys: KeyIndex,
    options: TransferOptions,
    notes: list[str],
    total: int,
    source: str,
    progress: Progress,
) -> tuple[list[RawRecord], set[bytes]]:
    """The selected records after the value rule, and the keys whose unreadable value is kept.

    Only the last record per key is judged: it is the one a destination ends up holding (an older,
    superseded value is never written). A record whose key Connect ignores is never read, whatever
    its value, so only its key matters. ``skip`` leaves out every record of a key whose value is
    unreadable, so the destination keeps what it had for that key.
    """
    latest: dict[bytes, tuple[int, RawRecord]] = {}
    for number, record in selected:
        latest[record.key] = (number, record)
    found: list[tuple[int, RawRecord, ValueProblem]] = []
    checking = progress.ticker(f"checking the values of {source}")
    for checked, (number, record) in enumerate(latest.values(), start=1):
        tick(checking, checked, len(latest))
        if keys.connector(record.key) is not None and (problem := value_problem(record.value)) is not None:
            found.append((number, record, problem))
    records = [record for _, record in selected]
    if not found:
        return records, set()
    found.sort(key=lambda item: item[0])
    notes.extend(_unreadable_values(found, total, options, source))
    unreadable_keys = {record.key for _, record, _ in found}
    if options.malformed == "skip":
        return [r for r in records if r.key not in unreadable_keys], set()
    return records, unreadable_keys


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
    verb = "left out" if options.malformed == "skip" else "kept as-is (--malformed keep)"
    return [f"{len(found)} record(s) with values Connect cannot read back {verb} (first: {first})"]


def prune(incoming: list[RawRecord], current: list[RawRecord], connectors: set[str], keys: KeyIndex) -> list[RawRecord]:
    """Tombstones for live destination records of ``connectors`` that the incoming set lacks."""
    present = {r.key for r in incoming}
    return [
        RawRecord(r.key, None)
        for r in current
        if r.value is not None and r.key not in present and keys.connector(r.key) in connectors
    ]


def with_tombstones(incoming: list[RawRecord], current: Iterable[RawRecord], ctx: TransferContext) -> list[RawRecord]:
    """``incoming`` plus ``--prune``'s tombstones (``prune``) against ``current``, what a destination
    read to plan the transfer (unchanged without ``--prune``); ``ctx.pruned`` says how many."""
    if ctx.prune is None:
        return incoming
    tombstones = prune(incoming, list(current), ctx.prune, ctx.keys)
    ctx.pruned = len(tombstones)
    return incoming + tombstones


class NoRecordOf(TransferError):
    """None of the ``--connector`` names is in the source (``names``): the pipeline adds a hint when
    the destination holds them, since a connector reset at the source looks just like a typo here."""

    def __init__(self, message: str, names: list[str]) -> None:
        super().__init__(message)
        self.names = names


def _unnamed(named: frozenset[str], seen: set[str], source: str, refuse: bool = True) -> list[str]:
    """The ``--connector`` names the source has no record of: a typo more often than not. None found
    at all is refused (the transfer would write an empty file over a backup); the caller notes the rest.
    With ``--prune`` a name the source lacks is how a reset is carried over (its records at the
    destination are deleted): the pipeline refuses only when the destination has none either."""
    missing = sorted(named - seen)
    if refuse and named and len(missing) == len(named):
        raise NoRecordOf(
            f"{source} has no record of {', '.join(repr(n) for n in missing)} (--connector); nothing was written",
            missing,
        )
    return missing
