"""Failure messages a person can act on: which partition differs and how, and how it got there.

An assertion on offsets fails for one of a few reasons (a partition is missing, one is extra, an
offset differs, or an offset never arrived), and the message says which, per partition, instead
of printing two lists of dicts. A wait that timed out shows the partition's recent history from
the daemon's archive: whether the connector committed at all, who wrote last, and when.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from emulator.client.errors import ApiError
from emulator.testing.shapes import Entry, canonical, shown

PYTHON_EQUAL = "(equal in Python, not in Connect: 1, 1.0 and true are a Long, a Double and a Boolean)"
NEGATIVE_ZERO = (
    "(-0.0 reads back as 0.0: Connect's converter reads a fraction as a BigDecimal, which has no negative "
    "zero; expect 0.0)"
)


def equal_in_python_hints(expected: Any, actual: Any) -> list[str]:
    """Why two offsets Python calls equal differ in Connect's type-exact comparison, or nothing.

    Two reasons, per field: another type (``1`` and ``1.0``), or an expected ``-0.0`` read back as
    ``0.0`` (docs/protocol.md §1.6); telling a Long from a Double about the latter sends the reader
    the wrong way."""
    if expected is None or actual is None or expected != actual or canonical(expected) == canonical(actual):
        return []
    if not isinstance(expected, Mapping) or not isinstance(actual, Mapping):
        return [PYTHON_EQUAL]
    zero = other = False
    for key, want in expected.items():
        have = actual.get(key)
        if canonical(want) == canonical(have):
            continue
        if isinstance(want, float) and isinstance(have, float) and want == have == 0.0:
            zero = zero or math.copysign(1.0, want) < 0 < math.copysign(1.0, have)
        else:
            other = True
    return [hint for hint, applies in ((PYTHON_EQUAL, other), (NEGATIVE_ZERO, zero)) if applies]


def offsets_diff(connector: str, expected: Mapping[str, Entry], actual: Mapping[str, Entry], exact: bool) -> str | None:
    """None when ``actual`` matches ``expected``, else the differences, one partition per block.

    ``expected`` and ``actual`` are keyed by canonical partition text (``shapes.by_partition``). An
    expected offset of None means the partition must be absent. With ``exact``, partitions that
    are present but not expected are differences too.
    """
    lines: list[str] = []
    differing = 0
    for key, want in expected.items():
        have = actual.get(key)
        partition = shown(want["partition"])
        before = len(lines)
        if want["offset"] is None:
            if have is not None:
                lines.append(f"  partition {partition}: expected absent, found offset {shown(have['offset'])}")
        elif have is None:
            lines.append(f"  partition {partition}: missing (expected offset {shown(want['offset'])})")
        elif canonical(have["offset"]) != canonical(want["offset"]):
            lines.append(f"  partition {partition}:")
            lines.append(f"    expected {shown(want['offset'])}")
            lines.append(f"    actual   {shown(have['offset'])}")
            lines += [f"    {hint}" for hint in equal_in_python_hints(want["offset"], have["offset"])]
        differing += len(lines) > before
    if exact:
        for key, have in actual.items():
            if key not in expected:
                lines.append(f"  partition {shown(have['partition'])}: unexpected, offset {shown(have['offset'])}")
                differing += 1
    if not lines:
        return None
    header = f"offsets of connector {connector!r} differ from the expected ones in {differing} partition(s):"
    return "\n".join([header, *lines])


def history_lines(changes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Changes from the history route (oldest first) as aligned lines: time, origin, where, offset."""
    if not changes:
        return ["  (no change of this partition in the daemon's history)"]
    out: list[str] = []
    for change in changes:
        origin = str(change.get("origin", "?"))
        if change.get("operation"):
            origin += f" {change['operation']}"
        where = f"{change.get('kafka_partition', '?')}@{change.get('kafka_offset', '?')}"
        if change.get("value_problem"):
            value = f"unparseable value ({change['value_problem']})"
        elif change.get("offset") is None:
            value = "deleted (tombstone)"
        else:
            value = shown(change["offset"])
        out.append(f"  {change.get('time', '?'):<24}  {origin:<20}  {where:>8}  {value}")
    return out


def not_reset(refusals: Mapping[str, Exception]) -> str:
    """The teardown's note on the connectors the kit could not reset (``OffsetsKit.refusals``).

    A 403 is the daemon's own decision (the credentials' scopes, say) and its answer says why: that
    reason is shown. The others are named together, with the usual causes."""
    forbidden = {name: exc for name, exc in refusals.items() if isinstance(exc, ApiError) and exc.status == 403}
    others = [name for name in refusals if name not in forbidden]
    lines = ["not reset (running, claimed, or the daemon is gone): " + ", ".join(others)] if others else []
    lines += [f"not reset: {name}: the daemon refused it (403): {exc.message}" for name, exc in forbidden.items()]
    return "\n".join(lines)
