"""Which source records a transfer carries: by connector, live only, and what to do with keys
Connect ignores (refuse, skip, keep) or wraps in a schema envelope (report, or unwrap).

Refusing is the default because a record Connect ignores usually means the source is not what the
operator thinks it is; refusing before anything is written leaves the destination untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from emulator.formats import cdc_state
from emulator.formats.model import KeyIndex, Loaded, RawRecord
from emulator.transfer.errors import TransferError
from emulator.transfer.options import TransferOptions


@dataclass(slots=True)
class Selection:
    records: list[RawRecord]
    notes: list[str] = field(default_factory=list)


def select(loaded: Loaded, options: TransferOptions, keys: KeyIndex) -> Selection:
    """The records to offer the destination, in source order; ``TransferError`` when refused."""
    notes: list[str] = []
    selected: list[RawRecord] = []
    malformed: list[RawRecord] = []
    enveloped = reencoded = 0
    for record in loaded.records:
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
        selected.append(record)
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
    return Selection(selected, notes)


def prune(incoming: list[RawRecord], current: list[RawRecord], connectors: set[str], keys: KeyIndex) -> list[RawRecord]:
    """Tombstones for live destination records of ``connectors`` that the incoming set lacks."""
    present = {r.key for r in incoming}
    return [
        RawRecord(r.key, None)
        for r in current
        if r.value is not None and r.key not in present and keys.connector(r.key) in connectors
    ]
