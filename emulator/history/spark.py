"""The offsets history as rows for Spark's ``connect-offsets`` batch source (``history=true``).

Read through the daemon's history route rather than the archive files, so executors on other
machines see exactly what the daemon serves (and files the daemon's host alone can read stay its).
Options: ``url``, credentials (``token``, ``ca``, …) and ``retryFor``, resolved as every source
resolves them (``emulator.spark.options``: ``CONNECT_OFFSETS_URL`` and the like when left out),
``connector`` (default: every connector the daemon lists), ``partition`` (JSON
map), ``from`` / ``to`` (ISO-8601, epoch ms or ``now-1h``), ``limit`` (per connector). Rows oldest first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from emulator.client.errors import NotFoundError
from emulator.client.history import HistoryClient
from emulator.codec.surrogates import escape_in_json
from emulator.spark.options import DaemonAccess, OptionError, int_option

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


def rows(options: Mapping[str, str]) -> Iterator[tuple[Any, ...]]:
    partition = _partition(options)
    limit = int_option(options, "limit", None, 1)
    access = DaemonAccess.of(options)
    with HistoryClient(access.url, credentials=access.credentials, retry_for_s=access.retry_for_s) as client:
        names = [options["connector"]] if options.get("connector") else client.connectors()
        for name in names:
            try:
                page = client.history(
                    name, partition=partition, from_time=options.get("from"), to_time=options.get("to"), limit=limit
                )
            except NotFoundError:
                if options.get("connector"):
                    raise
                continue  # listed by a Connect cluster without any history yet
            changes = page["changes"]
            if page.get("order") == "newest_first":
                changes = list(reversed(changes))
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
