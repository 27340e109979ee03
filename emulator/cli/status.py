"""``status``: the daemon's health at a terminal, one line per part, from ``GET /status``.

Operators beside a Connect cluster ask "is it serving, is it behind, is anything failing" far more
often than they read the JSON; the exit code answers the first for scripts (0 ready, 1 not ready),
``--json`` prints the daemon's whole answer.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from emulator.cli.common import EXIT_OK, EXIT_REFUSED, add_client_options, emit
from emulator.client.errors import NotReadyError
from emulator.client.http import OffsetsClient
from emulator.codec.shown import shown_text
from emulator.model.readiness import still_reading


def register(sub: Any) -> None:
    p = sub.add_parser(
        "status", help="the daemon's health: ready or why not, lag, reader, writes, history (exit 1 when not ready)"
    )
    add_client_options(p)
    p.set_defaults(handler=run_status)


STATUS_TIMEOUT_S = 10.0
"""``status``'s wait for the answer unless ``--timeout`` says otherwise: the daemon answers it from
what it holds in memory (no log or broker round trip), in milliseconds; one that takes 10 s has a
blocked event loop, which is the answer a health check wants, not after 90 s."""


def run_status(args: argparse.Namespace) -> int:
    with OffsetsClient(args.settings.url, timeout_s=args.settings.timeout or STATUS_TIMEOUT_S) as client:
        url = client.url
        try:
            body = client.status()
        except NotReadyError as exc:  # its storage is not open yet: it answers, but has no status to give
            if exc.not_a_daemon:  # a proxy's own 503, say: no daemon answered at all
                raise
            body = {"ready": False, "error_code": exc.status, "message": exc.message}
    emit(args, body, lambda: status_text(url, body))
    return EXIT_OK if body.get("ready") else EXIT_REFUSED


def status_text(url: str, status: Mapping[str, Any]) -> str:
    """The lines an operator reads; a part the daemon did not report (an older daemon, another
    backend) is left out rather than shown as zero."""
    lines = [f"{url}: {'ready' if status.get('ready') else 'NOT READY'}"]
    why = status.get("unreachable") or status.get("error") or str(status.get("message", "")).removeprefix("Not ready: ")
    if not why and not status.get("ready") and "records_read" in status:
        reading = still_reading(status, counts=True)  # a replay, as /readyz words it, with its progress
        why = reading[:1].lower() + reading[1:]
    if why:
        lines.append(f"  why: {shown_text(why)}")
    rows = [
        ("log", status.get("log")),
        ("read", _read(status)),
        ("reader", _reader(status.get("reader"))),
        ("view", _view(status.get("view"), status.get("live_keys"))),
        ("writes", _writes(status.get("writes"))),
        ("history", _history(status.get("history"))),
        ("compaction", _compaction(status.get("compaction"))),
        ("claims", _claims(status)),
        ("connect", _parts_ready(status.get("connect_cluster"))),
        ("kip-618", _parts_ready(status.get("connector_offsets_topics"))),
        ("security", _security(status.get("security"))),
    ]
    lines += [f"{name:<11} {text}" for name, text in rows if text]
    # The daemon's own (e.g. a log that lost acknowledged writes: ready, but serving older values),
    # then the security settings'.
    warnings = list(status.get("warnings") or []) + list((status.get("security") or {}).get("warnings") or [])
    lines += [f"warning: {shown_text(str(w))}" for w in warnings]
    return "\n".join(lines)


def _n(count: int, thing: str) -> str:
    """``1 record``, ``2 records``."""
    return f"{count:,} {thing}" + ("" if count == 1 else "s")


def _read(status: Mapping[str, Any]) -> str | None:
    if "records_read" not in status:
        return None
    text = (
        f"{_n(status['records_read'], 'record')} read; {status.get('partitions_at_end', '?')} of "
        f"{status.get('partitions', '?')} partitions at their end"
    )
    return text if status.get("lag_total") is None else f"{text}; lag {status['lag_total']:,}"


def _reader(reader: Mapping[str, Any] | None) -> str | None:
    if not reader:
        return None
    parts = [
        "alive" if reader.get("alive") else "STOPPED",
        f"last look {reader.get('last_poll_at') or 'never'}",
        f"last records {reader.get('last_records_at') or 'never'}",
        f"{reader.get('records_dropped', 0):,} dropped",
    ]
    if reader.get("last_error"):
        parts.append(f"last error {reader.get('last_error_at')}: {reader['last_error']}")
    return "; ".join(parts)


def _view(view: Mapping[str, Any] | None, live_keys: int | None) -> str | None:
    if not view:
        return None
    parts = [
        _n(live_keys or 0, "live key"),
        f"{_n(view.get('records_applied', 0), 'record')} applied "
        f"({_n(view.get('tombstones_applied', 0), 'tombstone')})",
        _n(view.get("unparseable_values", 0), "unparseable value"),
        _n(view.get("skipped_keys_total", 0), "key") + " skipped",
    ]
    return "; ".join(parts)


def _writes(writes: Mapping[str, Any] | None) -> str | None:
    if not writes:
        return None
    mean = "" if writes.get("mean_ms") is None else f", mean {writes['mean_ms']:g} ms"
    text = (
        f"{writes.get('writes', 0):,} ({_n(writes.get('records', 0), 'record')}){mean}; "
        f"{writes.get('slow_writes', 0):,} held 1 s or more"
    )
    if writes.get("last_slow_at"):
        text += f", the last at {writes['last_slow_at']} ({writes.get('last_slow_s')} s)"
    return text


def _history(history: Mapping[str, Any] | None) -> str | None:
    if not history:
        return None
    if not history.get("enabled"):
        return "off (--no-history)"
    text = (
        f"{history.get('mode', '?')}; {history.get('records_archived', 0):,} archived, "
        f"{history.get('queued_records', 0):,} queued"
    )
    if history.get("epochs_started"):
        text += f"; epoch {history.get('epoch')}, begun since the start (see the warning)"
    if history.get("failure"):
        text += f"; FAILED: {history['failure']}"
    elif history.get("last_error"):
        text += f"; last error: {history['last_error']}"
    return text


def _claims(status: Mapping[str, Any]) -> str | None:
    if "claims_seen" not in status:
        return None
    seen = status["claims_seen"]
    count = "not known yet" if seen is None else _n(seen, "connector") + " claimed"
    return f"{count} (as last seen; list them: connect-offsets claims)"


def _compaction(compaction: Mapping[str, Any] | None) -> str | None:
    if not compaction:
        return None
    every = compaction.get("interval_s")
    every_text = f"{every:g} s" if isinstance(every, int | float) else str(every)
    text = f"checked every {every_text}; {compaction.get('compactions', 0):,} so far"
    if compaction.get("last_at"):
        text += (
            f", the last at {compaction['last_at']} ({compaction.get('last_records_before')} → "
            f"{compaction.get('last_records_after')} records)"
        )
    if compaction.get("left_to_another_process"):
        text += "; left to another process"
    if compaction.get("last_error"):
        text += f"; last error: {compaction['last_error']}"
    return text


def _parts_ready(part: Mapping[str, Any] | None) -> str | None:
    if not part:
        return None
    return "read to their end" if part.get("ready") else "still reading, or failing (--json shows which)"


def _security(security: Mapping[str, Any] | None) -> str | None:
    if not security:
        return None
    auth = ", ".join(security.get("authentication") or []) or "?"
    return f"authentication {auth}; TLS {'on' if security.get('tls') else 'off'}"
