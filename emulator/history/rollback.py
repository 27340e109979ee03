"""Rolling a connector back to a past state: the raw-key diff between now and then.

The diff is by raw key bytes, not by logical partition, because bytes are what tasks look up:
a key that held the offset then gets that exact value back under that exact key; a key live now
that did not exist (or was deleted) then gets a tombstone. A partition that moved to a
byte-different key in between therefore ends exactly as it was, not merely "logically equal".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.codec.keys import KeyProblem, parse_key
from emulator.codec.murmur2 import partition_for
from emulator.codec.values import CodecError, parse_offset
from emulator.history.query import PastState
from emulator.view.offset_view import OffsetView


@dataclass(frozen=True, slots=True)
class RollbackChange:
    action: str
    """``restore`` (no live key now), ``change`` (live with another value), ``delete`` (absent then)."""
    key: bytes
    current: bytes | None
    target: bytes | None

    def as_dict(self, partition_count: int) -> dict[str, Any]:
        parsed = parse_key(self.key)
        return {
            "action": self.action,
            "partition": None if isinstance(parsed, KeyProblem) else parsed.partition,
            "current_offset": _offset(self.current),
            "target_offset": _offset(self.target),
            "key": self.key.decode("utf-8", errors="backslashreplace"),
            "current_value": None if self.current is None else self.current.decode("utf-8", "backslashreplace"),
            "target_value": None if self.target is None else self.target.decode("utf-8", "backslashreplace"),
            "kafka_partition": partition_for(self.key, partition_count),
        }


def _offset(raw: bytes | None) -> Any:
    try:
        return parse_offset(raw)
    except CodecError:
        return None


def current_state(view: OffsetView, connector: str) -> dict[bytes, bytes]:
    """Every live raw key of the connector with its value, as the view holds it now."""
    state: dict[bytes, bytes] = {}
    for row in view.offsets(connector):
        for key in row.keys:
            entry = view.get_raw(key)
            if entry is not None:
                state[key] = entry.value
    return state


def plan_rollback(past: PastState, current: dict[bytes, bytes]) -> list[RollbackChange]:
    """Writes first (in the order they were written then), tombstones last, so that no partition is
    momentarily absent when it moves back to an older key."""
    changes: list[RollbackChange] = []
    for key, row in past.rows.items():
        target = row["value"]
        assert target is not None  # a past state holds live keys only
        now = current.get(key)
        if now is None:
            changes.append(RollbackChange("restore", key, None, target))
        elif now != target:
            changes.append(RollbackChange("change", key, now, target))
    for key, value in current.items():
        if key not in past.rows:
            changes.append(RollbackChange("delete", key, value, None))
    return changes
