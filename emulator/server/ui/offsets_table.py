"""The connector page's offsets table, filtered, sorted and cut to one page on the server (``paging.py``).

A connector with 10,000 partitions made a 1.9 MB answer, most of the page's time to interactive,
for the 100 rows the table shows. The filter matches a partition's or an offset's compact JSON (the
text the table shows); the sort is by the same text, the history's change count or the newest
record's place in the log; ties keep the connector's own order. Full rows, with the log lookups, are
built for the page only.

Each step is a pass over every partition, so the rows, their texts and the orders by text are kept
per connector until it changes (``PreparedTables``, the same version rule as the API's body cache:
taken before the rows, so a table that raced with a write is kept under the older version and never
served once the write is visible). Paging through a big table, filtering it and the 2 s refreshes
of an unchanged connector then cost one pass over the kept texts, on a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.codec.keys import logical_id
from emulator.model.offsets import ConnectorOffset
from emulator.server.deps import Runtime
from emulator.server.ui.history_index import HistoryIndex
from emulator.server.ui.paging import PageQuery, cut, sorted_by
from emulator.server.ui.summary import change_counts
from emulator.view.offset_view import Entry

OFFSET_SORTS = ("partition", "offset", "changes", "log_offset")
KEPT_TABLES = 8
"""Connectors whose prepared table is kept (the least recently shown forgotten first): a
10,000-partition table is a few MB."""


def json_text(value: Any) -> str:
    """The compact JSON the console's table shows (``JSON.stringify``)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass
class PreparedTable:
    """A connector's rows with the texts the table filters and sorts on, and the orders by them."""

    offsets: Sequence[ConnectorOffset]
    texts: list[tuple[str, str]]
    """Each row's partition and offset as compact JSON."""
    folded: list[str]
    """Both texts, case-folded, for the filter."""
    _orders: dict[tuple[int, bool], list[int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, offsets: Sequence[ConnectorOffset]) -> PreparedTable:
        texts = [(json_text(item["partition"]), json_text(item["offset"])) for item in offsets]
        return cls(offsets, texts, [f"{p}\n{o}".casefold() for p, o in texts])

    def order_by_text(self, column: int, descending: bool) -> list[int]:
        """Row indices by the column's text (0: partition, 1: offset), ties in the rows' order;
        computed once per column and direction."""
        with self._lock:
            order = self._orders.get((column, descending))
            if order is None:
                texts = self.texts
                order = sorted_by(range(len(texts)), lambda i: texts[i][column], descending)
                self._orders[(column, descending)] = order
            return order


class PreparedTables:
    """The last ``KEPT_TABLES`` connectors' prepared tables, each under the version it was read at."""

    def __init__(self, size: int = KEPT_TABLES) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._tables: OrderedDict[str, tuple[Hashable, PreparedTable]] = OrderedDict()

    def get(self, connector: str, version: Hashable) -> PreparedTable | None:
        with self._lock:
            found = self._tables.get(connector)
            if found is None or found[0] != version:
                return None
            self._tables.move_to_end(connector)
            return found[1]

    def put(self, connector: str, version: Hashable, table: PreparedTable) -> None:
        with self._lock:
            self._tables[connector] = (version, table)
            self._tables.move_to_end(connector)
            while len(self._tables) > self._size:
                self._tables.popitem(last=False)


async def offsets_table(
    rt: Runtime,
    connector: str,
    kind: str,
    index: HistoryIndex | None,
    query: PageQuery,
    tables: PreparedTables,
) -> dict[str, Any]:
    """``offsets`` (the page's rows), ``partitions`` (all of them), ``matching`` (past the filter),
    ``at`` (the page's first row, moved back when the rows shrank). The API's checks first (404 for
    a connector it would not know); a sink's rows come from the broker each time."""
    resolved = await rt.offsets.prepare_get(connector, kind, False, None)
    version = rt.offsets.source_version(connector, None) if resolved == "source" else None  # before the rows
    table = tables.get(connector, version) if version is not None else None
    if table is None:
        rows = await rt.offsets.rows(connector, resolved, None)
        table = await asyncio.to_thread(PreparedTable.of, rows)
        if version is not None:
            tables.put(connector, version, table)
    return await asyncio.to_thread(_page, rt, connector, table, index, query)


def _page(
    rt: Runtime, connector: str, table: PreparedTable, index: HistoryIndex | None, query: PageQuery
) -> dict[str, Any]:
    counts = change_counts(index, connector)
    offsets = table.offsets
    chosen: Sequence[int]
    if query.sort in ("partition", "offset"):
        chosen = table.order_by_text(0 if query.sort == "partition" else 1, query.descending)
    elif query.sort == "changes":
        chosen = sorted_by(
            range(len(offsets)), lambda i: counts.get(logical_id(offsets[i]["partition"])), query.descending
        )
    else:
        chosen = sorted_by(range(len(offsets)), lambda i: _log_offset(rt, connector, offsets[i]), query.descending)
    if needle := query.needle:
        folded = table.folded
        chosen = [i for i in chosen if needle in folded[i]]
    at, page = cut(chosen, query)
    return {
        "offsets": [_row(rt, connector, offsets[i], counts) for i in page],
        "partitions": len(offsets),
        "matching": len(chosen),
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
