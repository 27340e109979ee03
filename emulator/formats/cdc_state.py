"""Flink CDC / RisingWave offset state ⇄ Connect offset records.

Both engines keep a Debezium connector's position as one JSON document,
``{"sourcePartition":{…},"sourceOffset":{…}}`` (RisingWave adds ``"isHeartbeat":…``), written by a
plain Jackson ``ObjectMapper`` and handed back to an ``OffsetStorageWriter`` on restore
(docs/transfers.md, "CDC state"). Converting that state to Connect records is what their restore path does:
the record key is ``[<engine name>, sourcePartition]`` and the value is ``sourceOffset``, both
encoded by ``JsonConverter`` in the maps' key order (Jackson reads JSON objects into
``LinkedHashMap``, so the order is the document's).

The other way, a Connect record becomes the state JSON Jackson would write for it: compact,
``sourcePartition`` first. Flink CDC (and Debezium 1.x's embedded engine, and RisingWave before its
async engine) configured the *key* converter with ``schemas.enable`` left at true, so their stores
hold keys wrapped in a schema envelope, ``{"schema":null,"payload":["engine",{…}]}``. Such keys are
accepted on input and reported, because Connect itself would never match them.

The file shape used by ``cdc:`` locations is JSON lines, one state per line::

    {"connector":"<name>","state":{"sourcePartition":{…},"sourceOffset":{…}}}

where ``state`` may also be a JSON *string* holding the state document (as RisingWave's state table
and Flink's ``offset.storage.flink.state.value`` keep it). A line holding a bare state document is
accepted too when a default connector name is given (Flink CDC's default engine name is ``engine``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from emulator.codec.jackson_writer import dumps as jackson_dumps
from emulator.codec.keys import KeyProblem, encode_key, parse_key
from emulator.codec.strict_json import Duplicates, JsonLimitExceeded, TooDeepHere, loads_strict
from emulator.codec.values import CodecError, InvalidOffsets, encode_offset, loads_lenient, validate_format
from emulator.formats.model import Encoded, FormatError, Loaded, RawRecord, Tick, duplicate_names_note, tick

__all__ = [
    "CdcState",
    "dumps_file",
    "encode_file",
    "entry_to_state",
    "loads_file",
    "parse_state",
    "state_bytes",
    "state_to_entry",
    "unwrap_key",
]

FLINK_DEFAULT_ENGINE = "engine"
"""``DebeziumSourceFunction.run``: ``properties.putIfAbsent("name", "engine")``, the offsets namespace."""


@dataclass(frozen=True, slots=True)
class CdcState:
    """One engine's position: the partition and offset maps in document order."""

    partition: dict[str, Any]
    offset: dict[str, Any] | None
    is_heartbeat: bool | None = None


@dataclass(frozen=True, slots=True)
class UnwrappedKey:
    """A record key understood as ``[connector, partition]``, and whether it wore an envelope."""

    connector: str
    partition: dict[str, Any]
    enveloped: bool


def _json(text: str | bytes, what: str, duplicates: Duplicates | None = None) -> Any:
    """A state document as the engines' Jackson reads it: JSON within Jackson's read limits."""
    try:
        return loads_strict(text, duplicates)
    except JsonLimitExceeded as exc:
        raise FormatError(f"{what} is beyond what Connect's JSON reader (Jackson) accepts: {exc}") from exc
    except TooDeepHere as exc:
        raise FormatError(f"{what} is {exc}") from exc
    except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
        raise FormatError(f"{what} is not valid JSON: {exc}") from exc


def parse_state(document: Any, where: str = "state") -> CdcState:
    """Validate a parsed state document (a dict, or a JSON string holding one)."""
    if isinstance(document, str | bytes):  # an engine property's text: the file reader's rule on repeated fields
        duplicates = Duplicates()
        document = _json(document, where, duplicates)
        _refuse_repeated_state(document, where, duplicates)
    if not isinstance(document, dict):
        raise FormatError(f"{where} must be a JSON object, got {type(document).__name__}")
    unknown = sorted(set(document) - {"sourcePartition", "sourceOffset", "isHeartbeat"})
    if unknown:
        raise FormatError(
            f"{where} has unknown field(s) {unknown}; expected sourcePartition, sourceOffset and optionally isHeartbeat"
        )
    partition = document.get("sourcePartition")
    if not isinstance(partition, dict):
        raise FormatError(f"{where}.sourcePartition must be a JSON object, got {_type(partition)}")
    offset = document.get("sourceOffset")
    if offset is not None and not isinstance(offset, dict):
        raise FormatError(f"{where}.sourceOffset must be a JSON object or null, got {_type(offset)}")
    heartbeat = document.get("isHeartbeat")
    if heartbeat is not None and not isinstance(heartbeat, bool):
        raise FormatError(f"{where}.isHeartbeat must be true or false, got {_type(heartbeat)}")
    for label, value in (("sourcePartition", partition), ("sourceOffset", offset)):
        try:
            validate_format(value)
        except InvalidOffsets as exc:
            raise FormatError(f"{where}.{label}: {exc} (Connect's OffsetUtils.validateFormat)") from exc
    return CdcState(partition, offset, heartbeat)


