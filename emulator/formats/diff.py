"""What importing a set of raw records would change at a destination, per connector and partition.

Every transfer (import, export, migrate, the daemon's ``POST /offsets/records``) is planned as a diff
first: the dry run prints it, the real run writes exactly the records it marks as changes. Entries
are compared by raw key bytes, as Connect looks them up; the connector and partition shown are
only for people.
"""

from __future__ import annotations

import enum
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from emulator.codec.jackson_writer import at_any_depth
from emulator.codec.keys import KeyProblem
from emulator.codec.shown import shown_json, shown_name
from emulator.formats.model import KeyIndex, RawRecord, latest_per_key

__all__ = ["SHOWN_CHARS", "Change", "Diff", "DiffEntry", "compute_diff", "render_text", "shorten"]

UNPARSEABLE = "(keys Connect ignores)"
"""The group name for keys that are not ``[connector, {partition}]``."""


class Change(enum.StrEnum):
    ADDED = "added"
    CHANGED = "changed"
    REMOVED = "removed"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class DiffEntry:
    record: RawRecord
    status: Change
    old: bytes | None
    connector: str | None
    partition: dict[str, Any] | None

    @property
    def key(self) -> bytes:
        return self.record.key

    @property
    def new(self) -> bytes | None:
        return self.record.value

    def as_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "partition": self.partition,
            "key": _text(self.key),
            "status": self.status.value,
            "old": _text(self.old),
            "new": _text(self.new),
        }


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "backslashreplace")


@dataclass(slots=True)
class Diff:
    entries: list[DiffEntry]

    def records_to_write(self, write_all: bool = False) -> list[RawRecord]:
        """The records a real run writes: every change, or every record with ``write_all``."""
        return [e.record for e in self.entries if write_all or e.status is not Change.UNCHANGED]

    def counts(self) -> Counter[str]:
        return Counter(e.status.value for e in self.entries)

    def per_connector(self) -> dict[str, Counter[str]]:
        groups: dict[str, Counter[str]] = {}
        for entry in self.entries:
            groups.setdefault(entry.connector or UNPARSEABLE, Counter())[entry.status.value] += 1
        return groups

    def connectors(self) -> list[str]:
        return sorted({e.connector for e in self.entries if e.connector is not None})

    def as_dict(self, limit_per_connector: int | None = None) -> dict[str, Any]:
        """Counts are always complete; ``limit_per_connector`` caps the listed entries per connector
        (changes first), and ``entries_omitted`` says how many were left out."""
        totals = self.counts()
        listed: list[DiffEntry] = []
        omitted = 0
        if limit_per_connector is None:
            listed = self.entries
        else:
            taken: Counter[str | None] = Counter()
            for entry in sorted(self.entries, key=lambda e: e.status is Change.UNCHANGED):
                if taken[entry.connector] < limit_per_connector:
                    taken[entry.connector] += 1
                    listed.append(entry)
                else:
                    omitted += 1
        return {
            "summary": {c.value: totals.get(c.value, 0) for c in Change},
            "connectors": {
                name: {c.value: counts.get(c.value, 0) for c in Change}
                for name, counts in sorted(self.per_connector().items())
            },
            "entries": [e.as_dict() for e in listed],
            "entries_omitted": omitted,
        }


def compute_diff(
    current: Callable[[bytes], bytes | None], incoming: Iterable[RawRecord], keys: KeyIndex | None = None
) -> Diff:
    """Compare incoming records (last one per key wins) with ``current(key)``, the live value or None.

    A tombstone for a key that is not live changes nothing, so it is ``unchanged``.
    """
    keys = keys if keys is not None else KeyIndex()
    entries: list[DiffEntry] = []
    for record in latest_per_key(incoming).values():
        old = current(record.key)
        if record.value is None:
            status = Change.UNCHANGED if old is None else Change.REMOVED
        elif old is None:
            status = Change.ADDED
        else:
            status = Change.UNCHANGED if old == record.value else Change.CHANGED
        parsed = keys.parse(record.key)
        if isinstance(parsed, KeyProblem):
            entries.append(DiffEntry(record, status, old, None, None))
        else:
            entries.append(DiffEntry(record, status, old, parsed.connector, parsed.partition))
    return Diff(entries)


_MARK = {Change.ADDED: "+", Change.CHANGED: "~", Change.REMOVED: "-", Change.UNCHANGED: "="}


def _compact(value: Any) -> str:
    """One line of JSON for a diff's text, also for a partition or offset nested as deep as Jackson
    reads (``at_any_depth``: a transfer of such a record wrote it, then failed printing its report)."""
    return at_any_depth(lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":")), value)


SHOWN_CHARS = 200
"""A partition, key or value longer than this is shown by its first ``SHOWN_CHARS`` characters and
how many more it has: one 5 MB offset made a 5 MB line on the terminal. ``--json`` and the files
written keep every value whole."""


def shorten(text: str) -> str:
    """``text`` with its unprintable characters escaped, or the start of that and a count of the
    characters cut when longer than ``SHOWN_CHARS``."""
    text = shown_json(text)  # unprintable characters escaped (emulator.codec.shown)
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}… ({len(text) - SHOWN_CHARS:,} more characters)"


def render_text(diff: dict[str, Any], show_unchanged: bool = False) -> str:
    """A diff (as ``Diff.as_dict`` gives it, possibly from a daemon) for people.

    Takes the dict form so that a diff computed by a remote daemon prints exactly like a local one.
    Each partition, key and value is shown up to ``SHOWN_CHARS`` characters (``shorten``).
    """
    lines: list[str] = []
    summary = diff["summary"]
    lines.append(
        f"{summary['added']} added, {summary['changed']} changed, {summary['removed']} removed, "
        f"{summary['unchanged']} unchanged"
    )
    by_connector: dict[str, list[dict[str, Any]]] = {}
    for entry in diff["entries"]:
        by_connector.setdefault(entry["connector"] or UNPARSEABLE, []).append(entry)
    omitted = int(diff.get("entries_omitted", 0))
    for name, counts in diff["connectors"].items():
        lines.append(
            f"connector {shown_name(name)}: {counts['added']} added, {counts['changed']} changed, "
            f"{counts['removed']} removed, {counts['unchanged']} unchanged"
        )
        for entry in by_connector.get(name, []):
            status = Change(entry["status"])
            if status is Change.UNCHANGED and not show_unchanged:
                continue
            partition = entry["partition"]
            where = shorten(_compact(partition)) if partition is not None else f"key {shorten(entry['key'])}"
            if status is Change.CHANGED:
                lines.append(f"  {_MARK[status]} {where}  {shorten(entry['old'])} -> {shorten(entry['new'])}")
            elif status is Change.REMOVED:
                lines.append(f"  {_MARK[status]} {where}  {shorten(entry['old'])} -> (deleted)")
            else:
                shown = "(absent)" if entry["new"] is None else shorten(entry["new"])
                lines.append(f"  {_MARK[status]} {where}  {shown}")
    if not show_unchanged:  # unchanged entries are not listed anyway: count only the changes left out
        listed = sum(1 for entry in diff["entries"] if Change(entry["status"]) is not Change.UNCHANGED)
        omitted = min(omitted, summary["added"] + summary["changed"] + summary["removed"] - listed)
    if omitted > 0:
        lines.append(f"({omitted} more entries not listed; --diff-limit 0 or --json lists them all)")
    return "\n".join(lines)
