"""History routes (ours; Connect has no history): changes over time, past states, rollback.

- ``GET /connectors/{c}/offsets/history?partition=<JSON>&from=<time>&to=<time>&limit=<n>``: changes,
  newest first;
- ``GET /connectors/{c}/offsets?as_of=<time>`` (in routes_offsets, delegating here): Connect's GET
  shape, as it was then;
- ``POST /connectors/{c}/offsets/rollback?to=<time>&dry_run=true``: write the diff back to that state;
- ``GET /history/status``: the archiver's health and counters.

Times are ISO-8601 (naive = UTC), epoch milliseconds or ``now-<duration>`` (by the daemon's clock;
``emulator.model.times``). The reads are ``emulator.service.history``'s,
the rollback is ``emulator.service.records``'s.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from emulator.codec.strict_json import json_type
from emulator.history.archive import HistoryArchive
from emulator.history.files import ReadReport
from emulator.history.query import DEFAULT_LIMIT, not_in_history, parse_cursor
from emulator.model.errors import HistoryDisabled, InvalidRequest
from emulator.model.times import format_time_ms, parse_time_ms
from emulator.server.audit import note_rollback
from emulator.server.deps import Runtime, RuntimeDep
from emulator.server.errors import HISTORY_WARNING_HEADER
from emulator.server.json_answer import json_answer
from emulator.server.openapi import documented
from emulator.server.openapi_bodies import HistoryPage, HistoryStatus, Rollback
from emulator.server.routes.params import check_connector_path, refuse_store_on_write
from emulator.service.bodies import load_json
from emulator.service.bulk import bulk_pass
from emulator.service.connector_stores import merged_offsets

router = APIRouter(tags=["history"], dependencies=[Depends(check_connector_path)])


_TIME = "ISO-8601, epoch ms or now-<duration> (e.g. now-1h, by the daemon's clock)"


def history_archive(request: Request) -> HistoryArchive:
    archive: HistoryArchive | None = getattr(request.app.state, "history", None)
    if archive is None:
        raise HistoryDisabled("The offsets history is disabled on this daemon (it was started with --no-history)")
    return archive


def time_param(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_time_ms(value)
    except ValueError as exc:
        raise InvalidRequest(f"query parameter '{name}': {exc}") from exc


def partition_param(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    partition = load_json(value, "query parameter 'partition'")
    if not isinstance(partition, dict):
        raise InvalidRequest(f"query parameter 'partition' must be a JSON object, got {json_type(partition)}")
    return partition


@router.get(
    "/connectors/{connector}/offsets/history",
    summary="A connector's offset changes from the archive, newest first (survives compaction)",
    **documented(HistoryPage, 400, 404, 503),
)
async def offsets_history(
    connector: str,
    request: Request,
    rt: RuntimeDep,
    partition: Annotated[str | None, Query(description="URL-encoded JSON partition map")] = None,
    from_: Annotated[str | None, Query(alias="from", description=f"{_TIME}, inclusive")] = None,
    to: Annotated[str | None, Query(description=f"{_TIME}, inclusive")] = None,
    limit: int = DEFAULT_LIMIT,
    before: Annotated[
        str | None, Query(description="the `next` of the page before: its older changes (a page past `truncated`)")
    ] = None,
    store: str | None = None,
) -> Response:
    """``store`` (a connector with its own offsets topic): the changes of its own topic (``connector``,
    the default) or of the worker's (``worker``). A page holds up to ``limit`` (100,000) changes:
    encoded off the event loop."""
    archive = archive_choice(rt, connector, store, history_archive(request))[0]
    from_ms, to_ms = time_param("from", from_), time_param("to", to)
    if from_ms is not None and to_ms is not None and from_ms > to_ms:
        # An empty page would read as "no changes then" (`from=now&to=now-1h` is easily written backwards).
        raise InvalidRequest(
            f"query parameter 'from' is later than 'to' ({format_time_ms(from_ms)} > {format_time_ms(to_ms)}): "
            "no change can lie in that range; give the earlier time as 'from'"
        )
    page = await rt.history.changes(
        archive,
        connector,
        from_ms=from_ms,
        to_ms=to_ms,
        partition=partition_param(partition),
        limit=limit,
        before=None if before is None else parse_cursor(before),
    )
    return await json_answer(page.as_dict())


def epoch_param(value: int | None) -> int | None:
    if value is not None and not 0 <= value < 2**31:
        raise InvalidRequest(f"query parameter 'epoch' must be an epoch of the archive (0, 1, ...), got {value}")
    return value


async def offsets_as_of(
    request: Request, connector: str, as_of: str, rt: Runtime, store: str | None = None, epoch: int | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Connect's GET body as it was at ``as_of``, and the headers to send with it (damaged archive
    files are counted in one). For a connector with its own offsets topic, ``store`` picks as on a
    live GET (both archives, merged, by default). ``epoch``: that epoch's state alone."""
    archive = history_archive(request)
    at_ms = time_param("as_of", as_of)
    assert at_ms is not None
    epoch = epoch_param(epoch)
    archives = archive_choice(rt, connector, store, archive)
    pasts = [await rt.history.as_of(a, connector, at_ms, False, epoch) for a in archives]
    if not any(p.known for p in pasts):
        # Unknown then; while an archive may lack this daemon's writes, the 404 says so (it may not be).
        # So does a file that could not be read whole (a newer format, damage): its records may be there.
        behind = next((p for p in pasts if p.synced is False), pasts[0])
        unread = ReadReport(damaged=[d for p in pasts for d in p.report.damaged])
        raise not_in_history(
            f"Connector {connector} not found in the offsets history at or before {format_time_ms(at_ms)}",
            behind.synced,
            behind.unsynced_because,
            unread,
        )
    damaged = sum(p.report.damaged_file_count() for p in pasts)
    headers = {
        "X-Offsets-As-Of": format_time_ms(at_ms),
        "X-Offsets-History-Damaged-Files": str(damaged),
    }
    warnings = [w for w in (p.warning() for p in pasts) if w is not None]
    if damaged:  # the paths and problems are on the history page: a header value is ASCII
        warnings.insert(
            0,
            f"UNRELIABLE: {damaged} damaged history archive file(s) were read and records of them skipped, so these "
            "may not be the offsets at that time (the history route's damaged_files names them and what was "
            "skipped); a rollback to it is refused unless allow_damaged=true",
        )
    if warnings:  # the body is Connect's GET body: the warning a history page carries goes in a header
        headers[HISTORY_WARNING_HEADER] = "; ".join(warnings)  # ASCII: it names no connector
    # Building the body parses every key and value of the state: seconds for 150,000 partitions,
    # which on the event loop held every other request (a /healthz for 1.1 s per query).
    if len(pasts) == 1:
        return {"offsets": await asyncio.to_thread(pasts[0].offsets)}, headers
    connector_past, worker_past = pasts

    def merged() -> list[Any]:
        return merged_offsets(connector_past.offsets(), worker_past.offsets())

    return {"offsets": await asyncio.to_thread(merged)}, headers


