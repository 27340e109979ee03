"""The offsets history as rows for Spark's ``connect-offsets`` batch source (``history=true``).

Read through the daemon's history route rather than the archive files, so executors on other
machines see exactly what the daemon serves (and files the daemon's host alone can read stay its).
Options: ``url``, credentials (``token``, ``ca``, …) and ``retryFor``, resolved as every source
resolves them (``emulator.spark.options``: ``CONNECT_OFFSETS_URL`` and the like when left out),
``connector`` (default: every connector the daemon lists), ``partition`` (JSON
map), ``from`` / ``to`` (ISO-8601, epoch ms or ``now-1h``), ``limit`` (per connector: its newest changes;
left out, every change, read a page at a time). Rows oldest first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from emulator.client.errors import ApiError, NotFoundError, UnaddressableConnector
from emulator.client.history import HistoryClient
from emulator.codec.surrogates import escape_in_json
from emulator.model.times import parse_time_ms
from emulator.spark.options import DaemonAccess, OptionError, int_option, skipped_for_its_name

SCHEMA = (
    "connector string, time_ms long, kafka_partition int, kafka_offset long, origin string, operation string, "
    "partition string, offset string, tombstone boolean, key string, value string"
)


def _compact(value: Any) -> str | None:
    """Compact JSON for a Spark string column, lone surrogates escaped (``emulator.codec.surrogates``)."""
    return None if value is None else escape_in_json(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _partition(options: Mapping[str, str]) -> dict[str, Any] | None:
    raw = options.get("partition")
    if not raw:
        return None
    try:
        partition = json.loads(raw)
    except ValueError:
        partition = None
    if not isinstance(partition, dict):
        raise OptionError(f'option partition must be a JSON object such as {{"filename":"/data/a.txt"}}, got {raw!r}')
    return partition


PAGE = 100_000
"""Changes per request when no ``limit`` is given: the route's largest page."""


def _changes(
    client: HistoryClient, name: str, partition: dict[str, Any] | None, options: Mapping[str, str], limit: int | None
) -> list[dict[str, Any]]:
    """The connector's changes, oldest first: the newest ``limit`` of them, or without a limit all of
    them, a page at a time (the route answers the newest 1,000 by default, and a Spark user reading
    "the history" expects all of it, not a silent cut). Each next page is the one the page before
    names (``next``); from a daemon that names none, it ends at the oldest time of the one before,
    inclusive, and changes seen already (same coordinates) are left out."""
    to_time = options.get("to")
    before: str | None = None
    seen: set[tuple[Any, ...]] = set()
    newest_first: list[dict[str, Any]] = []
    while True:
        page = client.history(
            name,
            partition=partition,
            from_time=options.get("from"),
            to_time=to_time,
            limit=limit or PAGE,
            before=before,
        )
        fresh = [c for c in page["changes"] if _coordinates(c) not in seen]
        seen.update(_coordinates(c) for c in fresh)
        newest_first.extend(fresh)
        if limit is not None or not page.get("truncated") or not page["changes"]:
            break
        if page.get("next"):
            before = page["next"]
            continue
        if not fresh:
            raise OptionError(
                f"connector {name} has more than {PAGE} changes within one millisecond "
                f"({page['changes'][-1]['time']}); read it in parts with options from and to"
            )
        to_time = str(page["changes"][-1]["time_ms"])
    if page.get("order", "newest_first") == "newest_first":
        newest_first.reverse()
    return newest_first


def _coordinates(change: Mapping[str, Any]) -> tuple[Any, ...]:
    return (change.get("epoch"), change["kafka_partition"], change["kafka_offset"], change["time_ms"])


def check(options: Mapping[str, str]) -> tuple[dict[str, Any] | None, int | None]:
    """The options' partition and limit, or ``OptionError``: called where the reader is built (the
    driver), so a bad option fails the query there, not in an executor's stack trace."""
    limit = int_option(options, "limit", None, 1)
    if limit is not None and limit > PAGE:  # the route's bound
        raise OptionError(f"option limit must be at most {PAGE} (leave it out to read every change), got {limit}")
    for name in ("from", "to"):  # the daemon resolves them; checked here so the error names the option
        if options.get(name):
            try:
                parse_time_ms(options[name])
            except ValueError as exc:
                raise OptionError(f"option {name}: {exc}") from None
    return _partition(options), limit


def rows(options: Mapping[str, str]) -> Iterator[tuple[Any, ...]]:
    partition, limit = check(options)
    access = DaemonAccess.of(options)
    with HistoryClient(access.url, credentials=access.credentials, retry_for_s=access.retry_for_s) as client:
        names = [options["connector"]] if options.get("connector") else client.connectors()
        for name in names:
            try:
                changes = _changes(client, name, partition, options, limit)
            except NotFoundError:
                if options.get("connector"):
                    raise
                continue  # listed by a Connect cluster without any history yet
            except (ApiError, UnaddressableConnector) as exc:
                if options.get("connector") or not skipped_for_its_name(exc, name, "connect-offsets history"):
                    raise
                continue
            for change in changes:
                yield (
                    name,
                    change["time_ms"],
                    change["kafka_partition"],
                    change["kafka_offset"],
                    change["origin"],
                    change.get("operation"),
                    _compact(change.get("partition")),
                    _compact(change.get("offset")),
                    change.get("value") is None,
                    change.get("key"),
                    change.get("value"),
                )