def _type(value: object) -> str:
    return "null" if value is None else type(value).__name__


def state_to_entry(connector: str, state: CdcState) -> tuple[bytes, bytes | None]:
    """The Connect key and value bytes ``OffsetStorageWriter`` writes on restoring this state.

    A null ``sourceOffset`` gives a tombstone, as a null offset does in Connect.
    """
    return encode_key(connector, state.partition), encode_offset(state.offset)


def state_bytes(state: CdcState, *, with_heartbeat: bool = False) -> bytes:
    """The state document exactly as the engines' Jackson ``ObjectMapper`` writes it.

    ``with_heartbeat`` (RisingWave) appends ``"isHeartbeat"``: the state's own flag, else false.
    """
    document: dict[str, Any] = {"sourcePartition": state.partition, "sourceOffset": state.offset}
    if with_heartbeat:
        document["isHeartbeat"] = bool(state.is_heartbeat)
    return jackson_dumps(document)


def unwrap_key(key: bytes) -> UnwrappedKey | KeyProblem:
    """Read a key as ``[connector, partition]``, also through a ``{"schema":…,"payload":…}`` envelope."""
    parsed = parse_key(key)
    if not isinstance(parsed, KeyProblem):
        return UnwrappedKey(parsed.connector, parsed.partition, enveloped=False)
    if parsed is not KeyProblem.NOT_A_LIST:
        return parsed
    try:
        document = loads_lenient(key)
    except CodecError:
        return parsed
    if not isinstance(document, dict) or set(document) != {"schema", "payload"}:
        return parsed
    payload = document["payload"]
    if isinstance(payload, list) and len(payload) == 2 and isinstance(payload[0], str) and isinstance(payload[1], dict):
        return UnwrappedKey(payload[0], payload[1], enveloped=True)
    return parsed


_ENVELOPE_PREFIX = b'{"schema":null,"payload":'


def connect_key(key: bytes) -> tuple[bytes, bool] | None:
    """The Connect key for an enveloped key, and whether its bytes are exact; None if not enveloped.

    ``JsonConverter`` with ``schemas.enable=true`` writes ``{"schema":null,"payload":<list>}`` where
    ``<list>`` is byte for byte what the same converter writes without the envelope, so slicing it
    out gives exactly the key Connect would have written. Any other envelope spelling is re-encoded.
    """
    unwrapped = unwrap_key(key)
    if isinstance(unwrapped, KeyProblem) or not unwrapped.enveloped:
        return None
    if key.startswith(_ENVELOPE_PREFIX) and key.endswith(b"}"):
        inner = key[len(_ENVELOPE_PREFIX) : -1]
        parsed = parse_key(inner)
        if not isinstance(parsed, KeyProblem) and (parsed.connector, parsed.partition) == (
            unwrapped.connector,
            unwrapped.partition,
        ):
            return inner, True
    return encode_key(unwrapped.connector, unwrapped.partition), False


def entry_to_state(key: bytes, value: bytes | None) -> tuple[str, CdcState, list[str]]:
    """A Connect record as (connector, state, notes); ``FormatError`` if it cannot be one.

    Notes say when the state cannot reproduce the record's bytes: an envelope key, or key/value
    bytes that are not what Jackson writes for their own content (other whitespace, number forms).
    """
    connector, state, notes, _ = _to_state(key, value)
    return connector, state, notes


