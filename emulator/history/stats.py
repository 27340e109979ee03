"""The archiver's counters, shared by the queue, the archiver thread, the file writer and retention.

One object rather than counters per component, because ``HistoryArchive.status()`` reports them as
one health record and an operator reads them together ("records not archived" next to the last
error). Each counter has one writing component; readers tolerate a value a moment old.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ArchiveStats:
    records_archived: int = 0
    records_skipped_replay: int = 0
    batches: int = 0
    write_errors: int = 0
    records_not_archived: int = 0
    records_let_go: int = 0
    records_reread: int = 0
    files_closed: int = 0
    files_folded: int = 0
    epochs_started: int = 0
    held_dropped: int = 0
    backpressure_waits: int = 0
    backpressure_s: float = 0.0
    yielded_s: float = 0.0
    last_error: str | None = None
    recovered: list[str] = field(default_factory=list)
    epochs_begun: list[dict[str, Any]] = field(default_factory=list)
    """Each epoch this process started: ``epoch``, ``detected_at_ms``, ``reason`` and ``lost`` (per
    partition, offsets the archive holds that the log no longer has; empty unless the log was short),
    for the warnings of ``HistoryArchive.status()``."""

    def write_error(self, error: str) -> None:
        """Count a failed write, fsync or fold and remember it as the last error."""
        self.write_errors += 1
        self.last_error = error
