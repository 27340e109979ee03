"""Record keys ``[connector, partition]``: building them, and classifying them as Connect does.

Connect's ``OffsetUtils.processPartitionKey`` decides which records count as a connector's
partitions (what GET ``/connectors/{name}/offsets`` lists and what a reset tombstones). A key it
ignores is still stored and still returned by lookups, so the daemon must classify every key the
same way — same cases, same order, same leniency (docs/protocol.md §2.6).
"""

from __future__ import annotations

import base64
import enum
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from emulator.codec.jackson_writer import dumps
from emulator.codec.values import CodecError, loads_lenient

__all__ = [
    "KeyProblem",
    "ParsedKey",
    "encode_key",
    "logical_id",
    "parse_key",
    "problem_message",
    "read_back",
    "read_back_id",
]


class KeyProblem(enum.StrEnum):
    """Why Connect leaves a key out of ``connectorPartitions``, in ``processPartitionKey`` order."""

    NULL_KEY = "null-key"
    NOT_JSON = "not-json"
    NOT_A_LIST = "not-a-list"
    WRONG_SIZE = "wrong-size"
    NAME_NOT_STRING = "name-not-string"
    PARTITION_NOT_MAP = "partition-not-map"
    # ``[name, null]``: Connect returns without a WARN (KAFKA-16392), but it is still ignored.
    PARTITION_NULL = "partition-null"


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """A key Connect accepts: the connector's name and its partition map (document order)."""

    connector: str
    partition: dict[str, Any]


def _classify(value: object) -> ParsedKey | KeyProblem:
    if type(value) is not list:
        return KeyProblem.NOT_A_LIST
    if len(value) != 2:
        return KeyProblem.WRONG_SIZE
    name, partition = value
    if type(name) is not str:
        return KeyProblem.NAME_NOT_STRING
    if type(partition) is not dict:
        return KeyProblem.PARTITION_NULL if partition is None else KeyProblem.PARTITION_NOT_MAP
    return ParsedKey(name, partition)


def parse_key(raw: bytes | None) -> ParsedKey | KeyProblem:
    """Classify key bytes exactly as ``OffsetUtils.processPartitionKey`` (3.6.1+/3.7+) does."""
    if raw is None:
        return KeyProblem.NULL_KEY
    try:
        value = loads_lenient(raw)
    except CodecError:
        return KeyProblem.NOT_JSON
    return _classify(value)


def encode_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """The key bytes Connect's ``OffsetStorageWriter`` writes for this partition map.

    Key order is the mapping's iteration order, as Jackson writes the Java map's ``entrySet()``
    order: pass the map in the order the connector builds it, or the bytes name another record.
    """
    return dumps([connector, partition])


# --- logical identity --------------------------------------------------------------------------


def _canon_text(value: object) -> str:
    """Text equal for two values iff Java's ``equals`` says they are equal (the general form of
    ``logical_id``).

    Scalars are their JSON text: it already separates ``1``/``1.0``/``true``/``"1"``/``null``,
    ``-0.0`` from ``0.0`` (``Double.equals`` compares bits) and writes every NaN as ``NaN``
    (``Double.equals`` says NaN equals NaN). Containers get a tag so that a list can never look
    like a map (``["L",…]``, ``["M",…]``, bytes ``["B","<base64>"]``); map entries ``[name,value]``
    are sorted because ``Map.equals`` ignores order, a name that is not a string tagged as
    ``["K",…]`` so it can never equal a string.

    Built without recursion, children before their container on a stack of its own: a partition
    may nest as deep as Jackson reads (1,000 levels), and Python's recursion limit, which stopped
    an earlier recursive form at about 500, dropped the reader's whole batch with the record.
    """
    texts: list[str] = []
    stack: list[tuple[object, bool]] = [(value, False)]
    while stack:
        item, children_done = stack.pop()
        if children_done:
            texts.append(_container_text(item, texts))
        elif isinstance(item, Mapping):
            stack.append((item, True))
            children = [part for name, child in item.items() for part in _entry_parts(name, child)]
            stack.extend((child, False) for child in reversed(children))
        elif isinstance(item, list | tuple):
            stack.append((item, True))
            stack.extend((child, False) for child in reversed(item))
        elif isinstance(item, bytes | bytearray | memoryview):
            texts.append(f'["B","{base64.b64encode(item).decode("ascii")}"]')
        else:
            texts.append(_scalar_id(item) or _ID_ENCODER.encode(item))
    return texts[0]


def _entry_parts(name: object, child: object) -> tuple[object, ...]:
    """What a map entry's text is built from: its value, and a name that is not a string."""
    return (child,) if type(name) is str else (name, child)


def _container_text(container: object, texts: list[str]) -> str:
    """The text of ``container`` from its children's, which end ``texts`` (taken off it)."""
    if isinstance(container, Mapping):
        size = sum(1 if type(name) is str else 2 for name in container)
        children = iter(texts[len(texts) - size :])
        del texts[len(texts) - size :]
        pairs: list[tuple[tuple[int, str], str]] = []
        for name in container:
            if type(name) is str:
                pairs.append(((0, name), f"[{_encode_ascii(name)},{next(children)}]"))
            else:
                # Any other name becomes a tagged list, which can never equal a string.
                tagged = f'["K",{next(children)}]'
                pairs.append(((1, tagged), f"[{tagged},{next(children)}]"))
        pairs.sort(key=_pair_order)
        return '["M"' + "".join("," + pair for _, pair in pairs) + "]"
    size = len(container)  # type: ignore[arg-type]  # a list or tuple: only containers get here
    children_text = texts[len(texts) - size :]
    del texts[len(texts) - size :]
    return '["L"' + "".join("," + child for child in children_text) + "]"


