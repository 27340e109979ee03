"""The archive's files on disk: names, ordering, tolerant reading and crash recovery.

Layout of one log's archive directory (``<history-dir>/<log slug>/``)::

    log.json                                   which log this directory archives (for humans, discovery)
    state.json                                 durable watermark and epoch, rewritten atomically on rotation
    lock                                       flock'd by the one process that writes here
    base-<seq>.avro                            retention's fold: the latest record per key of files <= seq
    history-<seq>_<min time>_<max time>.avro   a closed file; times are record times in epoch ms
    history-<seq>.avro.open                    the file being written (at most one)
    *.damaged                                  files set aside because they could not be read

Sequence numbers order the files; records inside a file are in archive order (per Kafka partition,
log order). Times in names let retention decide without opening a file.

Reading is block by block (an Avro block is the unit the writer flushes), so a truncated or
corrupt block costs exactly that block: it is reported and counted, never a crash, and records of
a damaged block are never half-yielded. Files written with an older version of the schema read with
the fields added since set to None (``schema.ADDED_FIELDS``).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, TypedDict, cast

import fastavro

from emulator.history.rows import ArchiveRow
from emulator.history.schema import content_crc, missing_fields

log = logging.getLogger(__name__)

_CLOSED = re.compile(r"^history-(\d{10})_(\d+)_(\d+)\.avro$")
_OPEN = re.compile(r"^history-(\d{10})\.avro\.open$")
_BASE = re.compile(r"^base-(\d{10})\.avro$")

Kind = Literal["base", "closed", "open"]


def closed_name(seq: int, min_time: int, max_time: int) -> str:
    return f"history-{seq:010d}_{max(0, min_time)}_{max(0, max_time)}.avro"


def open_name(seq: int) -> str:
    return f"history-{seq:010d}.avro.open"


def base_name(seq: int) -> str:
    return f"base-{seq:010d}.avro"


@dataclass(frozen=True, slots=True)
class ArchiveFile:
    path: Path
    kind: Kind
    seq: int
    min_time: int | None = None
    max_time: int | None = None


def scan_dir(directory: Path) -> tuple[ArchiveFile | None, list[ArchiveFile], list[ArchiveFile]]:
    """``(newest base, files after it in sequence order, files already folded into it)``."""
    bases: list[ArchiveFile] = []
    others: list[ArchiveFile] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return None, [], []
    for name in names:
        path = directory / name
        if m := _CLOSED.match(name):
            others.append(ArchiveFile(path, "closed", int(m.group(1)), int(m.group(2)), int(m.group(3))))
        elif m := _OPEN.match(name):
            others.append(ArchiveFile(path, "open", int(m.group(1))))
        elif m := _BASE.match(name):
            bases.append(ArchiveFile(path, "base", int(m.group(1))))
    base = max(bases, key=lambda f: f.seq) if bases else None
    floor = base.seq if base is not None else -1
    others.sort(key=lambda f: f.seq)
    live = [f for f in others if f.seq > floor]
    folded = [f for f in others if f.seq <= floor] + [b for b in bases if b is not base]
    return base, live, folded


class Damage(TypedDict):
    """One damaged file a read met: which, what was wrong, how many records came before it."""

    file: str
    problem: str
    records_read_before: int


@dataclass
class ReadReport:
    """What a read met besides records: every damaged file is listed with its problem."""

    files_read: int = 0
    records: int = 0
    damaged: list[Damage] = field(default_factory=list)
    incomplete_tails: list[str] = field(default_factory=list)

    def damaged_file_count(self) -> int:
        return len({d["file"] for d in self.damaged})

    def damage_summary(self) -> str:
        """The damage met, for people: each damaged file with what was skipped of it."""
        met = "; ".join(f"{d['file']}: {d['problem']}" for d in self.damaged)
        return f"{self.damaged_file_count()} damaged archive file(s) were read and records of them skipped: {met}."

    def as_dict(self) -> dict[str, Any]:
        return {
            "files_read": self.files_read,
            "records_read": self.records,
            "damaged_files": self.damaged_file_count(),
            "damage": list(self.damaged),
            "incomplete_open_files": list(self.incomplete_tails),
        }


def read_metadata(path: Path) -> dict[str, str]:
    """A file's Avro header metadata (``{}`` if the header cannot be read)."""
    try:
        with path.open("rb") as f:
            meta = fastavro.reader(f).metadata
            return {str(k): v if isinstance(v, str) else v.decode("utf-8", "replace") for k, v in meta.items()}
    except Exception:
        return {}


