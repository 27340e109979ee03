"""Which read a daemon that is not ready yet waits for, from its readiness body (``/readyz``,
``/status``): one wording for ``/readyz``'s message and ``connect-offsets status``'s reason line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

READING_THE_LOG = "Reading the offsets log to its end"


def still_reading(body: Mapping[str, Any], counts: bool = False) -> str:
    """The worker's log, Connect's config/status topics, or connectors' own offsets topics (naming the
    first, and its last failure if it has one). ``counts``: the log's read so far too (records read,
    partitions at their end), as an operator at a terminal wants it."""
    partitions_at_end, partitions = body.get("partitions_at_end", 0), body.get("partitions", 0)
    if partitions_at_end < partitions or body.get("error"):
        return _log(body) if counts else READING_THE_LOG
    cluster = body.get("connect_cluster")
    if cluster is not None and not cluster.get("ready", True):
        return "Reading the Connect cluster's config and status topics to their end"
    waiting = [
        t for t in body.get("connector_offsets_topics", {}).get("topics", []) if t["connectors"] and not t["ready"]
    ]
    if not waiting:
        return _log(body) if counts else READING_THE_LOG
    first = waiting[0]
    why = f" (last attempt: {first['error']})" if first.get("error") else ""
    return (
        f"Reading {len(waiting)} connector offsets topic(s) to their end, e.g. '{first['topic']}' of "
        f"{', '.join(first['connectors'])}{why}"
    )


def _log(body: Mapping[str, Any]) -> str:
    return (
        f"{READING_THE_LOG}: {body.get('records_read', 0):,} records read, "
        f"{body.get('partitions_at_end', '?')}/{body.get('partitions', '?')} partitions at their end"
    )
