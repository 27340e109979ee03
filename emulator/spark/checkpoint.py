"""Reading a Spark Structured Streaming checkpoint without Spark: the last *completed* batch.

Spark writes ``offsets/N`` (write-ahead: the batch's end offsets) before running batch N and
``commits/N`` after its sink committed. Only a batch with both files is done, so that is the only
batch whose end offsets may be published to a store another engine resumes from. This module is
used by the CLI (no pyspark import allowed) and by the listener.

``offsets/N`` (``OffsetSeqLog``): line 1 ``v1`` or ``v2``; line 2 the batch metadata JSON; then one
line per source. v1: source ``k`` is line ``k+3``, ``-`` when it has no offset. v2 (Spark 4.2+,
``spark.sql.streaming.offsetLog.formatVersion=2``, observed with 4.3.0): each line is
``<sourceId>:<offset JSON>`` in any order. Offset strings are kept exactly as written, because
Spark compares them as strings.
"""

from __future__ import annotations

import ast
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

log = logging.getLogger(__name__)


class CheckpointError(Exception):
    """The checkpoint cannot be used (not local, unreadable, or not a Spark checkpoint)."""


@dataclass(frozen=True, slots=True)
class CompletedBatch:
    batch_id: int
    version: int
    sources: dict[str, str | None]
    """Raw offset JSON by source id (``"0"``, ``"1"``, … for v1); ``None`` where the line was ``-``."""

    def source(self, index: int | str) -> str | None:
        key = str(index)
        if key not in self.sources:
            raise CheckpointError(
                f"batch {self.batch_id} has no source {key} (sources: {', '.join(self.sources) or 'none'})"
            )
        return self.sources[key]


def local_path(location: str | os.PathLike[str]) -> Path:
    """A checkpoint location as a local path; ``file:`` URIs are accepted, other schemes refused.

    Read as Hadoop's ``Path(String)`` reads it, where Spark wrote the checkpoint: the text after
    ``file:`` (and after ``//authority``, if any) is the path as it is, never percent-decoded and
    never cut at ``?`` or ``#``. ``file:///tmp/a%41`` is the directory ``/tmp/a%41`` to Spark (checked
    in a JVM: ``new Path("file:///tmp/a b%41").toString()`` is ``file:/tmp/a b%41``, and so is the
    ``resolvedCheckpointRoot`` the listener prints); decoding it read ``/tmp/aA`` instead."""
    text = os.fspath(location)
    scheme = urlparse(text).scheme
    if scheme == "file":
        rest = text[len("file:") :]
        if rest.startswith("//"):
            slash = rest.find("/", 2)
            rest = rest[slash:] if slash >= 0 else "/"
        return Path(rest)
    if scheme == "" or (len(scheme) == 1 and os.name == "nt"):
        return Path(text)
    raise CheckpointError(f"only local checkpoints can be read without Spark, not {text!r}")


def _batch_ids(directory: Path) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise CheckpointError(f"cannot list {directory}: {exc.strerror or exc}") from exc
    return sorted(int(n) for n in names if n.isdigit())