def _to_state(key: bytes, value: bytes | None) -> tuple[str, CdcState, list[str], RawRecord]:
    """``entry_to_state``, and the record restoring the state writes (``state_to_entry``'s key and
    value), computed once: the notes compare it with the record given."""
    unwrapped = unwrap_key(key)
    shown = key[:200].decode("utf-8", "backslashreplace")
    if isinstance(unwrapped, KeyProblem):
        raise FormatError(f"key {shown} is not a Connect offsets key ({unwrapped.value})")
    notes: list[str] = []
    if unwrapped.enveloped:
        notes.append(
            f"key {shown} has a schema envelope (Flink CDC / Debezium 1.x key converter with schemas.enable=true); "
            "unwrapped"
        )
    restored_key = encode_key(unwrapped.connector, unwrapped.partition)
    if not unwrapped.enveloped and restored_key != key:
        notes.append(f"key {shown} is not in Jackson's canonical form; the state holds its parsed content")
    offset: dict[str, Any] | None = None
    if value is not None:
        try:
            parsed_value = loads_lenient(value)
        except CodecError as exc:
            raise FormatError(f"the value of key {shown} is not JSON Connect can read: {exc}") from exc
        if parsed_value is not None and not isinstance(parsed_value, dict):
            raise FormatError(f"the value of key {shown} is a {_type(parsed_value)}, not an offset map")
        offset = parsed_value
    restored_value = encode_offset(offset)
    if restored_value is not None and restored_value != value:
        notes.append(f"the value of key {shown} is not in Jackson's canonical form; the state holds its content")
    restored = RawRecord(restored_key, restored_value)
    return unwrapped.connector, CdcState(unwrapped.partition, offset), notes, restored


# --- the cdc: file (JSON lines) ----------------------------------------------------------------------


_BOM = "\ufeff"
"""A UTF-8 byte order mark: Jackson skips one at the start of a document, so a reader here does too."""

