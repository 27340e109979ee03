"""The response bodies the OpenAPI document declares, for the bodies routes assemble themselves.

Bodies the service layer already declares (``ConnectorOffset``, ``ClaimBody``, ``Readiness``,
``Change``, ``RecordsExport``, ...) are used as they are (``emulator.server.openapi.schema_type``
mirrors them); these are the envelopes the routes put around them, written the way the routes
build them. A test checks real answers against the document (tests/integration/test_openapi_document.py).

``typing_extensions.TypedDict`` because pydantic builds schemas only from that one on Python 3.11.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from emulator.history.files import Damage
from emulator.history.query import Change
from emulator.model.offsets import ConnectorOffset
from emulator.service.results import DroppedCommit, PlannedGroupChangeBody, PlannedRecordBody


class Offsets(TypedDict):
    """Connect's ``ConnectorOffsets``: every partition of the connector with its offset."""

    offsets: list[ConnectorOffset]


class Modified(TypedDict):
    """Connect's ``Message`` after PATCH/DELETE; ``dropped`` (ours) lists partitions whose commit
    carried a stale sequence and was not applied."""

    message: str
    dropped: NotRequired[list[DroppedCommit]]


class DryRun(TypedDict):
    """``?dry_run=true`` (ours): what would be written, nothing written. Source connectors list log
    records (key and value as text, with their Kafka partition); sinks list consumer-group changes.
    ``dropped``: the partitions the write would drop for a stale commit sequence, as ``Modified``."""

    message: str
    dry_run: Literal[True]
    records: list[PlannedRecordBody | PlannedGroupChangeBody]
    dropped: NotRequired[list[DroppedCommit]]


class Message(TypedDict):
    message: str


class Alive(TypedDict):
    status: Literal["ok"]


class NotReadyBody(TypedDict):
    """503 from ``/readyz``: Connect's error body, plus the read progress of ``Readiness``."""

    error_code: int
    message: str
    ready: bool
    error: str | None
    records_read: int
    partitions_at_end: int
    partitions: int
    positions: dict[str, int]
    end_offsets: dict[str, int]
    connect_cluster: NotRequired[dict[str, Any]]
    unreachable: NotRequired[str]
    starting: NotRequired[bool]
    """True while the log cannot be opened yet (``emulator.server.starting``): nothing read so far."""


class HistoryPage(TypedDict):
    """A connector's changes from the archive, newest first; ``truncated`` says older ones exist."""

    order: Literal["newest_first"]
    changes: list[Change]
    truncated: bool
    next: NotRequired[str]
    """With ``truncated``: give it as ``before`` for the next (older) page."""
    damaged_files: list[Damage]
    warning: NotRequired[str]
    """Present when the archive may lack this daemon's latest writes (the log's reader or the
    archiver did not confirm them in time)."""


class RollbackChange(TypedDict):
    """One record a rollback writes (or would write)."""

    action: Literal["restore", "change", "delete"]
    partition: dict[str, Any] | None
    current_offset: Any
    target_offset: Any
    key: str
    current_value: str | None
    target_value: str | None
    kafka_partition: int


class Rollback(TypedDict):
    message: str
    dry_run: bool
    to: str
    to_ms: int
    epoch: NotRequired[int]
    """The ``epoch`` asked for, if one was."""
    changes: list[RollbackChange]
    damaged_files: list[Damage]
    warning: NotRequired[str]
    """Present when the state was rebuilt from a damaged archive (records skipped): it may never have
    existed. The write is then refused (409 ``history_damaged``) unless ``allow_damaged=true``."""


class HistoryStatus(TypedDict):
    """The history archiver's state and counters."""

    directory: str
    log: str
    mode: Literal["writing", "reading-back", "read-only", "stalled", "failed"]
    writer_gone: bool
    """Read-only, and no process holds the archive's writer lock any more: this daemon takes the archive
    over within a second (``reading-back``, then ``writing``); one an earlier version named only at a restart."""
    failure: str | None
    stalled_s: float | None
    epoch: int
    queued_records: int
    records_archived: int
    records_skipped_replay: int
    records_not_archived: int
    write_errors: int
    last_error: str | None
    files_closed: int
    files_folded_by_retention: int
    epochs_started: int
    held_records_dropped: int
    backpressure_waits: int
    backpressure_s: float
    yielded_to_requests_s: float
    recovered_files: list[str]
    warnings: list[str]
    """What the operator must know although the daemon serves: that no process archives the log now
    (``writer_gone``: a restart takes the archive over), each archive file of a newer format
    (by name: none of its records are read), and each epoch begun since the start because the log no
    longer holds records the archive holds (lost acknowledged writes, a re-created or restored log),
    and how to see the values from before (``as_of=now&epoch=E``)."""
    retention_s: float | None
    rotate_bytes: int
    rotate_interval_s: float | None


class DiffEntry(TypedDict):
    """One record of an import's diff against the live log."""

    connector: str | None
    partition: dict[str, Any] | None
    key: str | None
    status: Literal["added", "changed", "removed", "unchanged"]
    old: str | None
    new: str | None


class Diff(TypedDict):
    summary: dict[str, int]
    """Counts per status, always complete."""
    connectors: dict[str, dict[str, int]]
    entries: list[DiffEntry]
    entries_omitted: int
    """Entries left out by ``diff_limit``."""


class Imported(TypedDict):
    message: str
    dry_run: bool
    written: int
    diff: Diff
