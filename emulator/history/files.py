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
a damaged block are never half-yielded. Every block of an Avro container file ends with the file's
16-byte sync marker (the header's last 16 bytes), so after a block that cannot be read the reader
looks for the next marker and reads on from there: a damaged block in the middle of a closed file
costs that block, not the rest of the file. Files written with an older version of the schema read with
the fields added since set to None (``schema.ADDED_FIELDS``).

Skipping blocks. Decoding rows is what a query pays for (~20 µs a row: fastavro, then each row's
checksum); reading a block's bytes costs ~1/40 of that. So once a block was decoded intact, what it
holds (``BlockSummary``: its connectors, times and epochs) is kept in memory under a digest of its
schema and decompressed bytes, and a later read given ``skip`` asks it whether the block can be
passed over undecoded. The digest is of the bytes themselves, so renames, rotation, retention and
recovery need no invalidation, and a block whose bytes changed (damage) is simply decoded again
and reported as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, NotRequired, TypedDict, cast

import fastavro

from emulator.history.rows import ArchiveRow, record_time
from emulator.history.schema import HISTORY_FORMAT, content_crc, missing_fields, newer_format

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
    """One damage a read met in a file: which file, what was wrong, how many of its records were read
    before it, and what was skipped (a file may have several)."""

    file: str
    problem: str
    records_read_before: int
    skipped_bytes: NotRequired[int]
    """How many bytes were skipped, up to the next block or the end of the file."""
    skipped_records: NotRequired[int | None]
    """How many records they held: None when the damaged bytes do not tell (the block's own count is
    believed only where its stated size ends exactly at the sync marker found)."""


@dataclass
class ReadReport:
    """What a read met besides records: every damaged file is listed with its problem."""

    files_read: int = 0
    records: int = 0
    damaged: list[Damage] = field(default_factory=list)
    incomplete_tails: list[str] = field(default_factory=list)
    blocks_decoded: int = 0
    blocks_skipped: int = 0
    """Intact blocks passed over undecoded because their ``BlockSummary`` said the query needs none
    of their rows (their records are counted in ``records`` all the same); not in ``as_dict``."""

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


@dataclass(frozen=True, slots=True)
class BlockSummary:
    """What one intact block holds: enough for a query to tell it needs none of its rows."""

    records: int
    connectors: frozenset[str | None]
    min_time: int
    max_time: int
    """The block's earliest and latest row time (``rows.record_time``)."""
    epochs: tuple[tuple[int, int], ...]
    """Each epoch of the block's rows with the earliest time of its rows there."""


SkipBlock = Callable[[BlockSummary], bool]
"""Asked about a block already summarised: True passes it over undecoded."""

_SUMMARY_LIMIT = 65_536
"""Blocks summarised at most (~250 bytes each: ~16 MB at the limit), least recently used dropped.
A block holds up to ``avro_rows.BLOCK_BYTES`` of rows (~330 of a 1,000-partition PATCH)."""


class _Summaries:
    """Summaries of blocks decoded intact, by digest; shared by every reader of this process."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, BlockSummary] = OrderedDict()
        self._shared: dict[object, object] = {}  # equal connector sets and epochs stored once

    def get(self, digest: bytes) -> BlockSummary | None:
        with self._lock:
            summary = self._entries.get(digest)
            if summary is not None:
                self._entries.move_to_end(digest)
            return summary

    def put(self, digest: bytes, records: list[ArchiveRow]) -> None:
        times = [record_time(r) for r in records]
        epochs: dict[int, int] = {}
        for r, t in zip(records, times, strict=True):
            e = r["epoch"]
            if t < epochs.get(e, t + 1):
                epochs[e] = t
        connectors = frozenset(r["connector"] for r in records)
        spans = tuple(sorted(epochs.items()))
        with self._lock:
            if len(self._shared) > 4096:
                self._shared.clear()
            summary = BlockSummary(
                len(records),
                cast(frozenset[str | None], self._shared.setdefault(connectors, connectors)),
                min(times),
                max(times),
                cast(tuple[tuple[int, int], ...], self._shared.setdefault(spans, spans)),
            )
            self._entries[digest] = summary
            self._entries.move_to_end(digest)
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._shared.clear()


BLOCK_SUMMARIES = _Summaries(_SUMMARY_LIMIT)


def _block_digest(schema_id: bytes, num_records: int, data: Any) -> bytes:
    digest = hashlib.blake2b(schema_id, digest_size=16)
    digest.update(num_records.to_bytes(8, "little"))
    with data.getbuffer() as view:
        digest.update(view)
    return digest.digest()


@dataclass(frozen=True, slots=True)
class Deferred:
    """A block summarised before and not skipped, left undecoded for the query to read if it needs it."""

    summary: BlockSummary
    handle: IO[bytes]
    header: bytes
    offset: int
    digest: bytes
    schema_id: bytes
    missing: tuple[str, ...]


def read_deferred(block: Deferred, report: ReadReport) -> list[ArchiveRow] | None:
    """The records of a deferred block; None if its bytes are no longer the ones summarised, or it
    does not read intact (the file changed under the query: read it again without deferring)."""
    try:
        blocks = fastavro.block_reader(cast(IO[bytes], _Spliced(block.header, block.handle, block.offset)))
        found = next(blocks)
        if _block_digest(block.schema_id, found.num_records, cast(Any, found).bytes_) != block.digest:
            return None
        decoded = cast(list[dict[str, Any]], list(found))
    except Exception:
        return None
    for record in decoded if block.missing else ():
        record.update(dict.fromkeys(block.missing))
    records = cast(list[ArchiveRow], decoded)
    if any(r.get("crc32") != content_crc(r) for r in records):
        return None
    report.blocks_decoded += 1
    return records


def iter_file(
    file: ArchiveFile,
    report: ReadReport,
    handle: IO[bytes] | None = None,
    skip: SkipBlock | None = None,
    later: list[Deferred] | None = None,
) -> Iterator[ArchiveRow]:
    """Records of one file, block by block. Damage is recorded in ``report`` and costs the damaged
    block: reading resumes at the next sync marker (``_resume_after``).

    ``skip``: blocks seen intact before (``BLOCK_SUMMARIES``) whose summary it answers True for are
    not decoded, and their records not yielded; blocks decoded here are summarised for the next read.
    ``later`` (with ``skip`` and ``handle``): the other summarised blocks are not decoded either but
    appended to it, to be read with ``read_deferred`` in the order the caller likes; ``handle`` is
    then left open, for the caller to close once done with them.

    ``handle`` is an already opened file (it is closed here). A ``.open`` file may end in a partial
    block (another process's live file, or a crash leftover not yet recovered): that is reported as
    an incomplete tail, not as damage, and nothing after it is read (a block another process is
    writing may be complete by the time a marker is looked for).
    """
    try:
        fo = handle if handle is not None else file.path.open("rb")
    except OSError as exc:
        _damaged(report, file, f"cannot open: {exc}", 0)
        return
    report.files_read += 1
    yielded = 0
    with fo if later is None else contextlib.nullcontext(fo):
        try:
            blocks = fastavro.block_reader(fo)
            header_end = fo.tell()
            header = b""
            if later is not None:
                fo.seek(0)
                header = fo.read(header_end)
        except Exception as exc:
            _damaged(report, file, f"unreadable Avro header ({type(exc).__name__}: {exc})", 0)
            return
        if (newer := newer_format(blocks.metadata)) is not None:
            shown = "an unknown format" if newer < 0 else f"history format {newer}"
            _damaged(
                report,
                file,
                f"written by a newer version of connect-offsets ({shown}; this version reads up to "
                f"{HISTORY_FORMAT}): read it with that version; none of its records were read",
                0,
            )
            return
        missing = missing_fields(cast(dict[str, Any], blocks.writer_schema))  # written before fields were added
        schema_id = json.dumps(blocks.writer_schema, sort_keys=True).encode() if skip is not None else b""
        good_end = header_end  # where the block being read starts
        while True:
            digest = None
            try:
                block = next(blocks)
                if skip is not None:
                    digest = _block_digest(schema_id, block.num_records, cast(Any, block).bytes_)
                    summary = BLOCK_SUMMARIES.get(digest)
                    if summary is not None and skip(summary):
                        good_end = block.offset + block.size
                        report.records += summary.records
                        report.blocks_skipped += 1
                        yielded += summary.records
                        continue
                    if summary is not None and later is not None:
                        later.append(Deferred(summary, fo, header, block.offset, digest, schema_id, missing))
                        good_end = block.offset + block.size
                        report.records += summary.records
                        yielded += summary.records
                        continue
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
                resumed = _resume_after(fo, header_end, good_end)
                error = f"{type(exc).__name__}: {exc}"
                if resumed is None:
                    _damaged(
                        report,
                        file,
                        f"damaged block after {yielded} records, at byte {good_end} ({error}); no intact block "
                        f"follows it: the rest of the file ({_size(fo) - good_end} bytes) was skipped",
                        yielded,
                        _size(fo) - good_end,
                        None,
                    )
                    return
                stream, resume_at, count = resumed
                held = f"{count} record(s)" if count is not None else "one block or more, records unknown"
                _damaged(
                    report,
                    file,
                    f"damaged block after {yielded} records, bytes {good_end}-{resume_at} ({error}): {held} "
                    "skipped; reading resumed at the next block",
                    yielded,
                    resume_at - good_end,
                    count,
                )
                blocks = fastavro.block_reader(stream)
                good_end = resume_at
                continue
            good_end = block.offset + block.size
            bad = sum(1 for r in records if r.get("crc32") != content_crc(r))
            if bad:
                # The framing is intact, so the next block can still be trusted: skip only this one.
                problem = (
                    f"damaged block at byte {block.offset}: {bad} of {len(records)} records fail their checksum; "
                    "the block was skipped"
                )
                _damaged(report, file, problem, yielded, block.size, len(records))
                continue
            report.blocks_decoded += 1
            if digest is not None and records:
                BLOCK_SUMMARIES.put(digest, records)
            report.records += len(records)
            yielded += len(records)
            yield from records


_SYNC_SIZE = 16
_SCAN_CHUNK = 1 << 20


def _size(fo: IO[bytes]) -> int:
    return fo.seek(0, os.SEEK_END)


def _resume_after(fo: IO[bytes], header_end: int, damaged_at: int) -> tuple[IO[bytes], int, int | None] | None:
    """After a block at ``damaged_at`` could not be read: a stream fastavro's block reader reads on
    from (the header, then the file from the block after the next sync marker), where that block
    starts, and how many records the skipped bytes held if their block header says so consistently.
    None if no sync marker follows (the damage reaches the end of the file)."""
    fo.seek(header_end - _SYNC_SIZE)
    sync = fo.read(_SYNC_SIZE)
    found = _find(fo, sync, damaged_at)
    if found is None:
        return None
    resume_at = found + _SYNC_SIZE
    fo.seek(0)
    header = fo.read(header_end)
    fo.seek(damaged_at)
    count = _block_count(fo.read(min(found - damaged_at, 20)), found - damaged_at)
    return cast(IO[bytes], _Spliced(header, fo, resume_at)), resume_at, count


def _find(fo: IO[bytes], needle: bytes, start: int) -> int | None:
    """The first position at or after ``start`` where ``needle`` begins, reading a chunk at a time."""
    fo.seek(start)
    carry = b""
    position = start  # of the chunk's first byte
    while chunk := fo.read(_SCAN_CHUNK):
        data = carry + chunk
        at = data.find(needle)
        if at >= 0:
            return position - len(carry) + at
        carry = data[-(len(needle) - 1) :]
        position += len(chunk)
    return None


def _block_count(head: bytes, length: int) -> int | None:
    """The record count of a block of ``length`` bytes (up to its sync marker) starting with ``head``,
    if its header (count, then byte size, as zigzag varints) is consistent with that length."""
    values: list[int] = []
    at = 0
    for _ in range(2):
        shift = value = 0
        while True:
            if at >= len(head) or shift > 63:
                return None
            byte = head[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        values.append((value >> 1) ^ -(value & 1))
    count, size = values
    return count if count > 0 and at + size == length else None


class _Spliced(io.RawIOBase):
    """The bytes ``header`` followed by ``fo``'s from ``start`` on, as one stream; ``tell`` answers
    positions in the file itself, so blocks read from it have their true offsets."""

    def __init__(self, header: bytes, fo: IO[bytes], start: int) -> None:
        super().__init__()
        self._header = header
        self._fo = fo
        self._start = start
        self._pos = 0
        fo.seek(start)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._pos < len(self._header):
            part = self._header[self._pos : self._pos + len(view)]
            view[: len(part)] = part
            self._pos += len(part)
            return len(part)
        data = self._fo.read(len(view))
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def tell(self) -> int:
        head = len(self._header)
        return self._pos if self._pos < head else self._start + self._pos - head


def _damaged(
    report: ReadReport,
    file: ArchiveFile,
    problem: str,
    records_before: int,
    skipped_bytes: int | None = None,
    skipped_records: int | None = None,
) -> None:
    log.warning("history archive file %s: %s", file.path, problem)
    damage = Damage(file=str(file.path), problem=problem, records_read_before=records_before)
    if skipped_bytes is not None:
        damage["skipped_bytes"] = skipped_bytes
        damage["skipped_records"] = skipped_records
    report.damaged.append(damage)


@dataclass(frozen=True, slots=True)
class Recovery:
    """What ``valid_prefix`` found in a file left open by a crash."""

    header_ok: bool
    good_end: int
    """Where the file's last complete block ends: what follows it is a crash's incomplete tail."""
    size: int
    error: str | None
    """Why reading stopped at ``good_end`` (None if the file ends there)."""
    damaged: tuple[tuple[int, int, str], ...] = ()
    """Damage *before* ``good_end``, each ``(start, end, error)``: bytes a complete block follows, so
    not a crash's tail but damage in the middle; they are kept, and readers skip them block-wise."""


def valid_prefix(path: Path) -> Recovery:
    """Where the last complete block of a file ends (``good_end``); ``header_ok`` False if none.

    A block that cannot be read is only the file's tail if no complete block follows it: reading
    resumes at the next sync marker, as ``iter_file`` does for a closed file, and damage that intact
    blocks follow is listed in ``damaged`` rather than ending the file.
    """
    size = path.stat().st_size
    with path.open("rb") as f:
        try:
            reader = fastavro.reader(f)
            del reader
            header_end = good_end = f.tell()
        except Exception as exc:
            return Recovery(False, 0, size, f"{type(exc).__name__}: {exc}")
        f.seek(0)
        damaged: list[tuple[int, int, str]] = []
        pending: tuple[int, int, str] | None = None  # damage not yet known to be followed by a block
        stream: IO[bytes] = f
        error: str | None = None
        while True:
            try:
                for block in fastavro.block_reader(stream):
                    if pending is not None:
                        damaged.append(pending)
                        pending = None
                    good_end = block.offset + block.size
                return Recovery(True, good_end, size, error if pending is not None else None, tuple(damaged))
            except Exception as exc:
                at = good_end if pending is None else pending[0]
                first = f"{type(exc).__name__}: {exc}" if pending is None else pending[2]
                error = first
                resumed = _resume_after(f, header_end, max(good_end, pending[1] if pending else good_end))
                if resumed is None:
                    return Recovery(True, good_end, size, error, tuple(damaged))
                stream, resume_at, _ = resumed
                pending = (at, resume_at, first)


def fsync_dir(directory: Path) -> None:
    """Make renames and deletions in ``directory`` durable (POSIX: fsync the directory itself)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
