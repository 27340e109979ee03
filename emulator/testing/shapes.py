"""The shapes a test may write offsets in, and the comparison Connect itself makes.

Tests write offsets the way they think of them: Connect's REST body, its list of entries, or
``(partition, offset)`` pairs. All become Connect's entries, in the order given, because the
order of a partition's keys is the order its key bytes are written in (docs/protocol.md §1.4): a
partition must be given in the key order the connector builds it, or its task looks up other bytes.

Comparison is Connect's: partitions are equal as maps (key order does not matter, as in
``Map.equals``), and values are type-exact, so ``1``, ``1.0`` and ``true`` differ, as Java's
``Long``, ``Double`` and ``Boolean`` do. Python's ``==`` would call all three equal.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

Partition: TypeAlias = Mapping[str, Any]
Offset: TypeAlias = Mapping[str, Any] | None
Entry: TypeAlias = dict[str, Any]
"""Connect's ``{"partition": {...}, "offset": {...} or None}``."""

OffsetsInput: TypeAlias = Mapping[str, Any] | Iterable[Mapping[str, Any]] | Iterable[tuple[Partition, Offset]]
"""``{"offsets": [...]}``, ``[{"partition": ..., "offset": ...}]`` or ``[(partition, offset)]``."""


def entries(offsets: OffsetsInput) -> list[Entry]:
    """Connect's entries for any accepted shape, in the given order; a shape error names the item."""
    if isinstance(offsets, Mapping):
        if "offsets" not in offsets:
            raise ValueError(
                'offsets must be {"offsets": [...]}, a list of {"partition", "offset"} entries or of '
                f"(partition, offset) pairs; got a mapping with keys {sorted(offsets)}"
            )
        items: Iterable[Any] = offsets["offsets"]
    elif isinstance(offsets, str | bytes):  # iterated, a string would be refused a character at a time
        raise ValueError(
            'offsets must be {"offsets": [...]}, a list of {"partition", "offset"} entries or of '
            f"(partition, offset) pairs; got {type(offsets).__name__} {offsets[:60]!r}"
        )
    else:
        items = offsets
    out: list[Entry] = []
    for index, item in enumerate(items):
        if isinstance(item, Mapping):
            if set(item) != {"partition", "offset"}:
                raise ValueError(f'offsets[{index}] must have exactly "partition" and "offset", got {sorted(item)}')
            partition, offset = item["partition"], item["offset"]
        elif isinstance(item, tuple) and len(item) == 2:
            partition, offset = item
        else:
            raise ValueError(f"offsets[{index}] must be an entry or a (partition, offset) pair, got {item!r}")
        if not isinstance(partition, Mapping):
            raise ValueError(f"offsets[{index}]: a partition is a mapping, got {partition!r}")
        if offset is not None and not isinstance(offset, Mapping):
            raise ValueError(f"offsets[{index}]: an offset is a mapping or None, got {offset!r}")
        out.append({"partition": dict(partition), "offset": None if offset is None else dict(offset)})
    return out


def require_flat(listed: Iterable[Entry]) -> None:
    """A ``ValueError`` naming the partition and the field when a partition or an offset holds a map
    or a list: Connect's ``OffsetUtils.validateFormat`` refuses them (its ``DataException``, an HTTP
    500 from the daemon as from Connect; docs/protocol.md §1.1), so the kit says so before sending.
    Only nesting (and NaN or infinity, which no JSON body carries) is checked here; whatever else that
    rule refuses, the daemon answers."""
    for index, entry in enumerate(listed):
        for where, mapping in (("the partition", entry["partition"]), ("its offset", entry["offset"] or {})):
            for key, value in mapping.items():
                if isinstance(value, float) and not math.isfinite(value):
                    raise ValueError(
                        f"offsets[{index}], partition {shown(entry['partition'])}: field {key!r} of {where} is "
                        f"{value}; JSON has no NaN or infinity, so neither a PATCH body nor Connect can carry it"
                    )
                if isinstance(value, Mapping | list | tuple):
                    held = "a map" if isinstance(value, Mapping) else "a list"
                    raise ValueError(
                        f"offsets[{index}], partition {shown(entry['partition'])}: field {key!r} of {where} holds "
                        f"{held}; Connect's partitions and offsets are flat maps of primitives or null "
                        "(OffsetUtils.validateFormat, docs/protocol.md §1.1)"
                    )


def canonical(value: Any) -> str:
    """Order-free, type-exact text of a JSON value: the identity Connect gives a partition."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def shown(value: Any) -> str:
    """A value as a person reads it in a failure message: JSON, keys in their own order."""
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


def by_partition(rows: Iterable[Mapping[str, Any]]) -> dict[str, Entry]:
    """Entries keyed by their partition's canonical text; a later entry for a partition wins, as
    in a PATCH body."""
    return {canonical(row["partition"]): dict(row) for row in rows}
