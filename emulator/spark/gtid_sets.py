"""MySQL GTID sets, as Debezium's MySQL connector writes them into its offsets (``gtids``).

After a failover the binlog file and position restart on the new primary (``mysql-bin.000002``
after ``mysql-bin.000120``), so coordinates alone call the newer offset older. The GTID set says
what was applied: an offset whose set contains the other's has seen everything the other has
(Debezium's ``GtidSet.isContainedWithin``). Only MySQL's ``uuid:interval[:interval…]`` elements are
read; anything else (MariaDB's ``domain-server-sequence``) is "cannot tell".
"""

from __future__ import annotations

import re

Intervals = list[tuple[int, int]]

_ELEMENT = re.compile(
    r"([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})((?::\d+(?:-\d+)?)+)"
)


def parse_gtid_set(text: str) -> dict[str, Intervals] | None:
    """``{source uuid: [(first, last), …]}``, or None for text that is not a MySQL GTID set."""
    found: dict[str, Intervals] = {}
    for element in text.replace("\n", "").split(","):
        element = element.strip()
        if not element:
            continue
        match = _ELEMENT.fullmatch(element)
        if match is None:
            return None
        intervals = found.setdefault(match.group(1).lower(), [])
        for part in match.group(2)[1:].split(":"):
            first, _, last = part.partition("-")
            intervals.append((int(first), int(last or first)))
    return found


def contained_within(inner: dict[str, Intervals], outer: dict[str, Intervals]) -> bool:
    """Every transaction of ``inner`` is in ``outer``."""
    for uuid, intervals in inner.items():
        covering = _merged(outer.get(uuid, []))
        for first, last in intervals:
            if not any(a <= first and last <= b for a, b in covering):
                return False
    return True


def _merged(intervals: Intervals) -> Intervals:
    merged: Intervals = []
    for first, last in sorted(intervals):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged
