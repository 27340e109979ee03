"""Rows of ``connect-debezium``: a change as Debezium wrote it, plus optional typed ``after`` columns.

Pure (no pyspark), so executors and tests use the same function. ``key`` and ``value`` are the
connector's records as JSON text, the change event envelope kept (``before``, ``after``, ``source``,
``op``, ``ts_ms``…; with ``jsonSchemas=true`` wrapped in ``{"schema":…,"payload":…}``), so nothing
Debezium said is lost; ``source_partition`` / ``source_offset`` are what Connect would commit for the
change. With ``afterTable`` / ``afterColumns``, the named fields of that table's ``after`` image are
also typed columns (null for other tables, deletes and tombstones).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from emulator.spark.debezium_options import BASE_COLUMNS, AfterColumns
from emulator.spark.debezium_stream import Numbered

log = logging.getLogger(__name__)

_INTEGRAL = {"int": 1 << 31, "smallint": 1 << 15, "bigint": 1 << 63}


def _payload(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"schema", "payload"}:
        return value["payload"]
    return value


def table_of(event: Any) -> str | None:
    """``schema.table`` (or ``db.table`` where the source has no schema) of a change event."""
    source = event.get("source") if isinstance(event, dict) else None
    if not isinstance(source, dict) or not isinstance(source.get("table"), str):
        return None
    container = source.get("schema") or source.get("db")
    return f"{container}.{source['table']}" if isinstance(container, str) else source["table"]


def _matches(event: Any, table: str) -> bool:
    found = table_of(event)
    if found is None:
        return False
    return found == table or found.rsplit(".", 1)[-1] == table


def convert(value: Any, kind: str) -> Any:
    """A JSON field as a Spark value of ``kind``; ``None`` (counted by the caller) if it does not fit."""
    if value is None:
        return None
    if kind == "string":
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind in _INTEGRAL:
        bound = _INTEGRAL[kind]
        return value if isinstance(value, int) and not isinstance(value, bool) and -bound <= value < bound else None
    if kind in ("double", "float"):
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    return None


_ARROW_TYPES = {
    "string": "string",
    "int": "int32",
    "bigint": "int64",
    "smallint": "int16",
    "boolean": "bool_",
    "double": "float64",
    "float": "float32",
}


@dataclass(frozen=True, slots=True)
class ChangeColumns:
    """A run of changes as columns: what a Spark task receives (plain lists pickle fast)."""

    seq: list[int]
    key: list[str | None]
    value: list[str | None]
    topic: list[str]
    source_partition: list[str]
    source_offset: list[str | None]

    @classmethod
    def of(cls, changes: Sequence[Numbered]) -> ChangeColumns:
        records = [c.record for c in changes]
        return cls(
            [c.seq for c in changes],
            [r.key for r in records],
            [r.value for r in records],
            [r.topic for r in records],
            [r.partition for r in records],
            [r.offset for r in records],
        )

    def __len__(self) -> int:
        return len(self.seq)


class RowBuilder:
    """Builds the rows of one partition; counts ``after`` fields that did not fit their column type."""

    def __init__(self, after: AfterColumns | None) -> None:
        self.after = after
        self.mismatched = 0

    def after_values(self, value: str | None) -> list[Any]:
        assert self.after is not None
        values: list[Any] = [None] * len(self.after.columns)
        if value is not None:
            event = _payload(json.loads(value))
            image = event.get("after") if isinstance(event, dict) and _matches(event, self.after.table) else None
            if isinstance(image, dict):
                for i, (name, kind) in enumerate(self.after.columns):
                    raw = image.get(name)
                    values[i] = convert(raw, kind)
                    if values[i] is None and raw is not None:
                        self.mismatched += 1
        return values

    def row(self, item: Numbered) -> tuple[Any, ...]:
        record = item.record
        base = (item.seq, record.key, record.value, record.topic, record.partition, record.offset)
        return base if self.after is None else (*base, *self.after_values(record.value))

    def batch(self, columns: ChangeColumns) -> Any:
        """The rows as one ``pyarrow.RecordBatch`` (no Python object per row on Spark's side)."""
        import pyarrow as pa

        arrays = [
            pa.array(columns.seq, type=pa.int64()),
            pa.array(columns.key, type=pa.string()),
            pa.array(columns.value, type=pa.string()),
            pa.array(columns.topic, type=pa.string()),
            pa.array(columns.source_partition, type=pa.string()),
            pa.array(columns.source_offset, type=pa.string()),
        ]
        names = [name for name, _ in BASE_COLUMNS]
        if self.after is not None:
            rows = [self.after_values(v) for v in columns.value]
            for i, (name, kind) in enumerate(self.after.columns):
                arrays.append(pa.array([r[i] for r in rows], type=getattr(pa, _ARROW_TYPES[kind])()))
                names.append(name)
        return pa.RecordBatch.from_arrays(arrays, names=names)
