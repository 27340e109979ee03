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

``offset_as_read`` is the same rule on the read side: the offset ``OffsetStorageReaderImpl.offsets``
hands out for a listed partition, which the daemon's GET, ``?as_of=`` and the console show.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emulator.codec.jackson_reader import CodecError, loads_lenient
from emulator.codec.jackson_writer import dumps
from emulator.codec.values import InvalidOffsets, validate_format

__all__ = [
    "Refused",
    "UnreadableOffset",
    "ValueProblem",
    "looked_up",
    "offset_as_read",
    "offset_problem",
    "value_problem",
]


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


class Refused(enum.Enum):
    """Which step of ``OffsetStorageReaderImpl.offsets`` refused, in the words of its CRITICAL line."""

    PARTITION = "Failed to serialize partition key"
    VALUE = "Failed to deserialize offset data"


class UnreadableOffset(ValueError):
    """A listed partition for which Connect's reader gives no offset: it logs ``CRITICAL: <refused>
    when getting offsets …`` and leaves the partition out of the answer (GET and a task alike)."""

    def __init__(self, refused: Refused, reason: str) -> None:
        super().__init__(f"{refused.value}: {reason}")
        self.refused = refused
        self.reason = reason


def looked_up(partition: Mapping[str, Any]) -> bool:
    """Whether Connect's reader looks this partition's value up at all: ``OffsetStorageReaderImpl``
    runs ``validateFormat`` on each partition it is asked for and leaves one holding a map or a list
    out of its answer ("CRITICAL: Failed to serialize partition key"), so neither Connect's GET nor a
    task ever reads its value. Connect's GET leaves it out, and so do the daemon's GET and ``?as_of=``:
    such a partition may nest as deep as Jackson reads (1,000 levels), and inside an answer it would
    nest deeper than any reader with Jackson's limits reads back. It is still one of the connector's
    (its key is, in ``processPartitionKey``): a reset deletes it."""
    try:
        validate_format(partition)
    except InvalidOffsets:
        return False
    return True


def offset_as_read(partition: Mapping[str, Any], raw: bytes | None) -> Any:
    """The offset Connect's reader gives for ``partition`` (as its key reads back) whose record's
    value is ``raw``: ``None`` for a tombstone or a value that reads as null.

    ``OffsetStorageReaderImpl.offsets`` first runs ``OffsetUtils.validateFormat`` on the partition
    (a nested map or list fails, so the key is never looked up), then the converter and
    ``validateFormat`` on the value (a number, a string, a list, a nested map fail). Either failure
    raises ``UnreadableOffset``. One rule for every reader of offsets in this project (the view's
    GET and console, ``?as_of=``), so none shows what Connect cannot read as if it were an offset.
    """
    try:
        validate_format(partition)
    except InvalidOffsets as exc:
        raise UnreadableOffset(Refused.PARTITION, str(exc)) from exc
    if raw is None:
        return None
    try:
        offset = loads_lenient(raw)
        validate_format(offset)
    except (CodecError, InvalidOffsets) as exc:
        raise UnreadableOffset(Refused.VALUE, str(exc)) from exc
    return offset