def archive_choice(rt: Runtime, connector: str, store: str | None, worker: HistoryArchive) -> list[HistoryArchive]:
    """The archives to read for ``store``: the worker's, the connector topic's, or both (connector first)."""
    own = None if rt.source is None else rt.source.own_archive(connector, store)
    if own is None:
        return [worker]
    return [own] if store == "connector" else [own, worker]


@router.post(
    "/connectors/{connector}/offsets/rollback",
    summary="Roll a connector's offsets back to their state at a past time (dry_run=true shows the diff)",
    # no body, but every POST is sent as JSON (415 otherwise): the document says so, so a generated
    # client (or a fuzzer) sends the Content-Type the daemon requires
    openapi_extra={
        "requestBody": {
            "required": False,
            "description": "none: send Content-Type: application/json without a body",
            "content": {"application/json": {"schema": {"type": "object", "maxProperties": 0}}},
        }
    },
    **documented(Rollback, 400, 404, 409, 500, 503),
)
async def rollback_offsets(
    connector: str,
    request: Request,
    rt: RuntimeDep,
    to: Annotated[str, Query(description=f"{_TIME}; the answer gives the time used")],
    dry_run: bool = False,
    allow_damaged: Annotated[
        bool,
        Query(
            description="write the state rebuilt from a damaged archive all the same (it may never have existed; "
            "without this, such a rollback is refused with 409 history_damaged)"
        ),
    ] = False,
    epoch: Annotated[
        int | None,
        Query(
            description="the state at `to` in this epoch of the archive alone (an earlier epoch's, after the log "
            "was re-created or lost records); default: the newest epoch with records by then"
        ),
    ] = None,
) -> Response:
    """A state rebuilt from a damaged archive (records of damaged blocks skipped) is not written
    unless ``allow_damaged=true`` (409 ``history_damaged``); its dry run answers with a ``warning``."""
    refuse_store_on_write(request, "a rollback")
    archive = history_archive(request)
    at_ms = time_param("to", to)
    assert at_ms is not None
    result = await rt.records.rollback(archive, connector, at_ms, dry_run, allow_damaged, epoch_param(epoch))
    when = format_time_ms(at_ms) + (f" (epoch {epoch} of the archive)" if epoch is not None else "")
    changes = len(result.changes)
    warning = None
    if result.report.damaged:
        warning = (
            f"UNRELIABLE: the history archive is damaged, so the state rebuilt for {when} may be one that never "
            f"existed. {result.report.damage_summary()}"
        )
    if dry_run:
        message = f"Dry run: nothing was written. {changes} record(s) would roll {connector} back to {when}."
        if warning is not None:
            message += (
                f" {warning} The rollback itself is refused (409 history_damaged) unless allow_damaged=true: restore "
                "the damaged file(s) from a backup first, or set the offsets by hand."
            )
    elif changes:
        message = f"The offsets of {connector} were rolled back to their state at {when} ({changes} record(s))."
        if warning is not None:
            message += f" allow_damaged=true: written although {warning[len('UNRELIABLE: ') :]}"
    else:
        message = f"Nothing to roll back: the offsets of {connector} are as they were at {when}."
        if warning is not None:
            message += f" ({warning})"
    partitions = rt.log.partition_count

    def listed() -> list[dict[str, Any]]:
        """The audit notes and the changes listed: a pass each over every partition of the connector."""
        note_rollback(result.changes)
        return [c.as_dict(partitions) for c in result.changes]

    changes_listed = await bulk_pass(len(result.changes), listed)
    return await json_answer(  # one change per partition of the connector: encoded off the event loop
        {
            "message": message,
            "dry_run": dry_run,
            "to": format_time_ms(at_ms),
            "to_ms": at_ms,
            **({"epoch": epoch} if epoch is not None else {}),
            "changes": changes_listed,
            "damaged_files": result.report.damaged,
            **({"warning": warning} if warning is not None else {}),
        }
    )


@router.get("/history/status", summary="The history archiver's state and counters", **documented(HistoryStatus, 404))
async def history_status(request: Request) -> dict[str, Any]:
    return await asyncio.to_thread(history_archive(request).status)  # its warnings look at every file
