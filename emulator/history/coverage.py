"""Whether an archive that another process writes holds this process's writes yet.

A second daemon on the same log and data directory opens the archive read-only
(``directory.py``): the first daemon archives every record of the log, the second's included, as
its own reader delivers them. A history query on the second daemon must wait until that archive
holds the second daemon's latest writes (read-your-writes) or say that it may not, and a rollback
must not start from it at all: a past state missing a write would undo it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from emulator.history.files import ReadReport, iter_file, scan_dir


def archived_ends(directory: Path, partitions: Mapping[int, int]) -> dict[int, int]:
    """Partition → the offset after the newest record archived for it in the newest epoch, for the
    keys of ``partitions`` (a partition without one is absent).

    Files are read newest first, and the scan stops once every partition was met: a partition's
    records are archived in log order, so the newest file holding it holds its newest record. A
    query right after a write usually reads only the file being written. A file renamed by the
    writer in between is missed (counted in a throwaway report): the caller asks again.
    """
    newest: dict[int, tuple[int, int]] = {}  # partition → (epoch, end)
    base, live, _ = scan_dir(directory)
    for file in reversed(([base] if base else []) + live):
        met: dict[int, tuple[int, int]] = {}
        for row in iter_file(file, ReadReport()):
            partition = row["kafka_partition"]
            if partition in partitions and partition not in newest:
                mark = (row["epoch"], row["kafka_offset"] + 1)
                met[partition] = max(met.get(partition, mark), mark)
        newest.update(met)
        if newest.keys() >= partitions.keys():
            break
    epoch = max((e for e, _ in newest.values()), default=None)
    return {p: end for p, (e, end) in newest.items() if e == epoch}


def holds(directory: Path, ends: Mapping[int, int]) -> bool:
    """True when the archive holds every record below ``ends`` (partition → offset after the last)."""
    archived = archived_ends(directory, ends)
    return all(archived.get(partition, 0) >= end for partition, end in ends.items())
