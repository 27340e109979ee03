"""What the console's pages show, assembled from the service layer's public reads.

Nothing here decides a rule: existence, kind, the STOPPED rule and claims are the services' and
the Connect cluster's answers; the console only puts them side by side. Every value that may be
unknown is ``None`` and shown as such, never guessed (a connector's state without a Connect
cluster is ``unknown``; a sink's lag without a Connect cluster's config topic too).
"""

from __future__ import annotations

import asyncio
from typing import Any

from emulator.codec.values import CodecError, parse_offset
from emulator.model.claims import Claim
from emulator.model.errors import ClaimNotFound, OffsetsError
from emulator.model.times import format_time_ms
from emulator.server.auth.scopes import Grants
from emulator.server.deps import Runtime
from emulator.server.sink_lag import SinkLag, SinkLagSnapshot
from emulator.server.ui.history_index import Change, HistoryIndex

CLAIMS_READ_S = 2.0
"""How long a console page waits for the claims topic's end: the page refreshes every 2 s, and a
stalled broker should show up in the claim's cell, not hold the page for ``--write-timeout``."""

STATES = ("RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING", "DESTROYED")


def connector_state(rt: Runtime, connector: str) -> dict[str, Any]:
    """The Connect cluster's view: what the worker last reported (``status-connector-``), else the
    target state; ``unknown`` without a cluster. ``stopped`` is Connect's rule for changing offsets
    (STOPPED with zero tasks), so the page can say before a change that it will be refused."""
    if rt.cluster is None:
        return {"state": "unknown", "target": None, "tasks": None, "stopped": None}
    snap = rt.cluster.snapshot(connector)
    state = snap.status.state if snap.status is not None else None
    if state is None:
        state = snap.target_state if snap.target_state in ("PAUSED", "STOPPED") else "unknown"
    return {
        "state": state,
        "target": snap.target_state,
        "tasks": snap.task_count,
        "stopped": rt.cluster.is_stopped(connector),
    }


def connector_kind(rt: Runtime, connector: str) -> str:
    """Sink or source as the Connect cluster's config says; without one, the log only holds sources."""
    kind = rt.cluster.kind(connector) if rt.cluster is not None else None
    return kind or "source"


def change_dict(change: Change | None) -> dict[str, Any] | None:
    if change is None:
        return None
    body: dict[str, Any] = {
        "time": format_time_ms(change.time_ms),
        "time_ms": change.time_ms,
        "origin": change.origin,
        "operation": change.operation,
        "principal": change.principal,
        "remote": change.remote,
        "epoch": change.epoch,
        "kafka_partition": change.kafka_partition,
        "kafka_offset": change.kafka_offset,
    }
    if change.value is None:
        body["offset"] = None
        body["tombstone"] = True
    else:
        try:
            body["offset"] = parse_offset(change.value)
        except CodecError as exc:
            body["offset"] = None
            body["value_problem"] = str(exc)
    return body


def claim_dict(claim: Claim) -> dict[str, Any]:
    return {"owner": claim.owner, "epoch": claim.epoch, "claimed_at": format_time_ms(claim.claimed_at_ms)}


async def claim_of(rt: Runtime, connector: str) -> dict[str, Any] | None:
    try:
        claim = await rt.claims.current(connector, CLAIMS_READ_S)
    except ClaimNotFound:
        return None
    except OffsetsError as exc:  # e.g. a log that cannot store claims: say so in the row
        return {"error": exc.message}
    return claim_dict(claim)


async def claims_of(rt: Runtime, connectors: list[str]) -> dict[str, dict[str, Any] | None]:
    """``claim_of`` for every row of the connectors page, from one read of the claims (with a lookup per
    connector, 10,000 connectors held the event loop ~1 s per refresh: benchmarks/RESULTS.md, "Console:
    the connectors page")."""
    try:
        claims = await rt.claims.current_many(connectors, CLAIMS_READ_S)
    except OffsetsError as exc:
        return {name: {"error": exc.message} for name in connectors}
    return {name: None if name not in claims else claim_dict(claims[name]) for name in connectors}


async def sink_lag(lag: SinkLag | None) -> SinkLagSnapshot | None:
    """The metrics' cached sink lag (refreshed at most every 15 s; a broker call in a worker thread)."""
    return None if lag is None else await asyncio.to_thread(lag.snapshot)


def sink_lags(lag: SinkLagSnapshot | None) -> dict[str, list[int]]:
    """Each sink connector's lag per topic-partition, from the metrics' cached snapshot."""
    lags: dict[str, list[int]] = {}
    for p in lag.partitions if lag is not None else ():
        lags.setdefault(p.connector, []).append(p.lag)
    return lags


def partition_count(rt: Runtime, name: str, kind: str, lags: dict[str, list[int]]) -> int | None:
    """Source: the partitions in the offsets view; sink: the topic-partitions its group committed."""
    if kind == "source":
        return rt.view.partition_count(name)
    return len(lags[name]) if name in lags else None


def total_lag(name: str, kind: str, lags: dict[str, list[int]]) -> int | None:
    """A sink's lag over its topic-partitions; None for a source or while no number is known."""
    return sum(lags[name]) if kind == "sink" and name in lags else None


def last_changes(index: HistoryIndex | None) -> dict[str, tuple[Change | None, int]]:
    """Each connector's newest history row and its row count, once the index is built."""
    return index.last_changes() if index is not None and index.state().ready else {}


def change_counts(index: HistoryIndex | None, connector: str) -> dict[str, int]:
    """How many history rows each of the connector's partitions has, once the index is built."""
    return index.counts(connector) if index is not None and index.state().ready else {}


def connector_rows_for(
    rt: Runtime,
    readable: list[str],
    grants: Grants,
    index: HistoryIndex | None,
    lag: SinkLagSnapshot | None,
    claims: dict[str, dict[str, Any] | None],
) -> list[dict[str, Any]]:
    """One row per connector of the connectors page (``connector_list.py`` chooses which). Called on a
    worker thread: with 10,000 connectors the rows took 0.1–0.2 s of the interpreter, which on the
    event loop would hold every other request that long at each of the console's refreshes."""
    last = last_changes(index)
    lags = sink_lags(lag)
    rows = []
    for name in readable:
        kind = connector_kind(rt, name)
        change, records = last.get(name, (None, 0))
        rows.append(
            {
                "name": name,
                "kind": kind,
                **connector_state(rt, name),
                "partitions": partition_count(rt, name, kind, lags),
                "last_change": change_dict(change),
                "history_records": records,
                "claim": claims[name],
                "lag": total_lag(name, kind, lags),
                "can_write": grants.allows("write", name),
            }
        )
    return rows
