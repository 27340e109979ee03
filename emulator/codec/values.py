"""Connect's rules for what an offset may hold, and offset values as Connect reads and writes them.

Parsing itself is ``emulator.codec.jackson_reader`` (Jackson's lenient reader, as ``JsonConverter``
uses it); writing is ``emulator.codec.jackson_writer``. This module holds what sits on top of both:
``OffsetUtils.validateFormat`` and the value helpers the view and service use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulator.codec.jackson_reader import CodecError, loads_lenient
from emulator.codec.jackson_writer import JAVA_LONG_MAX, JAVA_LONG_MIN, dumps

__all__ = [
    "CodecError",
    "InvalidOffsets",
    "encode_offset",
    "loads_lenient",
    "parse_offset",
    "validate_format",
]


class InvalidOffsets(ValueError):
    """A partition or offset Connect's ``OffsetUtils.validateFormat`` would reject.

    ``str(error)`` is Connect's exact ``DataException`` message, so operators can search for it.
    """


# --- OffsetUtils.validateFormat ----------------------------------------------------------------

_PRIMITIVES = (bool, int, float, str, bytes, bytearray, memoryview)


def _java_class_of(value: object) -> str:
    """``value.getClass()`` as Connect would print it, for the Java type our value stands for."""
    if isinstance(value, int) and not isinstance(value, bool):
        return "class java.math.BigInteger"  # only out-of-long-range ints get here
    t = type(value)
    return f"class {t.__module__}.{t.__qualname__}"


def validate_format(m: object) -> None:
    """Connect's ``OffsetUtils.validateFormat``: null, or a flat map of String → primitive/null.

    Connect applies it to every partition and offset before writing (``OffsetStorageWriter``), so
    anything we write must pass it or no real worker could have written it.
    """
    if m is None:
        return
    if type(m) is dict:  # what every parser here returns: settle the usual flat map without ABC checks
        for key, value in m.items():
            kind = type(value)
            if type(key) is not str or not (
                value is None
                or kind is str
                or kind is bool
                or kind is float
                or (kind is int and JAVA_LONG_MIN <= value <= JAVA_LONG_MAX)
            ):
                break  # the general checks below name the problem, as Connect does
        else:
            return
    if not isinstance(m, Mapping):
        raise InvalidOffsets("Offsets must be specified as a Map")
    for key, value in m.items():
        if not isinstance(key, str):
            raise InvalidOffsets("Offsets may only use String keys")
        if value is None:
            continue
        if isinstance(value, _PRIMITIVES):
            if type(value) is int and not JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:
                raise InvalidOffsets(
                    "Offsets may only contain primitive types as values, but field "
                    f"{key} contains {_java_class_of(value)}"
                )
            continue
        if isinstance(value, Mapping):
            schema_type = "MAP"
        elif isinstance(value, list | tuple):
            schema_type = "ARRAY"
        else:
            raise InvalidOffsets(
                f"Offsets may only contain primitive types as values, but field {key} contains {_java_class_of(value)}"
            )
        raise InvalidOffsets(
            f"Offsets may only contain primitive types as values, but field {key} contains {schema_type}"
        )


# --- offset values -----------------------------------------------------------------------------


def encode_offset(offset: Mapping[str, Any] | None) -> bytes | None:
    """Value bytes for an offset map; ``None`` is a tombstone (deletes the partition's offset).

    Does not validate: call ``validate_format`` first where input comes from outside.
    """
    if offset is None:
        return None
    return dumps(offset)


def parse_offset(raw: bytes | None) -> Any:
    """An offset value as Connect reads it; ``None`` for a tombstone.

    ``b""`` also gives ``None`` (Jackson reads empty input as MissingNode → null), but it is NOT a
    tombstone: Connect stores the record and keeps the partition listed. Callers must check
    ``raw is None``, not the result, to decide deletion.
    """
    if raw is None:
        return None
    return loads_lenient(raw)
