"""The audit line: one structured log line per modifying request, whatever its outcome.

Every request that may change something (any method but GET, HEAD and OPTIONS, on a route that
exists) is audited: PATCH and DELETE of offsets, rollbacks and imports, claims and releases, dry
runs included. The line names who (the principal and how it authenticated), from where (the client's
address), what (the operation, the connector, the partitions, dry run or not, and whatever the
handlers noted through ``emulator.model.audit``) and how it ended (status and error kind). It goes to
the logger ``emulator.audit`` at INFO, so an operator can route it apart from the access log.

A route added later is audited without anyone remembering to: operations not named in
``OPERATIONS`` are audited as ``METHOD /route/template``.

The same moment updates the per-connector write metrics. A connector gets its own label values only
if it exists (the request succeeded, or the view or the Connect cluster knows it): a client naming
connectors at random must not be able to create series at will, so those count under ``connector=""``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from emulator.codec.shown import shown_json, shown_name
from emulator.codec.surrogates import printable
from emulator.formats.diff import Change as DiffChange
from emulator.formats.diff import Diff
from emulator.history.rollback import RollbackChange
from emulator.model import audit
from emulator.model.audit import MAX_LISTED, AuditEvent, listed
from emulator.model.principal import Principal
from emulator.server.log_format import fields
from emulator.server.metrics import Metrics
from emulator.service.audit_notes import key_text
from emulator.service.results import ModifyResult

log = logging.getLogger("emulator.audit")

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

OPERATIONS: dict[tuple[str, str], str] = {
    ("PATCH", "/connectors/{connector}/offsets"): "PATCH",
    ("DELETE", "/connectors/{connector}/offsets"): "DELETE",
    ("POST", "/connectors/{connector}/offsets/rollback"): "rollback",
    ("POST", "/offsets/records"): "import",
    ("POST", "/connectors/{connector}/claim"): "claim",
    ("DELETE", "/connectors/{connector}/claim"): "release",
}
"""Operation names as the history archive's origins use them (``PATCH``, ``DELETE``, ``rollback``,
``import``), plus the claim routes."""

CLAIM_OPERATIONS = frozenset({"claim", "release"})

_TRUE = frozenset({"1", "true", "yes", "on", "t", "y"})


def operation_of(method: str, route: str) -> str:
    return OPERATIONS.get((method, route), f"{method} {route}")


def is_dry_run(query: dict[str, list[str]]) -> bool:
    """``dry_run`` as the routes read it (FastAPI's booleans)."""
    values = query.get("dry_run") or []
    return bool(values) and values[-1].strip().lower() in _TRUE


def result_of(event: AuditEvent, status: int, error_kind: str | None) -> str:
    """``ok``, ``dry_run``, or what went wrong: the error kind, else ``http_<status>``."""
    if status < 400:
        return "dry_run" if event.dry_run else "ok"
    return error_kind or f"http_{status}"


class Auditor:
    """Logs the audit line and counts the write; ``known`` tells whether a connector exists."""

    def __init__(self, metrics: Metrics | None, known: Callable[[str], bool]) -> None:
        self._metrics = metrics
        self._known = known

    def finish(
        self,
        event: AuditEvent,
        principal: Principal,
        status: int,
        error_kind: str | None,
        seconds: float,
    ) -> None:
        result = result_of(event, status, error_kind)
        if log.isEnabledFor(logging.INFO):  # the line and its fields are built only to be written
            self._log(event, principal, status, error_kind, seconds, result)
        self._count(event, status, error_kind, result)

    @staticmethod
    def _log(
        event: AuditEvent, principal: Principal, status: int, error_kind: str | None, seconds: float, result: str
    ) -> None:
        body: dict[str, Any] = {
            "event": "audit",
            "principal": principal.name,
            "mechanism": principal.mechanism,
            "remote": principal.remote,
            "operation": event.operation,
            "connector": event.connector,
            "dry_run": event.dry_run,
            "status": status,
            "result": result,
            "error_kind": error_kind,
            "partition_count": event.partition_count,
            "partitions": event.partitions,
            "duration_ms": round(seconds * 1000, 3),
            **_logged_details(event.details),
        }
        log.info(_text(event, principal, status, result), extra=fields(**body))

    def _count(self, event: AuditEvent, status: int, error_kind: str | None, result: str) -> None:
        metrics = self._metrics
        if metrics is None:
            return
        named = [event.connector] if event.connector else list(event.details.get("connectors", ()))
        labels = [self._label(c, status, event.dry_run) for c in named] or [""]
        for connector in labels:
            if event.operation in CLAIM_OPERATIONS:
                metrics.claims.labels(connector, event.operation, result).inc()
                continue
            metrics.writes.labels(connector, event.operation, result).inc()
            if error_kind == "fenced":
                metrics.fenced.labels(connector).inc()
        dropped = event.details.get("dropped_sequences")
        if isinstance(dropped, int) and dropped > 0 and not event.dry_run:  # a dry run drops nothing
            metrics.dropped_sequences.labels(labels[0]).inc(dropped)

    def _label(self, connector: str, status: int, dry_run: bool) -> str:
        """The connector as a metrics label when it exists, else ``""``: a series per name a client
        sends would let any writer grow the daemon's memory and Prometheus' series at will. A write that
        succeeded made its connector exist; a dry run did not (``?dry_run=true&create=true`` on a new
        name answers 200 and writes nothing)."""
        try:
            exists = (status < 400 and not dry_run) or self._known(connector)
        except Exception:  # a label decision must never fail a request
            exists = False
        # A name Connect's data may hold (half a surrogate pair) is no UTF-8: as a label it made every
        # scrape of /metrics fail (500), so it is counted under its escaped form (``\ud800``).
        return printable(connector) if exists else ""


def _text(event: AuditEvent, principal: Principal, status: int, result: str) -> str:
    """The line as people read it; the JSON format carries the same as fields."""
    # A connector name (or a principal's) is any text a client sends, refused requests' too: a newline in
    # it wrote a second, forged audit line. Names in Python's quoted form when not plain, partitions as
    # JSON with every unprintable character escaped (emulator.codec.shown), as the CLI shows them.
    name = shown_name(principal.name)
    who = name if principal.remote is None else f"{name} from {principal.remote}"
    target = f" {shown_name(event.connector)}" if event.connector else ""
    listed = ", ".join(shown_json(text) for text in event.partitions)  # compact JSON, shortened ones unescaped
    more = event.partition_count - len(event.partitions)
    partitions = f"{event.partition_count} partition(s)" + (
        f" [{listed}{f', +{more} more' if more else ''}]" if listed else ""
    )
    details = "".join(f" {k}={json.dumps(v, default=str)}" for k, v in sorted(_logged_details(event.details).items()))
    dry = " (dry run)" if event.dry_run else ""
    return f"{event.operation}{target}{dry} by {who}: {status} {result}, {partitions}{details}"


def _logged_details(details: dict[str, Any]) -> dict[str, Any]:
    """The details as the line shows them: a list (an import's connectors) by its first
    ``MAX_LISTED`` entries and a count, every value bounded (the metrics count from the whole)."""
    shown: dict[str, Any] = {}
    for key, value in details.items():
        if isinstance(value, (list, tuple)) and len(value) > MAX_LISTED:
            shown[key] = [listed(v) for v in value[:MAX_LISTED]]
            shown[f"{key}_count"] = len(value)
        elif isinstance(value, (list, tuple)):
            shown[key] = [listed(v) for v in value]
        else:
            shown[key] = listed(value) if isinstance(value, str) else value
    return shown


# ---- what the routes note (see emulator.model.audit) ------------------------------------------------
# A DELETE's and a rollback's partitions are noted by the service as it plans the write
# (``emulator.service.audit_notes``), so one that fails or times out is audited with them too.


def note_modification(result: ModifyResult) -> None:
    """A PATCH or DELETE's outcome: records written (or planned by a dry run), stale commits dropped."""
    audit.note(records=len(result.records))
    if result.dropped:
        audit.note(dropped_sequences=len(result.dropped))


def note_rollback(changes: Sequence[RollbackChange]) -> None:
    audit.note(records=len(changes))


def note_import(diff: Diff, written: int) -> None:
    changed = [e for e in diff.entries if e.status is not DiffChange.UNCHANGED]
    audit.note_partitions(e.partition if e.partition is not None else key_text(e.key) for e in changed)
    audit.note(connectors=diff.connectors(), records=len(diff.entries), written=written)
