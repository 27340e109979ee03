"""What a transfer did: per destination (``ApplyResult``) and as a whole (``TransferReport``).

Both are dataclasses with named fields, not tuples: the CLI prints them, ``--json`` serialises
them, and a destination answering ``(diff, written, notes)`` in the wrong order would go unnoticed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What a destination planned and (unless a dry run) wrote."""

    diff: dict[str, Any]
    """The plan: ``formats.diff.Diff.as_dict`` (entries per connector and counts)."""
    written: int
    """Records actually written (0 for a dry run or when nothing changed)."""
    notes: list[str] = field(default_factory=list)
    """What the operator should know about the destination (replaced damaged file, not existing yet...)."""
    unreadable_values: int = 0
    """Of the records written (or, in a dry run, to be written), how many carry a value Connect cannot
    read back (only with ``--malformed keep``)."""


@dataclass(slots=True)
class TransferReport:
    source: str
    destination: str
    dry_run: bool
    read: int
    """Records read from the source."""
    selected: int
    """Records offered to the destination: selected by the options, plus ``--prune``'s tombstones."""
    written: int
    diff: dict[str, Any]
    notes: list[str]
    unreadable_values: int = 0
    """Values Connect cannot read back among the records written (``--malformed keep``)."""

    def changes(self) -> list[dict[str, Any]]:
        """The diff's entries that change something (what was, or would be, written)."""
        entries: list[dict[str, Any]] = self.diff["entries"]
        return [e for e in entries if e["status"] != "unchanged"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.source,
            "to": self.destination,
            "dry_run": self.dry_run,
            "read": self.read,
            "selected": self.selected,
            "written": self.written,
            "unreadable_values": self.unreadable_values,
            "notes": self.notes,
            "diff": self.diff,
        }
