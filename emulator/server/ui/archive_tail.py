"""Reads a history archive directory incrementally: each call returns only the rows added since.

The console draws every partition's history and shows every connector's last change; asking the
archive for them per page (``emulator.history.query``) decodes every file each time, seconds for
100,000 records. So the console keeps an index (``history_index.py``) fed by this reader, which
remembers, per file, the byte offset after the last complete Avro block it decoded, and next time
decodes only what lies beyond: the file being written grows by whole blocks (the unit the archiver
flushes), closed files never change, and a rotated file keeps its sequence number.

It reads the files only (no lock, no private state of the archiver), so it works on an archive
another process writes, too. What it cannot follow incrementally it reports as ``reset``, and the
caller starts over: retention folded files into a new base file, or a file it was reading vanished.

Damage is handled as ``emulator.history.files.iter_file`` does: a block whose records fail their
checksum is skipped and reported; a closed file whose framing breaks is read up to there. The file
being written may end in a block still being written: that is not damage, it is read next time.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import fastavro

from emulator.history.files import ArchiveFile, scan_dir
from emulator.history.rows import ArchiveRow
from emulator.history.schema import content_crc, missing_fields

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Cursor:
    """How far one file has been read: its header (to decode blocks read from the middle), the byte
    offset after the last complete block, whether nothing more can come."""

    header: bytes
    missing: tuple[str, ...]
    end: int
    done: bool = False


@dataclass(slots=True)
class TailBatch:
    """What one call found. ``reset``: forget every row read before and take ``rows`` as all of them."""

    rows: list[ArchiveRow] = field(default_factory=list)
    reset: bool = False
    damaged: list[str] = field(default_factory=list)


class ArchiveTail:
    """Not thread-safe: one caller at a time (the index holds a lock around it)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._cursors: dict[tuple[str, int], _Cursor] = {}
        self._base: int | None = None
        self._started = False

    def read_new(self) -> TailBatch:
        batch = TailBatch()
        base, live, _ = scan_dir(self.directory)
        base_seq = base.seq if base is not None else None
        live_keys = {_key(f) for f in live}
        vanished = any(k[0] != "base" and k not in live_keys for k in self._cursors)
        if self._started and (base_seq != self._base or vanished):
            self._cursors.clear()
            batch.reset = True
        self._started = True
        self._base = base_seq
        for file in ([base] if base is not None else []) + live:
            self._read_file(file, batch)
        return batch

    def _read_file(self, file: ArchiveFile, batch: TailBatch) -> None:
        key = _key(file)
        cursor = self._cursors.get(key)
        if cursor is not None and cursor.done:
            return
        try:
            with file.path.open("rb") as handle:
                if cursor is None:
                    cursor = _open_cursor(handle)
                    if cursor is None:
                        return  # a header still being written (a brand-new file): next time
                    self._cursors[key] = cursor
                handle.seek(cursor.end)
                tail = handle.read()
        except FileNotFoundError:
            return  # renamed by rotation between listing and opening: found under its new name next time
        except OSError as exc:
            log.warning("console history: cannot read %s: %s", file.path, exc)
            return
        self._decode(file, cursor, tail, batch)

    def _decode(self, file: ArchiveFile, cursor: _Cursor, tail: bytes, batch: TailBatch) -> None:
        header_size = len(cursor.header)
        start = cursor.end  # the file offset where ``tail`` begins; in the stream it follows the header
        blocks = fastavro.block_reader(io.BytesIO(cursor.header + tail))
        while True:
            try:
                block = next(blocks)
                decoded = cast(list[dict[str, Any]], list(block))
            except StopIteration:
                break
            except Exception as exc:
                if file.kind != "open":
                    batch.damaged.append(f"{file.path}: damaged block at byte {cursor.end} ({type(exc).__name__})")
                    cursor.done = True
                return  # the file being written: the rest of this block has not been flushed yet
            cursor.end = start + block.offset + block.size - header_size
            for record in decoded if cursor.missing else ():
                record.update(dict.fromkeys(cursor.missing))
            rows = cast(list[ArchiveRow], decoded)
            if any(r.get("crc32") != content_crc(r) for r in rows):
                batch.damaged.append(f"{file.path}: a block before byte {cursor.end} fails its checksums (skipped)")
                continue
            batch.rows.extend(rows)
        if file.kind != "open":
            cursor.done = True


def _key(file: ArchiveFile) -> tuple[str, int]:
    """A file's identity across a rotation: the sequence number (the name changes, the seq does not)."""
    return ("base" if file.kind == "base" else "log", file.seq)


def _open_cursor(handle: io.BufferedReader) -> _Cursor | None:
    try:
        blocks = fastavro.block_reader(handle)
    except Exception:
        return None
    header_end = handle.tell()
    handle.seek(0)
    header = handle.read(header_end)
    missing = missing_fields(cast(dict[str, Any], blocks.writer_schema))
    return _Cursor(header=header, missing=missing, end=header_end)