def iter_file(file: ArchiveFile, report: ReadReport, handle: IO[bytes] | None = None) -> Iterator[ArchiveRow]:
    """Records of one file, block by block. Damage is recorded in ``report`` and ends this file only.

    ``handle`` is an already opened file (it is closed here). A ``.open`` file may end in a partial
    block (another process's live file, or a crash leftover not yet recovered): that is reported as
    an incomplete tail, not as damage.
    """
    try:
        fo = handle if handle is not None else file.path.open("rb")
    except OSError as exc:
        _damaged(report, file, f"cannot open: {exc}", 0)
        return
    report.files_read += 1
    yielded = 0
    with fo:
        try:
            blocks = fastavro.block_reader(fo)
        except Exception as exc:
            _damaged(report, file, f"unreadable Avro header ({type(exc).__name__}: {exc})", 0)
            return
        missing = missing_fields(cast(dict[str, Any], blocks.writer_schema))  # written before fields were added
        while True:
            try:
                block = next(blocks)
                decoded = cast(list[dict[str, Any]], list(block))
                for record in decoded if missing else ():
                    record.update(dict.fromkeys(missing))
                records = cast(list[ArchiveRow], decoded)  # the history schema's records
            except StopIteration:
                return
            except Exception as exc:
                if file.kind == "open":
                    report.incomplete_tails.append(str(file.path))
                    log.info("%s ends in an incomplete block (being written, or left by a crash)", file.path)
                    return
                problem = (
                    f"damaged block after {yielded} records ({type(exc).__name__}: {exc}); the rest of the file "
                    "was skipped"
                )
                _damaged(report, file, problem, yielded)
                return
            bad = sum(1 for r in records if r.get("crc32") != content_crc(r))
            if bad:
                # The framing is intact, so the next block can still be trusted: skip only this one.
                problem = (
                    f"damaged block at byte {block.offset}: {bad} of {len(records)} records fail their checksum; "
                    "the block was skipped"
                )
                _damaged(report, file, problem, yielded)
                continue
            report.records += len(records)
            yielded += len(records)
            yield from records


def _damaged(report: ReadReport, file: ArchiveFile, problem: str, records_before: int) -> None:
    log.warning("history archive file %s: %s", file.path, problem)
    report.damaged.append(Damage(file=str(file.path), problem=problem, records_read_before=records_before))


@dataclass(frozen=True, slots=True)
class Recovery:
    """What ``valid_prefix`` found in a file left open by a crash."""

    header_ok: bool
    good_end: int
    size: int
    error: str | None


def valid_prefix(path: Path) -> Recovery:
    """Where the last complete block of a file ends (``good_end``); ``header_ok`` False if none."""
    size = path.stat().st_size
    with path.open("rb") as f:
        try:
            reader = fastavro.reader(f)
            del reader
            good_end = f.tell()
        except Exception as exc:
            return Recovery(False, 0, size, f"{type(exc).__name__}: {exc}")
        f.seek(0)
        try:
            for block in fastavro.block_reader(f):
                good_end = block.offset + block.size
        except Exception as exc:
            return Recovery(True, good_end, size, f"{type(exc).__name__}: {exc}")
    return Recovery(True, good_end, size, None)


def fsync_dir(directory: Path) -> None:
    """Make renames and deletions in ``directory`` durable (POSIX: fsync the directory itself)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
