"""Crash recovery at open: files left open are cut back and closed, the watermark is rebuilt exactly.

The state file is saved only when a file is closed, so after a crash it lags behind the files.
Recovery extends it by reading every file written after it was saved, so the watermark always
equals what the files really hold: a record lost in the crash is *not* below the watermark and is
archived again from the log. A file left open ends in at most one incomplete block (the one being
written); it is cut back to its last complete block and closed under its proper name. Damage that
a complete block follows is not a crash's tail: it is kept, the file closed with it, and read as a
closed file is (the damaged block skipped and reported, the blocks after it kept). A file whose
header cannot be read is set aside as ``*.damaged``, never deleted.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from emulator.history.files import ArchiveFile, ReadReport, closed_name, fsync_dir, iter_file, scan_dir, valid_prefix
from emulator.history.rows import record_time
from emulator.history.state import ArchiveState, NewerArchive, fingerprint, load_state, save_state

log = logging.getLogger(__name__)

_SEQ = re.compile(r"^(?:history|base)-(\d{10})")


@dataclass
class Recovered:
    """What the archiver starts from."""

    state: ArchiveState
    next_seq: int
    """The sequence number of the next file: above every file present, damaged ones included."""
    problems: list[str] = field(default_factory=list)
    """What was cut, set aside or found damaged, for ``status()``."""


def recover(directory: Path, identity: str) -> Recovered:
    """Rebuild the exact watermark from the state file plus every file written after it.

    Raises ``OSError`` or ``ValueError`` when the directory cannot be recovered at all, and
    ``NewerArchive`` when a newer version wrote it.
    """
    try:
        state = load_state(directory, identity)
    except NewerArchive:
        raise
    except ValueError as exc:
        log.error("history: %s; rebuilding the watermark by reading every archive file", exc)
        state = None
    state = state or ArchiveState(identity)
    problems: list[str] = []
    base, live, leftovers = scan_dir(directory)
    for f in leftovers:
        f.path.unlink(missing_ok=True)
    max_seq = -1
    for name in os.listdir(directory):
        if m := _SEQ.match(name):
            max_seq = max(max_seq, int(m.group(1)))
    report = ReadReport()
    to_scan: list[ArchiveFile] = []
    if base is not None and state.closed_through_seq < base.seq:
        to_scan.append(base)
    for f in live:
        if f.kind == "open":
            closed = _close_open_file(directory, f, problems)
            if closed is not None:
                to_scan.append(closed)
        elif f.seq > state.closed_through_seq:
            to_scan.append(f)
    for f in to_scan:
        for row in iter_file(f, report):
            if row["epoch"] > state.epoch:
                state.epoch = row["epoch"]
                state.next_offsets, state.tails = {}, {}
            if row["epoch"] == state.epoch:
                state.note(row["kafka_partition"], row["kafka_offset"], fingerprint(row["key"], row["value"]))
    for d in report.damaged:
        problems.append(f"{d['file']}: {d['problem']}")
    state.closed_through_seq = max(state.closed_through_seq, max_seq)
    save_state(directory, state)
    return Recovered(state, max_seq + 1, problems)


def _close_open_file(directory: Path, f: ArchiveFile, problems: list[str]) -> ArchiveFile | None:
    """Cut a file left open by a crash back to its last complete block and close it."""
    found = valid_prefix(f.path)
    if not found.header_ok:
        target = f.path.with_name(f.path.name + ".damaged")
        f.path.rename(target)
        problems.append(f"{f.path}: unreadable header ({found.error}); set aside as {target.name}")
        log.error("history: %s has no readable header (%s); set aside as %s", f.path, found.error, target)
        return None
    for start, end, error in found.damaged:
        # Intact blocks follow: not what a crash leaves (it only cuts the block being written). The
        # bytes stay; the file is closed with them and read as any closed file is, skipping the
        # damaged block(s) and reading on at the next sync marker (the records after are kept, with
        # who made them, which the log does not say and may have compacted away).
        log.error(
            "history: %s is damaged in the middle, bytes %d-%d (%s), with intact blocks after it: not a "
            "crash's incomplete tail, so nothing was cut; the damaged bytes are skipped when read (their "
            "records are missing from the archive) and the records after them kept",
            f.path,
            start,
            end,
            error,
        )
    if found.good_end < found.size:
        os.truncate(f.path, found.good_end)
        msg = f"{f.path}: cut {found.size - found.good_end} bytes of an incomplete block ({found.error})"
        problems.append(msg)
        log.warning("history: %s (left by a crash; those records are re-archived from the log)", msg)
    report = ReadReport()
    times = [record_time(row) for row in iter_file(ArchiveFile(f.path, "closed", f.seq), report)]
    if not times:
        f.path.unlink()
        return None
    target = directory / closed_name(f.seq, min(times), max(times))
    f.path.rename(target)
    fsync_dir(directory)
    return ArchiveFile(target, "closed", f.seq, min(times), max(times))
