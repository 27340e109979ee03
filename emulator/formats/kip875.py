"""KIP-875 offsets JSON (Connect's ``GET``/``PATCH /connectors/{name}/offsets`` body) ⇄ records.

The body is parsed JSON, not bytes, so it cannot carry a key's exact bytes: importing encodes each
partition map in the body's key order with Jackson's rules, which is what a task writes when its map
iterates in that order. Export says how many keys or values would not come back byte-identical, and
points at the byte-preserving formats (standalone, snapshot) for those.

File shape for ``kip875:`` locations: one body per connector, keyed by name::

    {"<connector>": {"offsets": [{"partition": {…}, "offset": {…}}, …]}, …}

so ``jq '."<connector>"'`` gives a body ``PATCH`` accepts. A file holding a single bare body
``{"offsets":[…]}`` is accepted when the connector name is given. A ``null`` offset is a deletion
(a tombstone), as in ``PATCH``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from emulator.codec.key_forms import KeyForm, key_form
from emulator.codec.keys import KeyProblem, encode_key, parse_key
from emulator.codec.strict_json import Duplicates, JsonLimitExceeded, TooDeepHere, loads_strict
from emulator.codec.surrogates import json_utf8
from emulator.codec.values import CodecError, InvalidOffsets, encode_offset, loads_lenient, validate_format
from emulator.formats.model import Encoded, FormatError, Loaded, RawRecord, Tick, duplicate_names_note, tick

__all__ = ["body_records", "dumps_file", "encode_file", "loads_file", "records_to_bodies"]


def body_records(
    connector: str,
    body: Any,
    where: str = "body",
    progress: Tick | None = None,
    duplicates: Duplicates | None = None,
) -> list[RawRecord]:
    """One connector's ``{"offsets":[…]}`` body as records, validated as Connect validates PATCH
    (``progress``, if given, is told every ``TICK_EVERY`` entries how many this body has done).

    ``duplicates``: the parse's repeated names. A field of the body's own shape given twice
    (``offsets``, ``partition``, ``offset``) is refused: a JSON reader keeps the later one, which
    drops a whole list of entries or changes which partition is meant without a word."""
    if not isinstance(body, dict):
        raise FormatError(f'{where} must be an object {{"offsets":[…]}}, got {type(body).__name__}')
    _refuse_repeated(where, body, duplicates)
    unknown = sorted(set(body) - {"offsets"})
    if unknown:
        raise FormatError(f"{where} has unknown field(s) {unknown}; expected only 'offsets'")
    offsets = body.get("offsets")
    if not isinstance(offsets, list):
        raise FormatError(f"{where}.offsets must be an array")
    records: list[RawRecord] = []
    for index, item in enumerate(offsets):
        tick(progress, index, None)
        at = f"{where}.offsets[{index}]"
        if not isinstance(item, dict):
            raise FormatError(f"{at} must be an object with 'partition' and 'offset'")
        _refuse_repeated(at, item, duplicates)
        extra = sorted(set(item) - {"partition", "offset"})
        if extra:
            raise FormatError(f"{at} has unknown field(s) {extra}; expected 'partition' and 'offset'")
        partition = item.get("partition")
        offset = item.get("offset")
        if not isinstance(partition, dict):
            raise FormatError(f"{at}.partition must be a JSON object")
        if offset is not None and not isinstance(offset, dict):
            raise FormatError(f"{at}.offset must be a JSON object or null")
        try:
            validate_format(partition)
            validate_format(offset)
        except InvalidOffsets as exc:
            raise FormatError(f"{at}: {exc} (Connect's OffsetUtils.validateFormat)") from exc
        records.append(RawRecord(encode_key(connector, partition), encode_offset(offset)))
    return records


def _refuse_repeated(where: str, value: dict[str, Any], duplicates: Duplicates | None) -> None:
    twice = duplicates.in_object(value) if duplicates is not None else []
    if twice:
        raise FormatError(
            f"{where} names {json.dumps(twice[0], ensure_ascii=False)} twice; a JSON reader would keep only the "
            "later one (dropping the other's content): write it once"
        )


def loads_file(
    data: bytes, default_connector: str | None = None, source: str | None = None, progress: Tick | None = None
) -> Loaded:
    """A ``kip875:`` file's records, body by body (``progress``: told how many entries were read, of
    how many, every ``TICK_EVERY``)."""
    duplicates = Duplicates()
    try:
        document = loads_strict(data, duplicates)
    except JsonLimitExceeded as exc:
        raise FormatError(f"beyond what Connect's JSON reader (Jackson) accepts: {exc}", source=source) from exc
    except TooDeepHere as exc:
        raise FormatError(str(exc), source=source) from exc
    except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
        raise FormatError(f"not valid JSON: {exc}", source=source) from exc
    try:
        if isinstance(document, dict) and isinstance(document.get("offsets"), list) and len(document) == 1:
            if default_connector is None:
                raise FormatError(
                    'a bare {"offsets":[…]} body names no connector; give the connector name (the CLI\'s --name '
                    'CONNECTOR), or write the file as {"<connector>": {"offsets": […]}}'
                )
            bare = body_records(
                default_connector, document, progress=_ticks(progress, 0, _entries(document)), duplicates=duplicates
            )
            return Loaded(bare, duplicate_names_note(duplicates.names))
        if not isinstance(document, dict):
            raise FormatError(f'expected {{"<connector>": {{"offsets": […]}}, …}}, got {type(document).__name__}')
        if duplicates.at_top:
            names = ", ".join(json.dumps(n, ensure_ascii=False) for n in dict.fromkeys(duplicates.at_top))
            raise FormatError(
                f"connector {names} has more than one body in this file (two exports joined by hand?); a JSON "
                "reader keeps only the last one, which would drop the others' offsets: merge them into one body"
            )
        records: list[RawRecord] = []
        total = sum(_entries(body) for body in document.values())
        for connector, body in document.items():
            where = json.dumps(connector, ensure_ascii=False)
            records.extend(body_records(connector, body, where, _ticks(progress, len(records), total), duplicates))
    except FormatError as exc:
        raise FormatError(exc.detail, source=source, where=exc.where) from None
    return Loaded(records, duplicate_names_note(duplicates.names))


def _entries(body: Any) -> int:
    """How many entries a body holds, for progress (0 for a body of the wrong shape: refused later)."""
    offsets = body.get("offsets") if isinstance(body, dict) else None
    return len(offsets) if isinstance(offsets, list) else 0


def _ticks(progress: Tick | None, before: int, total: int) -> Tick | None:
    """A body's progress as the file's: ``before`` entries of earlier bodies, of ``total``."""
    if progress is None:
        return None
    return lambda done, _of_body: progress(before + done, total)


Bodies = dict[str, dict[str, list[dict[str, Any]]]]


def records_to_bodies(records: Iterable[RawRecord]) -> tuple[Bodies, list[str]]:
    """Records as KIP-875 bodies per connector (in first-seen order), and notes on what was lost
    (``encode_file`` also answers which records the bodies hold)."""
    bodies, _, notes = _bodies(records, None)
    return bodies, notes


def _bodies(records: Iterable[RawRecord], progress: Tick | None) -> tuple[Bodies, list[RawRecord], list[str]]:
    """Records as KIP-875 bodies per connector (in first-seen order), the records they hold, and
    notes on what was lost.

    The records held are those ``loads_file`` reads back from the bodies, in its order: each key and
    value as importing the body writes it (Jackson's encoding of the parsed maps), not the bytes
    offered, so a diff against an existing file (read by ``loads_file``) compares like with like.
    Keys Connect ignores, partitions and values that are no flat offset map (the reader refuses
    them, as PATCH does), and values that read as null without being a tombstone (null in a body is
    a deletion) cannot be expressed: they are left out and counted; keys and values whose bytes
    differ from what importing the body would write are counted too.

    A value under a key in bytes no converter writes (``KeyForm.FOREIGN``) is left out too: no task
    reads it and no GET shows it (docs/api.md), so the file holds what GET shows, not a value that a
    PATCH of the file would make every task read for the first time. (Such a key's tombstone is kept:
    Connect's listing drops the partition at it, as a null offset in the file does.) So is an offset holding a
    number beyond a double's range: the file could carry it only as the string ``"Infinity"``, and a
    PATCH of the file would write that string where the task read a double; one such record must not
    abort the whole export.
    """
    bodies: Bodies = {}
    held: dict[str, list[RawRecord]] = {}  # per connector, so in the file's order (bodies grouped by connector)
    skipped = 0
    inexact = 0
    unreadable = 0
    bad_partitions = 0
    null_values = 0
    foreign = 0
    beyond_double = 0
    for number, record in enumerate(records, start=1):
        tick(progress, number, None)
        parsed = parse_key(record.key)
        if isinstance(parsed, KeyProblem):
            skipped += 1
            continue
        try:
            validate_format(parsed.partition)
        except InvalidOffsets:
            bad_partitions += 1
            continue
        offset: Any = None
        if record.value is not None:
            if key_form(record.key) is KeyForm.FOREIGN:  # a tombstone of it still drops the partition
                foreign += 1
                continue
            try:
                offset = loads_lenient(record.value)
                validate_format(offset)
            except (CodecError, InvalidOffsets):
                unreadable += 1
                continue
            if offset is None:
                null_values += 1
                continue
            if not all(map(_finite, offset.values())):
                beyond_double += 1
                continue
        key = encode_key(parsed.connector, parsed.partition)
        value = encode_offset(offset)
        if key != record.key or value != record.value:
            inexact += 1
        body = bodies.setdefault(parsed.connector, {"offsets": []})
        body["offsets"].append({"partition": parsed.partition, "offset": offset})
        held.setdefault(parsed.connector, []).append(RawRecord(key, value))
    notes: list[str] = []
    if skipped:
        notes.append(
            f"{skipped} record(s) with keys Connect ignores (not [name, {{…}}]) cannot be written as KIP-875 JSON "
            "and were left out"
        )
    if unreadable:
        notes.append(
            f"{unreadable} record(s) whose value is not an offset map Connect can read cannot be written as KIP-875 "
            "JSON and were left out"
        )
    if bad_partitions:
        notes.append(
            f"{bad_partitions} record(s) whose partition is not a flat map of primitive values (Connect's "
            "OffsetUtils.validateFormat refuses it on import) cannot be written as KIP-875 JSON and were left out"
        )
    if null_values:
        notes.append(
            f"{null_values} record(s) whose value reads as null without being a tombstone (empty or 'null' bytes: "
            "Connect lists the partition with no offset) cannot be written as KIP-875 JSON, where a null offset "
            "is a deletion, and were left out"
        )
    if foreign:
        notes.append(
            f"{foreign} record(s) under keys in bytes no converter writes (spaces, leading zeros, escapes: no task "
            "reads them, and GET, the daemon's and Connect's, shows their partition's offset from another key or as "
            "null) cannot be written as KIP-875 JSON and were left out"
        )
    if beyond_double:
        notes.append(
            f"{beyond_double} record(s) whose offset holds a number beyond a double's range (Connect reads it as "
            'Infinity) cannot be written as KIP-875 JSON, where it could only be the string "Infinity", which '
            "importing or PATCHing the file would write as a string, and were left out"
        )
    if inexact:
        notes.append(
            f"{inexact} record(s) are not in Jackson's canonical form: importing this KIP-875 JSON would write "
            "different key/value bytes; use standalone: or snapshot: for a byte-exact copy"
        )
    return bodies, [record for connector in bodies for record in held[connector]], notes


def _finite(value: Any) -> bool:
    """False for a float beyond a double's range (``1e400`` reads as infinity, as in Connect)."""
    return type(value) is not float or math.isfinite(value)


def encode_file(records: Iterable[RawRecord], progress: Tick | None = None) -> Encoded:
    """Records as a ``kip875:`` file, and the records it holds (``_bodies`` says which cannot be)."""
    bodies, held, notes = _bodies(records, progress)
    try:
        text = json.dumps(bodies, indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # an offset number beyond a double (Connect reads it as Infinity)
        raise FormatError(f"cannot be written as KIP-875 JSON: {exc}") from exc
    return Encoded(json_utf8(text + "\n"), held, notes)


def dumps_file(records: Iterable[RawRecord]) -> tuple[bytes, list[str]]:
    encoded = encode_file(records)
    return encoded.data, encoded.notes
