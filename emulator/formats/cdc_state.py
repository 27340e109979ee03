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

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from emulator.codec.jackson_writer import dumps as jackson_dumps
from emulator.codec.keys import KeyProblem, encode_key, parse_key
from emulator.codec.strict_json import JsonLimitExceeded, loads_strict
from emulator.codec.values import CodecError, InvalidOffsets, encode_offset, loads_lenient, validate_format
from emulator.formats.model import FormatError, Loaded, RawRecord

__all__ = [
    "CdcState",
    "dumps_file",
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


def _json(text: str | bytes, what: str) -> Any:
    """A state document as the engines' Jackson reads it: JSON within Jackson's read limits."""
    try:
        return loads_strict(text)
    except JsonLimitExceeded as exc:
        raise FormatError(f"{what} is beyond what Connect's JSON reader (Jackson) accepts: {exc}") from exc
    except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
        raise FormatError(f"{what} is not valid JSON: {exc}") from exc


def parse_state(document: Any, where: str = "state") -> CdcState:
    """Validate a parsed state document (a dict, or a JSON string holding one)."""
    if isinstance(document, str | bytes):
        document = _json(document, where)
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
    elif encode_key(unwrapped.connector, unwrapped.partition) != key:
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
        if offset is not None and encode_offset(offset) != value:
            notes.append(f"the value of key {shown} is not in Jackson's canonical form; the state holds its content")
    return unwrapped.connector, CdcState(unwrapped.partition, offset), notes


# --- the cdc: file (JSON lines) ----------------------------------------------------------------------


def loads_file(data: bytes, default_connector: str | None = None, source: str | None = None) -> Loaded:
    """Parse a JSON-lines CDC state file into Connect records (in line order)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"not UTF-8 text: {exc}", source=source, where=f"byte offset {exc.start}") from None
    records: list[RawRecord] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            document = _json(line, where)
            if isinstance(document, dict) and "state" in document:
                unknown = sorted(set(document) - {"connector", "state"})
                if unknown:
                    raise FormatError(f"{where} has unknown field(s) {unknown}; expected connector and state")
                connector = document.get("connector")
                if not isinstance(connector, str) or not connector:
                    raise FormatError(f"{where}: 'connector' must be a non-empty string")
                state = parse_state(document["state"], f"{where}.state")
            else:
                if default_connector is None:
                    raise FormatError(
                        f'{where} is a bare state document; wrap it as {{"connector":…,"state":…}} or give the '
                        "connector (engine) name for bare states"
                    )
                connector = default_connector
                state = parse_state(document, where)
        except FormatError as exc:
            raise FormatError(exc.detail, source=source, where=where) from None
        key, value = state_to_entry(connector, state)
        records.append(RawRecord(key, value))
    return Loaded(records)


def dumps_file(records: Iterable[RawRecord], *, risingwave: bool = False) -> tuple[bytes, list[str]]:
    """Records as a JSON-lines CDC state file; tombstones are left out (a state has no deletion)."""
    lines: list[bytes] = []
    notes: list[str] = []
    tombstones = 0
    for record in records:
        if record.value is None:
            tombstones += 1
            continue
        connector, state, record_notes = entry_to_state(record.key, record.value)
        notes.extend(record_notes)
        line = b'{"connector":' + jackson_dumps(connector) + b',"state":'
        lines.append(line + state_bytes(state, with_heartbeat=risingwave) + b"}\n")
    if tombstones:
        notes.append(f"{tombstones} tombstone(s) left out: a CDC state has no way to say 'deleted'")
    return b"".join(lines), notes
