"""Kafka's ``FileStreamSourceTask`` line and position rules, reproduced for readers outside the JVM.

Everything here follows ``connect/file/.../FileStreamSourceTask.java`` (Apache Kafka 4.3.0):

- The file is decoded as UTF-8 (``InputStreamReader``: malformed input becomes U+FFFD) into a
  ``char[]``. A line ends at ``\\n``, ``\\r`` or ``\\r\\n``; nothing else (no U+2028, no NEL).
- A ``\\r`` that is the last character read so far is held back until the next character shows
  whether it is ``\\r\\n``; at the end of the file that line is therefore not emitted yet.
- ``position`` advances by the line plus its terminator in Java ``char``s (UTF-16 code units), and a
  record's offset is the position *after* its line: the start of the next line.
- On restart the task ``skip()``s ``position`` **bytes** and counts chars from there.

The last two rules disagree as soon as the file holds a non-ASCII character: a committed position
is then smaller than the byte offset of the line it denotes, and a restarted task resumes early
(repeating text, possibly mid-character, which decodes to U+FFFD). For interoperability a cursor
carries both numbers: ``position`` (what Connect would have committed, kept in Connect's units)
and ``byte_offset`` (where the next line really starts). Resuming from a Connect position does what
Connect does: ``byte_offset = position``.

Past the end of the file, JDK 17's ``Files.newInputStream(...).skip`` stops at the end and then
returns 0, so the task's skip loop waits (spinning) until the file has grown to ``position`` bytes;
a reader here simply sees no complete line until then.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

_TERMINATOR = re.compile(rb"\r\n|\r|\n")
_TERMINATOR_TEXT = re.compile(r"\r\n|\r|\n")
CHUNK = 8 << 20


@dataclass(frozen=True, slots=True)
class Cursor:
    """A point just after a complete line (or where a resume started).

    ``position`` is Connect's ``{"position": N}``; ``byte_offset`` is the file offset of the same point.
    """

    position: int
    byte_offset: int

    @classmethod
    def from_connect(cls, position: int) -> Cursor:
        """Where Connect's task resumes for a stored position: ``skip(position)`` bytes (none if <= 0)."""
        return cls(position, max(position, 0))


@dataclass(frozen=True, slots=True)
class Scan:
    """What a scan found: the cursor after the last complete line, and how many lines that covered
    (``None`` when not counted: counting costs a pass over the data that most callers do not need)."""

    end: Cursor
    lines: int | None


def java_chars(data: bytes) -> int:
    """UTF-16 code units of ``data`` decoded as Connect decodes it (UTF-8, malformed input replaced)."""
    if data.isascii():
        return len(data)
    return len(data.decode("utf-8", errors="replace").encode("utf-16-le")) // 2


def _complete_end(buf: bytes) -> int:
    """Length of the longest prefix of ``buf`` that ends with a complete terminator (0 if none).

    A trailing ``\\r`` is undecidable (it may be half of ``\\r\\n``): at the end of the file it is held
    back as Connect holds it back; inside a longer file the next read decides it.
    """
    lf = buf.rfind(b"\n")
    cr = buf.rfind(b"\r", lf + 1)  # only a CR after the last LF can matter
    last = max(lf, cr)
    if last < 0:
        return 0
    if last == lf or last + 1 < len(buf):
        return last + 1
    # The buffer ends with a lone "\r": the complete part ends at the terminator before it.
    previous = max(buf.rfind(b"\n", 0, last), buf.rfind(b"\r", 0, last))
    return previous + 1


