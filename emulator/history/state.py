"""The archive's durable bookkeeping: per-partition watermark, the fingerprint of the last record
archived per partition, and the epoch.

The watermark is what makes restarts cheap and exact: replay re-delivers every record of the log,
and everything below ``next_offsets[p]`` is already archived. It is saved (atomically, fsynced) only
when a file is closed, and on startup extended by scanning the files written after that save, so it
always equals what the files really hold: a record lost in a crash is *not* below the watermark and
is archived again from the log.

The fingerprint of the record at ``next_offsets[p] - 1`` is the cheapest strong check that the log
is still the one we archived: that record is the newest of its partition, so compaction never
removes it, and a log re-created under the same name holds other bytes (or fewer records) there.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.history.files import fsync_dir

STATE_FILE = "state.json"
STATE_FORMAT = "connect-offsets-emulator/history-state"
STATE_VERSION = 1


def fingerprint(key: bytes | None, value: bytes | None) -> str:
    """Identifies a record's bytes well enough to notice a different log; null and empty differ."""
    h = hashlib.blake2b(digest_size=12)
    for part in (key, value):
        if part is None:
            h.update(b"\x00")
        else:
            h.update(b"\x01%d:" % len(part))
            h.update(part)
    return h.hexdigest()


@dataclass
class ArchiveState:
    log: str
    epoch: int = 0
    next_offsets: dict[int, int] = field(default_factory=dict)
    tails: dict[int, tuple[int, str]] = field(default_factory=dict)
    """partition -> (offset, fingerprint) of the last record archived there in this epoch."""
    closed_through_seq: int = -1
    """Every file with a sequence number up to this one is closed and reflected above."""
    epochs: list[dict[str, Any]] = field(default_factory=list)

    def new_epoch(self, reason: str) -> None:
        self.epoch += 1
        self.next_offsets = {}
        self.tails = {}
        self.epochs.append({"epoch": self.epoch, "detected_at_ms": time.time_ns() // 1_000_000, "reason": reason})

    def note(self, partition: int, offset: int, fp: str) -> None:
        if offset + 1 > self.next_offsets.get(partition, 0):
            self.next_offsets[partition] = offset + 1
            self.tails[partition] = (offset, fp)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "log": self.log,
            "epoch": self.epoch,
            "closed_through_seq": self.closed_through_seq,
            "next_offsets": {str(p): n for p, n in sorted(self.next_offsets.items())},
            "tails": {str(p): [o, fp] for p, (o, fp) in sorted(self.tails.items())},
            "epochs": self.epochs,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ArchiveState:
        if data.get("format") != STATE_FORMAT:
            raise ValueError(f"not a history state file: format {data.get('format')!r}")
        if int(data.get("version", 0)) > STATE_VERSION:
            raise NewerArchive(
                f"written by a newer version of connect-offsets (state version {data.get('version')}; this "
                f"version reads up to {STATE_VERSION}): run that version on this archive"
            )
        return cls(
            log=str(data["log"]),
            epoch=int(data["epoch"]),
            next_offsets={int(p): int(n) for p, n in data["next_offsets"].items()},
            tails={int(p): (int(v[0]), str(v[1])) for p, v in data["tails"].items()},
            closed_through_seq=int(data["closed_through_seq"]),
            epochs=list(data.get("epochs", [])),
        )


class NewerArchive(ValueError):
    """The archive's state was written by a newer version. Rebuilding it from the files, as for a
    damaged state, would overwrite the newer state with this version's and read files it may not
    understand: the archive is refused instead (versions before 2026-11-28 rebuilt it)."""


def load_state(directory: Path, log_identity: str) -> ArchiveState | None:
    """The saved state, ``None`` if there is none. A damaged file raises ``ValueError``; one of a
    newer version ``NewerArchive``."""
    path = directory / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        state = ArchiveState.from_json(json.loads(text))
    except NewerArchive as exc:
        raise NewerArchive(f"{path} was {exc}") from None
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"{path} is damaged ({exc!r})") from exc
    if state.log != log_identity:
        raise ValueError(f"{path} belongs to log {state.log!r}, not {log_identity!r}")
    return state


def save_state(directory: Path, state: ArchiveState) -> None:
    """Write-to-temp, fsync, rename, fsync the directory: the old or the new state, never half."""
    path = directory / STATE_FILE
    tmp = directory / (STATE_FILE + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(state.to_json(), f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(directory)
