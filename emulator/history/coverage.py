"""Whether an archive that another process writes holds this process's writes yet.

A second daemon on the same log and data directory opens the archive read-only
(``directory.py``): the first daemon archives every record of the log, the second's included, as
its own reader delivers them. A history query on the second daemon must wait until that archive
holds the second daemon's latest writes (read-your-writes) or say that it may not, and a rollback
must not start from it at all: a past state missing a write would undo it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from emulator.history.files import ArchiveFile, ReadReport, iter_file, scan_dir

Marks = dict[int, tuple[int, int]]
"""Partition → (epoch, the offset after its newest record) in one file."""


class ArchiveCoverage:
    """What another process's archive holds, per partition. Closed and base files never change once
    named, so each is read once (a query waiting for the writer asks every 50 ms, and the partition
    it waits for may be in no recent file at all); the file being written is read each time."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._closed: dict[Path, Marks] = {}
        self._lock = threading.Lock()  # queries run on worker threads, several at once

    def holds(self, ends: Mapping[int, int]) -> bool:
        """True when the archive holds every record below ``ends`` (partition → offset after the last)."""
        with self._lock:
            archived = self.archived_ends(ends)
        return all(archived.get(partition, 0) >= end for partition, end in ends.items())

    def archived_ends(self, partitions: Mapping[int, int]) -> dict[int, int]:
        """Partition → the offset after the newest record archived for it in the newest epoch, for the
        keys of ``partitions`` (a partition without one is absent). Files newest first, stopping once
        every partition was met: a partition's records are archived in log order, so the newest file
        holding it holds its newest record. A file renamed by the writer meanwhile is missed (a
        throwaway report counts it): the caller asks again."""
        newest: Marks = {}
        base, live, _ = scan_dir(self._directory)
        files = ([base] if base else []) + live
        named = {f.path for f in files}
        self._closed = {path: marks for path, marks in self._closed.items() if path in named}
        for file in reversed(files):
            for partition, mark in self._marks(file).items():
                if partition in partitions and partition not in newest:
                    newest[partition] = mark
            if newest.keys() >= partitions.keys():
                break
        epoch = max((e for e, _ in newest.values()), default=None)
        return {p: end for p, (e, end) in newest.items() if e == epoch}

    def _marks(self, file: ArchiveFile) -> Marks:
        known = self._closed.get(file.path)
        if known is not None:
            return known
        marks: Marks = {}
        report = ReadReport()
        for row in iter_file(file, report):
            mark = (row["epoch"], row["kafka_offset"] + 1)
            partition = row["kafka_partition"]
            marks[partition] = max(marks.get(partition, mark), mark)
        if file.kind != "open" and not report.damaged:
            self._closed[file.path] = marks
        return marks