_LINE_BREAKS_IN_STRINGS = ((b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"), (b"\xc2\x85", b"\\u0085"))
"""U+2028, U+2029 and U+0085 as raw UTF-8, and their JSON escapes. JSON allows them raw inside a
string, but line-oriented tools (Python's ``str.splitlines``, many JSON-lines readers) break a line
there; escaped, every JSON reader (Jackson, serde_json, Python's) reads the same string. In UTF-8
these byte sequences can only be those characters, and in JSON text they can only stand inside a
string, so replacing the bytes changes no value."""


def _refuse_repeated_state(state: Any, where: str, duplicates: Duplicates) -> None:
    """A state naming ``sourcePartition`` or ``sourceOffset`` twice is ambiguous: refused, not read last-wins."""
    twice = duplicates.in_object(state)
    if twice:
        raise FormatError(
            f"{where} names {json.dumps(twice[0], ensure_ascii=False)} twice; which one is meant is unclear (a JSON "
            "reader would keep the later one): write it once"
        )


_BLANK_LINES = re.compile(r"[ \t\r\n]*\n")
"""Blank lines up to the last line break of the run: one character class, no repeated group, so the
regular-expression engine keeps no state per line (a repeated group kept 3.4 GB for 20 million)."""


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """JSON lines split as the format defines them: at ``\n`` (a ``\r`` before it belongs to the
    break), never at the other characters ``str.splitlines`` treats as breaks (U+2028, U+0085, …),
    which may stand raw inside a JSON string. Only lines with something in them, numbered from 1 as an
    editor numbers them: a list of every line cost dozens of bytes per line, gigabytes for a file of
    millions of blank lines, and a run of blank lines is skipped in one regular-expression step."""
    start, number, end = 0, 0, len(text)
    while start < end:
        blanks = _BLANK_LINES.match(text, start)
        if blanks is not None:  # a run of blank lines is passed over in one step, counted, not yielded
            number += blanks.group().count("\n")
            start = blanks.end()
            continue
        stop = text.find("\n", start)
        if stop < 0:
            stop = end
        number += 1
        line = text[start:stop]
        yield number, line[:-1] if line.endswith("\r") else line
        start = stop + 1


def _json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words (for messages about a document of the wrong shape)."""
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, bool):
        return f"JSON {str(value).lower()}"
    if isinstance(value, int | float):
        return "a JSON number"
    return "JSON null" if value is None else "a JSON object"


def loads_file(
    data: bytes, default_connector: str | None = None, source: str | None = None, progress: Tick | None = None
) -> Loaded:
    """Parse a JSON-lines CDC state file into Connect records (in line order).

    ``progress`` (if given) is told every ``TICK_EVERY`` lines how many were read, of how many."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"not UTF-8 text: {exc}", source=source, where=f"byte offset {exc.start}") from None
    text = text.removeprefix(_BOM)
    records: list[RawRecord] = []
    duplicates = Duplicates()
    total = text.count("\n") + (0 if text.endswith("\n") else 1)
    for number, line in _lines(text):
        tick(progress, number, total)
        if not line.strip(" \t\r"):
            continue
        where = f"line {number}"
        try:
            document = _json(line, where, duplicates)
            if isinstance(document, dict) and "state" in document:
                unknown = sorted(set(document) - {"connector", "state"})
                if unknown:
                    raise FormatError(f"{where} has unknown field(s) {unknown}; expected connector and state")
                if duplicates.at_top:
                    raise FormatError(
                        f"{where} names {json.dumps(duplicates.at_top[0])} twice; which one is meant is unclear (a "
                        "JSON reader would keep the later one): write it once"
                    )
                connector = document.get("connector")
                if not isinstance(connector, str) or not connector:
                    raise FormatError(f"{where}: 'connector' must be a non-empty string")
                _refuse_repeated_state(document["state"], f"{where}.state", duplicates)
                state = parse_state(document["state"], f"{where}.state")
            elif not isinstance(document, dict):
                raise FormatError(
                    f'{where} is {_json_kind(document)} where a state object is expected: {{"connector":…,"state":…}}, '
                    'or with a connector (engine) name a bare {"sourcePartition":…,"sourceOffset":…}'
                )
            else:
                if default_connector is None:
                    raise FormatError(
                        f'{where} is a bare state document; wrap it as {{"connector":…,"state":…}} or give the '
                        "connector (engine) name for bare states (the CLI's --name ENGINE)"
                    )
                connector = default_connector
                _refuse_repeated_state(document, where, duplicates)
                state = parse_state(document, where)
        except FormatError as exc:
            raise FormatError(exc.detail, source=source, where=where) from None
        key, value = state_to_entry(connector, state)
        records.append(RawRecord(key, value))
    if not records:
        raise FormatError(
            "the file holds no state (it is empty or holds only blank lines): not a CDC state file", source=source
        )
    return Loaded(records, duplicate_names_note(duplicates.names))


def encode_file(records: Iterable[RawRecord], *, risingwave: bool = False, progress: Tick | None = None) -> Encoded:
    """Records as a JSON-lines CDC state file, and the records it holds as ``loads_file`` reads them
    back (each key and value as restoring the state writes it, Jackson's encoding of the parsed
    maps, not the bytes offered), so a diff against an existing file compares like with like.

    Tombstones are left out (a state has no deletion), and so are values that read as null without
    being one (empty or ``null`` bytes: a null ``sourceOffset`` restores as a deletion).
    ``FormatError`` for a record no state can express (a key Connect ignores, a partition or value
    that is not a flat offset map, which ``loads_file`` would refuse)."""
    lines: list[bytes] = []
    held: list[RawRecord] = []
    notes: list[str] = []
    tombstones = 0
    null_values = 0
    for number, record in enumerate(records, start=1):
        tick(progress, number, None)
        if record.value is None:
            tombstones += 1
            continue
        connector, state, record_notes, restored = _to_state(record.key, record.value)
        if state.offset is None:
            null_values += 1
            continue
        _check_format(state, record.key)
        notes.extend(record_notes)
        line = (
            b'{"connector":' + jackson_dumps(connector) + b',"state":' + state_bytes(state, with_heartbeat=risingwave)
        )
        for raw, escaped in _LINE_BREAKS_IN_STRINGS:
            if raw in line:
                line = line.replace(raw, escaped)
        lines.append(line + b"}\n")
        held.append(restored)
    if tombstones:
        notes.append(f"{tombstones} tombstone(s) left out: a CDC state has no way to say 'deleted'")
    if null_values:
        notes.append(
            f"{null_values} record(s) whose value reads as null without being a tombstone (empty or 'null' bytes: "
            "Connect lists the partition with no offset) left out: a null sourceOffset restores as a deletion"
        )
    return Encoded(b"".join(lines), held, notes)


def _check_format(state: CdcState, key: bytes) -> None:
    """``FormatError`` for a state ``parse_state`` (so ``loads_file``) would refuse: a partition or
    offset that is not a flat map of primitive values (Connect's ``OffsetUtils.validateFormat``)."""
    for label, value in (("partition", state.partition), ("value", state.offset)):
        try:
            validate_format(value)
        except InvalidOffsets as exc:
            shown = key[:200].decode("utf-8", "backslashreplace")
            raise FormatError(
                f"the {label} of key {shown} cannot be a CDC state: {exc} (Connect's OffsetUtils.validateFormat)"
            ) from exc


def dumps_file(records: Iterable[RawRecord], *, risingwave: bool = False) -> tuple[bytes, list[str]]:
    """Records as a JSON-lines CDC state file (``encode_file``), and the notes."""
    encoded = encode_file(records, risingwave=risingwave)
    return encoded.data, encoded.notes