def _pair_order(pair: tuple[tuple[int, str], str]) -> tuple[int, str]:
    # Strings by themselves, first; other names by their tagged text.
    return pair[0]


_ID_ENCODER = json.JSONEncoder(separators=(",", ":"))
_encode_ascii: Callable[[str], str] = json.encoder.encode_basestring_ascii


def _scalar_id(value: object) -> str | None:
    """``json.dumps`` text of a scalar (``None`` if not a scalar), without the encoder's setup cost."""
    if type(value) is str:
        return _encode_ascii(value)
    if type(value) is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        if value != value:
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    return None


def logical_id(partition: Mapping[str, Any]) -> str:
    """A stable string equal for two partitions iff Java's ``Map.equals`` says they are equal.

    Connect keeps ``connectorPartitions`` in a ``HashSet<Map>``, so ``{"a":1,"b":2}`` and
    ``{"b":2,"a":1}`` are one partition (although they are two different records), while
    ``1``/``1.0``/``true`` are three different values. Note that values change on the wire
    (``-0.0`` reads back as ``0.0``, NaN as the string ``"NaN"``, bytes as a base64 string);
    compute this on what ``parse_key`` returns to get the identity Connect will see, or use
    ``read_back_id`` for a map that has not been through that round trip (a request's).
    """
    if type(partition) is dict:
        # The common case (flat, string keys): the same text as the general form, built directly,
        # because this runs once per live key during a restore.
        try:
            ordered = sorted(partition)
        except TypeError:  # keys of mixed types: only the general form can order them
            ordered = [None]
        parts = ['["M"']
        for key in ordered:
            if type(key) is not str:
                break
            value_id = _scalar_id(partition[key])
            if value_id is None:
                break
            parts.append(f",[{_encode_ascii(key)},{value_id}]")
        else:
            parts.append("]")
            return "".join(parts)
    return _canon_text(partition)


# Values that come back from Connect's write-then-read round trip as themselves (an int only within a
# long: beyond, the key cannot be written at all). A float may not: -0.0 reads back as 0.0, and NaN
# and the infinities as strings; bytes come back as base64 strings.
_KEPT_TYPES = frozenset({str, int, bool, type(None)})


def read_back(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    """The map as Connect holds it once its converter wrote and read it back, in the same key order.

    Connect's PATCH normalizes each partition and offset this way before writing them
    (``Worker.normalizeSourceConnectorOffsets``, docs/protocol.md §4.5), so this is what it writes:
    ``{"k":-0.0}`` becomes ``{"k":0.0}``, ``{"k":1e400}`` ``{"k":"Infinity"}``. A flat map of strings,
    integers, booleans and nulls comes back as itself (no round trip); a map that cannot be encoded, or
    that reads back as no map, is returned as given: the write refuses it elsewhere.
    """
    if type(mapping) is dict and _KEPT_TYPES.issuperset(map(type, mapping.values())):
        return mapping
    try:
        parsed = loads_lenient(dumps(mapping))
    except (CodecError, TypeError, ValueError):
        return mapping
    return parsed if type(parsed) is dict else mapping


def read_back_id(partition: Mapping[str, Any]) -> str:
    """``logical_id`` of the partition Connect reads back from the key this map is written as
    (``read_back``).

    Use it to find an existing partition from a map a request gives (PATCH, the history filter):
    every key in the log is compared as ``parse_key`` returns it, so ``{"k":-0.0}`` must find the
    partition stored as ``{"k":0.0}`` (and ``{"k":1e400}`` the one stored as ``{"k":"Infinity"}``).
    """
    return logical_id(read_back(partition))


# --- Connect's log text ------------------------------------------------------------------------

_JAVA_CLASS = {
    bool: "java.lang.Boolean",
    int: "java.lang.Long",
    float: "java.lang.Double",
    str: "java.lang.String",
    list: "java.util.ArrayList",
    dict: "java.util.HashMap",
}


def _java_class_name(value: object) -> str:
    """``ConnectUtils.className`` of what ``JsonConverter`` built for this parsed value."""
    if value is None:
        return "null"
    return _JAVA_CLASS.get(type(value), type(value).__name__)


def problem_message(problem: KeyProblem, raw: bytes | None) -> str:
    """The WARN line Connect logs for this key (``PARTITION_NULL``: Connect logs nothing).

    Recomputes the details from ``raw`` so callers need to keep only the classification.
    """
    if problem is KeyProblem.NULL_KEY:
        return "Ignoring offset partition key with an unexpected null value"
    if problem is KeyProblem.NOT_JSON:
        return "Ignoring offset partition key with unknown serialization. Expected json."
    value: Any = None
    if raw is not None:
        try:
            value = loads_lenient(raw)
        except CodecError:
            value = None
    if problem is KeyProblem.NOT_A_LIST:
        return (
            "Ignoring offset partition key with an unexpected format. Expected type: java.util.List, "
            f"actual type: {_java_class_name(value)}"
        )
    items = value if isinstance(value, list) else []
    if problem is KeyProblem.WRONG_SIZE:
        return f"Ignoring offset partition key with an unexpected number of elements. Expected: 2, actual: {len(items)}"
    first = items[0] if items else None
    second = items[1] if len(items) > 1 else None
    if problem is KeyProblem.NAME_NOT_STRING:
        return (
            "Ignoring offset partition key with an unexpected format for the first element in the "
            f"partition key list. Expected type: java.lang.String, actual type: {_java_class_name(first)}"
        )
    if problem is KeyProblem.PARTITION_NOT_MAP:
        return (
            "Ignoring offset partition key with an unexpected format for the second element in the "
            f"partition key list. Expected type: java.util.Map, actual type: {_java_class_name(second)}"
        )
    return (
        "Ignoring offset partition key with a null partition (Connect ignores this case without logging, KAFKA-16392)"
    )