def parse_offset_log(text: str, where: str = "offsets file") -> tuple[int, dict[str, str | None]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or not lines[0].startswith("v"):
        raise CheckpointError(f"{where} is not a Spark offset log entry (first line {lines[:1]!r})")
    try:
        version = int(lines[0][1:])
    except ValueError as exc:
        raise CheckpointError(f"{where}: unknown version line {lines[0]!r}") from exc
    body = lines[2:]
    sources: dict[str, str | None] = {}
    if version == 1:
        for index, line in enumerate(body):
            sources[str(index)] = None if line == "-" else line
    elif version == 2:
        for line in body:
            source_id, sep, raw = line.partition(":")
            if not sep:
                raise CheckpointError(f"{where}: v2 line without 'sourceId:' prefix: {line[:80]!r}")
            sources[source_id] = None if raw == "-" else raw
    else:
        raise CheckpointError(f"{where}: offset log version v{version} is not supported (v1, v2 are)")
    return version, sources


def latest_completed_batch(checkpoint: str | os.PathLike[str]) -> CompletedBatch | None:
    """The highest batch with both ``commits/N`` and ``offsets/N``; ``None`` before the first one."""
    root = local_path(checkpoint)
    if not root.is_dir():
        raise CheckpointError(f"checkpoint directory {root} does not exist")
    if not (root / "metadata").is_file() and not (root / "offsets").is_dir():
        # "no completed batch yet" here would let a mistyped path pass for a query that did nothing
        inside = sorted(str(d) for d in root.iterdir() if d.is_dir() and (d / "metadata").is_file())
        hint = f"; the checkpoints in it: {', '.join(inside[:5])}" if inside else ""
        raise CheckpointError(
            f"{root} is not a Spark checkpoint: it has no metadata file and no offsets/ directory (the query's "
            f"checkpointLocation is the directory holding them){hint}"
        )
    offsets = set(_batch_ids(root / "offsets"))
    for batch_id in reversed(_batch_ids(root / "commits")):
        if batch_id not in offsets:
            continue  # purged or half-written: an older completed batch may still be complete
        path = root / "offsets" / str(batch_id)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CheckpointError(f"cannot read {path}: {exc.strerror or exc}") from exc
        version, sources = parse_offset_log(text, str(path))
        return CompletedBatch(batch_id, version, sources)
    return None


def unfinished_batch(checkpoint: str | os.PathLike[str]) -> int | None:
    """The batch Spark planned (``offsets/N``) and did not complete (no ``commits/N``) after the last
    completed one, or ``None``: a query stopped or crashed mid-batch. Its sink may have written some
    or all of it, yet whoever resumes from the last completed batch (Connect after a hand-off, or
    Spark itself from this checkpoint) produces it again: at-least-once for that batch."""
    root = local_path(checkpoint)
    planned, completed = _batch_ids(root / "offsets"), _batch_ids(root / "commits")
    if not planned or (completed and planned[-1] <= completed[-1]):
        return None
    return planned[-1]


def planned_sources(checkpoint: str | os.PathLike[str], batch_id: int) -> dict[str, str | None]:
    """The sources' offsets Spark planned for ``batch_id`` (``offsets/N``), e.g. a batch cut off mid-way."""
    path = local_path(checkpoint) / "offsets" / str(batch_id)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CheckpointError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return parse_offset_log(text, str(path))[1]


def unfinished_note(batch_id: int) -> str:
    """What a batch cut off mid-way means for a hand-off, as the listener and ``stop_between_batches`` say it."""
    return (
        f"batch {batch_id} was cut off mid-way (offsets/{batch_id} without commits/{batch_id}): its sink may already "
        f"hold some or all of its output, and whoever resumes from the last completed batch (the connector after "
        f"the hand-off, or this checkpoint) produces batch {batch_id} again, as after a crash. To hand over "
        "without that, stop between batches: emulator.spark.stop_between_batches(query)"
    )


def parse_offset(value: Any) -> Any:
    """An offset as Spark hands it around, as a JSON value; ``None`` when there is none.

    Accepts the raw JSON string (checkpoint lines, classic listener events), the literal ``'None'``
    (a Java null through ``str()``), ``None``, an already-parsed dict, and a Python ``repr`` of a dict
    (older PySpark progress objects). Anything else is logged and treated as no offset.
    """
    if value is None:
        return None
    if isinstance(value, dict | list | int | float):
        return value
    if not isinstance(value, str):
        log.warning("ignoring an offset of unexpected type %s", type(value).__name__)
        return None
    text = value.strip()
    if text in ("", "None", "null", "-"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        log.warning("ignoring an offset that is neither JSON nor a Python literal: %.200s", text)
        return None
