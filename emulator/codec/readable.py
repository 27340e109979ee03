"""The one rule on every write path: write a value only if Connect's reader will read it back.

A task reads its offsets through ``OffsetStorageReaderImpl``: ``JsonConverter.toConnectData`` on the
value bytes (Jackson, within the limits of ``emulator.codec.limits``), then
``OffsetUtils.validateFormat`` on the result. A value that fails either step is logged as
"CRITICAL: Failed to deserialize offset data" and the task gets no offset at all for that partition,
as if it had been reset, and the good offset the record replaced is gone. So every path that writes
records (PATCH, ``POST /offsets/records``, transfers, rollback, the Spark committers) asks
``value_problem`` first and refuses, skips or (when told to) keeps and counts what fails.

Readable means: a tombstone (``None``), or bytes that parse to null or to a flat map of string keys to
primitive values. (Empty bytes read as null without a complaint, so they count as readable.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emulator.codec.jackson_reader import CodecError, loads_lenient
from emulator.codec.jackson_writer import dumps
from emulator.codec.values import InvalidOffsets, validate_format

__all__ = ["ValueProblem", "offset_problem", "value_problem"]


@dataclass(frozen=True, slots=True)
class ValueProblem:
    """Why Connect cannot read a value back, and where in the value its reader gave up."""

    reason: str
    at: int | None = None
    """Byte offset inside the value where parsing stopped (``None``: the JSON parsed, the shape is wrong)."""

    def describe(self, value_at: int | None = None) -> str:
        """The reason, with the position inside the value and, given the value's own byte offset in a
        file (``value_at``), the position in that file."""
        if self.at is None:
            return self.reason
        where = f"at byte {self.at} of the value"
        if value_at is not None:
            where += f", byte offset {value_at + self.at} of the file"
        return f"{self.reason} ({where})"


def value_problem(raw: bytes | None) -> ValueProblem | None:
    """``None`` if ``OffsetStorageReaderImpl`` reads ``raw`` back as an offset (or it is a tombstone)."""
    if raw is None:
        return None
    try:
        value = loads_lenient(raw)
    except CodecError as exc:
        return ValueProblem(f"not JSON Connect's JsonConverter can read: {exc}", exc.offset)
    return _shape_problem(value)


def offset_problem(offset: Mapping[str, Any] | None) -> ValueProblem | None:
    """``value_problem`` for an offset map about to be encoded (``validateFormat``, then the bytes)."""
    shape = _shape_problem(offset)
    return shape if shape is not None or offset is None else value_problem(dumps(offset))


def _shape_problem(value: Any) -> ValueProblem | None:
    try:
        validate_format(value)
    except InvalidOffsets as exc:
        return ValueProblem(f"not an offset Connect's OffsetStorageReaderImpl accepts: {exc}")
    return None
