"""What one write request did, for the audit line the server logs when the request ends.

The server opens an ``AuditEvent`` per modifying request (``emulator.server.audit``) and logs it once,
with the principal, the client's address, the status and the error kind, whatever the outcome. The
layers that learn *what* the request touched (the partitions, the records written, stale commits
dropped, the claim's epoch) add it here through ``note_*`` while the request runs, the same way
``current_principal`` carries who made it: a context variable, so no parameter is threaded through
every call, and a call made outside a request (tests, tools) notes into nothing.

A single request can name a great many partitions (a DELETE of a connector with 100,000 of them, an
import), so the event keeps the count of every partition but lists only the first ``MAX_LISTED``: an
audit line stays one readable line.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from emulator.codec.jackson_writer import at_any_depth

MAX_LISTED = 20
"""Partitions listed by name in one audit line; the rest are counted."""

MAX_LISTED_CHARS = 400
"""A listed partition longer than this (as compact JSON) is listed by its start and its length: one
partition of 2 MB made a 4 MB audit line, which log shippers cut or drop — and the line with it."""


@dataclass(slots=True)
class AuditEvent:
    """One modifying request: what it was asked to do, and what it reported doing."""

    operation: str
    """``PATCH``, ``DELETE``, ``rollback``, ``import``, ``claim``, ``release`` (or ``METHOD /route``)."""
    connector: str | None
    dry_run: bool
    partitions: list[str] = field(default_factory=list)
    """The first ``MAX_LISTED`` partitions touched (source: the partition map; sink: topic and partition),
    each as its compact JSON text (``json_text``), shortened by ``listed``: always a string, so a log
    collector's field keeps one type whether or not a partition was too long to list whole."""
    partition_count: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    """Anything else worth an auditor's eye: records written, commits dropped, a claim's epoch."""

    def note_partitions(self, partitions: Iterable[Any]) -> None:
        for partition in partitions:
            self.partition_count += 1
            if len(self.partitions) < MAX_LISTED:
                self.partitions.append(listed(json_text(partition)))

    def note(self, details: Mapping[str, Any]) -> None:
        self.details.update(details)


def listed(value: Any) -> Any:
    """``value`` as an audit line lists it: itself, or the start of its JSON text when too long."""
    text = value if isinstance(value, str) else json_text(value)
    if len(text) <= MAX_LISTED_CHARS:
        return value
    return f"{text[: MAX_LISTED_CHARS // 2]}… ({len(text):,} characters)"


def json_text(value: Any) -> str:
    """``value`` as compact JSON text (how the audit line lists a partition), at any depth."""
    return at_any_depth(_compact_json, value)


_compact_json = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"), default=str)


current_audit: ContextVar[AuditEvent | None] = ContextVar("connect_offsets_audit", default=None)
"""The request's event, set by the server for modifying requests only; None elsewhere."""


def note_partitions(partitions: Iterable[Any]) -> None:
    """Record the partitions the current request touches (no-op outside an audited request)."""
    event = current_audit.get()
    if event is not None:
        event.note_partitions(partitions)


def note(**details: Any) -> None:
    """Record details of the current request (no-op outside an audited request)."""
    event = current_audit.get()
    if event is not None:
        event.note(details)
