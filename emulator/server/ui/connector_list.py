"""The connectors page's list, filtered, sorted and cut to one page on the server (``paging.py``).

The page asks for its page (``at``, ``limit``) with its filter and sort, and the daemon builds full
rows (claims included) for those only. Sorting by a column other than the name needs that column
for every matching connector; each is one lookup in memory except the claim, which is then read for
all of them (one read of the claims topic, as before). Ties are in name order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from emulator.model.errors import InvalidRequest
from emulator.server.auth.scopes import Grants
from emulator.server.deps import Runtime
from emulator.server.sink_lag import SinkLagSnapshot
from emulator.server.ui.history_index import HistoryIndex
from emulator.server.ui.paging import PageQuery, cut, natural_name, sorted_by
from emulator.server.ui.summary import (
    claims_of,
    connector_kind,
    connector_rows_for,
    connector_state,
    last_changes,
    partition_count,
    sink_lags,
    total_lag,
)

SORTS = ("name", "kind", "state", "partitions", "last", "claim", "lag")
KINDS = ("source", "sink")


@dataclass(frozen=True)
class ListQuery:
    """The page's filter and bounds, plus what only this list filters on."""

    page: PageQuery
    kind: str | None = None
    connector: str | None = None
    """Exactly this connector: the poll on a connector's own page, which only asks whether it changed."""

    def __post_init__(self) -> None:
        self.page.check(SORTS)
        if self.kind is not None and self.kind not in KINDS:
            raise InvalidRequest(f"kind must be source or sink, got {self.kind!r}")


async def connector_list(
    rt: Runtime,
    names: Sequence[str],
    grants: Grants,
    index: HistoryIndex | None,
    lag: SinkLagSnapshot | None,
    query: ListQuery,
) -> dict[str, Any]:
    """``connectors`` (the page's rows), ``matching`` (rows past the filter), ``total`` (connectors the
    principal may read) and ``at`` (the page's first row, moved back when the rows shrank)."""
    readable, chosen = await asyncio.to_thread(_filtered, rt, names, grants, query)
    claims: dict[str, dict[str, Any] | None] | None = None
    sort = query.page.sort
    if sort != "name":
        if sort == "claim":
            claims = await claims_of(rt, chosen)
        value = _column(rt, index, lag, claims, sort)
        chosen = await asyncio.to_thread(sorted_by, chosen, value, query.page.descending)
    at, page = cut(chosen, query.page)
    if claims is None:
        claims = await claims_of(rt, list(page))
    rows = await asyncio.to_thread(connector_rows_for, rt, list(page), grants, index, lag, claims)
    return {"connectors": rows, "matching": len(chosen), "total": readable, "at": at}


def _filtered(rt: Runtime, names: Sequence[str], grants: Grants, query: ListQuery) -> tuple[int, list[str]]:
    """How many connectors the principal may read, and those of them the filter keeps, by name."""
    readable = [name for name in names if grants.allows("read", name)]
    chosen = readable
    if query.connector is not None:
        chosen = [name for name in chosen if name == query.connector]
    if needle := query.page.needle:
        chosen = [name for name in chosen if needle in name.casefold()]
    if query.kind is not None:
        chosen = [name for name in chosen if connector_kind(rt, name) == query.kind]
    chosen.sort(key=natural_name, reverse=query.page.descending and query.page.sort == "name")
    return len(readable), chosen


def _column(
    rt: Runtime,
    index: HistoryIndex | None,
    lag: SinkLagSnapshot | None,
    claims: dict[str, dict[str, Any] | None] | None,
    sort: str,
) -> Callable[[str], Any]:
    """A connector's value in the sorted column, as the page's row shows it."""
    if sort == "kind":
        return lambda name: connector_kind(rt, name)
    if sort == "state":
        return lambda name: connector_state(rt, name)["state"]
    if sort == "last":
        last = last_changes(index)

        def newest_first(name: str) -> int | None:
            change = last.get(name, (None, 0))[0]
            return None if change is None else -change.time_ms

        return newest_first
    if sort == "claim":
        found = claims or {}
        return lambda name: (found.get(name) or {}).get("owner")
    lags = sink_lags(lag)
    if sort == "lag":
        return lambda name: total_lag(name, connector_kind(rt, name), lags)
    return lambda name: partition_count(rt, name, connector_kind(rt, name), lags)
