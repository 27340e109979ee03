"""A whole offsets log, captured and put back between tests, byte for byte.

A snapshot is every live record of the log as raw key and value bytes (``GET /offsets/records``),
not Connect's parsed offsets: keys whose bytes differ from Jackson's form, and keys Connect
ignores, come back exactly as they were. Restoring writes the difference through
``POST /offsets/records``: records whose value changed or that disappeared are written back, and
keys that appeared since are deleted with tombstones, so the log's live state equals the
snapshot again (the log itself keeps the history of the round trip, as compaction would).

The same snapshots can be saved to and loaded from the project's snapshot files
(docs/transfers.md), e.g. a baseline kept in a repository.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.client.http import OffsetsClient
from emulator.formats import snapshot as snapshot_format
from emulator.formats.model import RawRecord, connector_of, latest_per_key

_BATCH = 1000
"""Records per import request: a large log is restored in several requests of bounded size."""


@dataclass(frozen=True, slots=True)
class LogSnapshot:
    """The live records of a log: key bytes → value bytes."""

    records: Mapping[bytes, bytes] = field(default_factory=dict)

    @property
    def connectors(self) -> set[str]:
        """The connectors whose keys the snapshot holds (keys Connect ignores count for none)."""
        return {name for name in map(connector_of, self.records) if name is not None}

    def save(self, path: str | Path, source: str = "connect-offsets test kit") -> None:
        """Write the project's snapshot file (Avro), atomically."""
        data = snapshot_format.dumps((RawRecord(k, v) for k, v in self.records.items()), source)
        snapshot_format.write_file(path, data)

    @classmethod
    def load(cls, path: str | Path) -> LogSnapshot:
        """Read a snapshot file; the latest record per key wins and tombstones are dropped."""
        loaded, _ = snapshot_format.load_file(path)
        latest = latest_per_key(loaded.records)
        return cls({key: r.value for key, r in latest.items() if r.value is not None})

    def __len__(self) -> int:
        return len(self.records)


def take(client: OffsetsClient) -> LogSnapshot:
    return LogSnapshot(client.records())


def restore_plan(snapshot: LogSnapshot, current: Mapping[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """The records that turn ``current`` into ``snapshot``: changed or vanished keys with their
    snapshot value, then a tombstone for each key the snapshot does not have."""
    writes: list[tuple[bytes, bytes | None]] = [
        (key, value) for key, value in snapshot.records.items() if current.get(key) != value
    ]
    writes += [(key, None) for key in current if key not in snapshot.records]
    return writes


def restore(client: OffsetsClient, snapshot: LogSnapshot) -> int:
    """Make the log's live records equal the snapshot; returns the records written.

    Every connector a written record belongs to must be modifiable (STOPPED, unclaimed), as for
    any write through the daemon; the daemon refuses the batch otherwise.
    """
    plan = restore_plan(snapshot, client.records())
    written = 0
    for batch in _batches(plan, _BATCH):
        answer = client.request(
            "POST",
            "/offsets/records",
            params={"allow_malformed": "true", "diff_limit": "1"},
            json={"records": [_record(key, value) for key, value in batch]},
        )
        written += int(answer.get("written", 0))
    return written


def _record(key: bytes, value: bytes | None) -> dict[str, Any]:
    return {
        "key": base64.b64encode(key).decode("ascii"),
        "value": None if value is None else base64.b64encode(value).decode("ascii"),
    }


def _batches(items: Sequence[tuple[bytes, bytes | None]], size: int) -> Iterator[Sequence[tuple[bytes, bytes | None]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