def scan(
    path: str | os.PathLike[str],
    start: Cursor,
    max_lines: int | None = None,
    limit_bytes: int | None = None,
    count_lines: bool = True,
) -> Scan:
    """Complete lines from ``start``: at most ``max_lines``, and no byte at or beyond ``limit_bytes``.
    Lines are always counted with ``max_lines``; without it only if ``count_lines``.

    A missing file or one shorter than ``start.byte_offset`` has no complete line yet (Connect waits).
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; a missing file is an expected state
    except FileNotFoundError:
        return Scan(start, 0)
    with f:
        size = os.fstat(f.fileno()).st_size
        end_of_data = size if limit_bytes is None else min(size, limit_bytes)
        if end_of_data <= start.byte_offset:
            return Scan(start, 0)
        f.seek(start.byte_offset)
        position, byte_offset, lines = start.position, start.byte_offset, 0
        carry = b""
        remaining = end_of_data - start.byte_offset
        while remaining > 0 or carry:
            chunk = f.read(min(CHUNK, remaining)) if remaining > 0 else b""
            remaining -= len(chunk)
            if chunk == b"" and remaining > 0:  # the file shrank while we read it
                remaining = 0
            at_eof = remaining <= 0
            buf = carry + chunk
            if max_lines is None:
                cut = _complete_end(buf)
                if count_lines:
                    lines += _count_lines(buf, cut)
            else:
                cut, found = _cut_after_lines(buf, max_lines - lines)
                lines += found
            position += java_chars(buf[:cut])
            byte_offset += cut
            carry = buf[cut:]
            if at_eof or (max_lines is not None and lines >= max_lines):
                break
        counted = count_lines or max_lines is not None
        return Scan(Cursor(position, byte_offset), lines if counted else None)


def _count_lines(buf: bytes, cut: int) -> int:
    head = buf[:cut] if cut < len(buf) else buf
    lf = head.count(b"\n")
    if head.find(b"\r") < 0:
        return lf
    return lf + head.count(b"\r") - head.count(b"\r\n")


def _cut_after_lines(buf: bytes, wanted: int) -> tuple[int, int]:
    """End of the first ``wanted`` complete lines in ``buf`` (a trailing lone ``\\r`` is undecidable)."""
    cut, found = 0, 0
    if wanted <= 0:
        return 0, 0
    for match in _TERMINATOR.finditer(buf):
        if match.group() == b"\r" and match.end() == len(buf):
            break
        cut, found = match.end(), found + 1
        if found >= wanted:
            break
    return cut, found


def split_at_lines(path: str | os.PathLike[str], start: int, end: int, pieces: int) -> list[tuple[int, int]]:
    """Cut the byte range ``[start, end)`` (which ends after a terminator) into up to ``pieces``
    ranges that each end after a terminator, so executors can read them independently."""
    if pieces <= 1 or end - start < 2:
        return [(start, end)] if end > start else []
    step = (end - start) // pieces
    cuts = [start]
    with open(path, "rb") as f:
        for i in range(1, pieces):
            target = max(start + i * step, cuts[-1])
            cut = _next_boundary(f, target, end)
            if cut is not None and cuts[-1] < cut < end:
                cuts.append(cut)
    cuts.append(end)
    return list(itertools.pairwise(cuts))


def _next_boundary(f: BinaryIO, target: int, end: int) -> int | None:
    """The first line boundary after ``target`` (never between the ``\\r`` and ``\\n`` of one terminator)."""
    window = 64 << 10
    pos = target
    while pos < end:
        f.seek(pos)
        data = f.read(min(window, end - pos) + 1)  # one byte of lookahead for "\r\n"
        for match in _TERMINATOR.finditer(data):
            stop = match.end()
            if match.group() == b"\r" and stop == len(data):
                break  # lookahead exhausted; re-read from here
            if pos + stop <= end:
                return pos + stop
            return None
        pos += max(len(data) - 1, 1)
    return None


def read_lines(path: str | os.PathLike[str], start: int, end: int) -> list[str]:
    """The lines in ``[start, end)``, decoded and split exactly as Connect does (terminators dropped)."""
    return [line for piece in iter_chunks(path, start, end) for line in split_lines(piece)]


def split_lines(piece: bytes) -> list[str]:
    """A piece that ends after a terminator, as Connect's lines: UTF-8 with U+FFFD for malformed input.

    Decoding a piece alone equals decoding it inside the stream: the byte before each cut is ASCII (a
    terminator), and a resume point inside a character decodes to U+FFFD here as in the JVM.
    """
    text = piece.decode("utf-8", errors="replace")
    parts = text.split("\n") if "\r" not in text else _TERMINATOR_TEXT.split(text)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def iter_chunks(path: str | os.PathLike[str], start: int, end: int, batch_bytes: int = 4 << 20) -> Iterator[bytes]:
    """The bytes ``[start, end)`` in pieces of about ``batch_bytes``, each ending after a terminator.

    ``start`` is a line boundary or a Connect resume point; ``end`` follows a terminator. A line longer
    than ``batch_bytes`` makes one larger piece.
    """
    pos = start
    with open(path, "rb") as f:
        while pos < end:
            f.seek(pos)
            data = f.read(min(batch_bytes, end - pos))
            if not data:
                return  # the file shrank since the batch was planned
            cut = len(data) if pos + len(data) >= end else _complete_end(data)
            if cut == 0:
                more = _next_boundary(f, pos + len(data) - 1, end)
                cut = (more if more is not None else end) - pos
                f.seek(pos)
                data = f.read(cut)
            yield data[:cut] if cut < len(data) else data
            pos += cut
