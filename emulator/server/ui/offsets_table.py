"""The connector page's offsets table, filtered, sorted and cut to one page on the server (``paging.py``).

A connector with 10,000 partitions made a 1.9 MB answer, most of the page's time to interactive,
for the 100 rows the table shows. The filter matches a partition's or an offset's compact JSON (the
text the table shows); the sort is by the same text, the history's change count or the newest
record's place in the log; ties keep the connector's own order. Full rows, with the log lookups, are
built for the page only. Runs on a worker thread: every step is a pass over all partitions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from emulator.codec.keys import logical_id
from emulator.model.offsets import ConnectorOffset
from emulator.server.deps import Runtime
from emulator.server.ui.history_index import HistoryIndex
from emulator.server.ui.paging import PageQuery, cut, sorted_by
from emulator.view.offset_view import Entry

OFFSET_SORTS = ("partition", "offset", "changes", "log_offset")


def json_text(value: Any) -> str:
    """The compact JSON the console's table shows (``JSON.stringify``)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def offsets_table(
    rt: Runtime, connector: str, offsets: Sequence[ConnectorOffset], index: HistoryIndex | None, query: PageQuery
) -> dict[str, Any]:
    """``offsets`` (the page's rows), ``partitions`` (all of them), ``matching`` (past the filter),
    ``at`` (the page's first row, moved back when the rows shrank)."""
    counts = index.counts(connector) if index is not None and index.state().ready else {}
    items: list[Mapping[str, Any]] = list(offsets)
    if needle := query.needle:
        items = [
            item
            for item in items
            if needle in json_text(item["partition"]).casefold() or needle in json_text(item["offset"]).casefold()
        ]
    if query.sort == "partition":
        items = sorted_by(items, lambda item: json_text(item["partition"]), query.descending)
    elif query.sort == "offset":
        items = sorted_by(items, lambda item: json_text(item["offset"]), query.descending)
    elif query.sort == "changes":
        items = sorted_by(items, lambda item: counts.get(logical_id(item["partition"])), query.descending)
    else:
        items = sorted_by(items, lambda item: _log_offset(rt, connector, item), query.descending)
    at, page = cut(items, query)
    return {
        "offsets": [_row(rt, connector, item, counts) for item in page],
        "partitions": len(offsets),
        "matching": len(items),
        "at": at,
    }


def _newest(rt: Runtime, connector: str, lid: str) -> tuple[tuple[bytes, ...], Entry | None]:
    """The raw keys denoting the partition, and the record of the newest of them."""
    keys = rt.view.find(connector, lid)
    return keys, (rt.view.get_raw(keys[-1]) if keys else None)


def _log_offset(rt: Runtime, connector: str, item: Mapping[str, Any]) -> int | None:
    """Where the partition's newest record sits in its log partition (the column's sort value)."""
    entry = _newest(rt, connector, logical_id(item["partition"]))[1]
    return None if entry is None else entry.offset


def _row(rt: Runtime, connector: str, item: Mapping[str, Any], counts: Mapping[str, int]) -> dict[str, Any]:
    """A partition with its offset, where its newest record sits in the log (source connectors) and
    how many changes the history holds for it."""
    partition = item["partition"]
    lid = logical_id(partition)
    row: dict[str, Any] = {"lid": lid, "partition": partition, "offset": item["offset"], "changes": counts.get(lid)}
    keys, entry = _newest(rt, connector, lid)
    if entry is not None:
        row |= {"kafka_partition": entry.partition, "log_offset": entry.offset, "timestamp_ms": entry.timestamp_ms}
        if len(keys) > 1:
            row["keys"] = len(keys)  # several byte-different keys denote this partition
    return row
