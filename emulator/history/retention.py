"""Retention: closed files older than the retention are folded into one base file, then deleted.

The base keeps the latest record of every key still live at the horizon (the newest time it
folded), so ``as_of`` stays exact for any time after the horizon (a partition written once, years
ago, is still there) while everything older is deleted: history is compacted the way the topic is.
Files are chosen by the times in their names, without opening them.

A failed fold deletes nothing (the new base is written to a temporary name and fsynced before any
file is replaced); files found damaged while folding are set aside as ``*.damaged``, not deleted.
Runs on the archiver thread: after every rotation and every few minutes while idle.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, cast

from fastavro.write import Writer

from emulator.history.files import ArchiveFile, ReadReport, base_name, fsync_dir, iter_file, read_metadata, scan_dir
from emulator.history.rows import ArchiveRow, record_time
from emulator.history.schema import FORMAT_KEY, HISTORY_FORMAT, history_schema
from emulator.history.stats import ArchiveStats

log = logging.getLogger(__name__)

DEFAULT_RETENTION_S = 30 * 86400.0


class Retention:
    """Folds a directory's old files; owned by the archiver thread."""

    def __init__(
        self,
        directory: Path,
        identity: str,
        retention_s: float,
        stats: ArchiveStats,
        files_lock: threading.Lock,
        codec: str = "deflate",
    ) -> None:
        self._directory = directory
        self._identity = identity
        self._retention_s = retention_s
        self._stats = stats
        self._files_lock = files_lock  # held while files are replaced or deleted
        self._codec = codec
        self._next_run = time.monotonic()

    def apply_if_due(self) -> None:
        """``apply`` at most every quarter of the retention (between 1 s and 10 min)."""
        now = time.monotonic()
        if now >= self._next_run:
            self._next_run = now + min(600.0, max(1.0, self._retention_s / 4))
            self.apply()

    def apply(self) -> None:
        """Fold closed files whose newest record is older than the retention into the base file."""
        cutoff = time.time_ns() // 1_000_000 - int(self._retention_s * 1000)
        base, live, leftovers = scan_dir(self._directory)
        for f in leftovers:
            with self._files_lock:
                f.path.unlink(missing_ok=True)
        candidates: list[ArchiveFile] = []
        for f in live:
            if f.kind != "closed" or f.max_time is None or f.max_time >= cutoff:
                break
            candidates.append(f)
        if not candidates:
            return
        try:
            self._fold(base, candidates)
        except Exception as exc:
            self._stats.write_error(f"retention: {type(exc).__name__}: {exc}")
            log.error("history retention failed (nothing was deleted): %s", self._stats.last_error)

    def _fold(self, base: ArchiveFile | None, candidates: list[ArchiveFile]) -> None:
        report = ReadReport()
        latest: dict[bytes | None, ArchiveRow] = {}
        epoch = -1
        horizon = -1
        if base is not None:
            horizon = int(read_metadata(base.path).get("horizon_ms", "-1"))
        folded = 0
        for f in ([base] if base else []) + candidates:
            for row in iter_file(f, report):
                if row["epoch"] > epoch:
                    epoch = row["epoch"]
                    latest.clear()
                elif row["epoch"] < epoch:
                    continue
                latest.pop(row["key"], None)
                latest[row["key"]] = row
                horizon = max(horizon, record_time(row))
                folded += 1
        damaged = {d["file"] for d in report.damaged}
        last_seq = candidates[-1].seq
        keep = [row for row in latest.values() if row["value"] is not None]
        tmp = self._directory / (base_name(last_seq) + ".tmp")
        with tmp.open("wb") as fo:
            writer = Writer(
                fo,
                history_schema(),
                codec=self._codec,
                metadata={
                    "log": self._identity,
                    "horizon_ms": str(horizon),
                    "folded_through_seq": str(last_seq),
                    "kind": "base",
                    FORMAT_KEY: str(HISTORY_FORMAT),
                },
            )
            for row in keep:
                writer.write(cast(dict[str, Any], row))  # a TypedDict is the dict fastavro takes
            writer.flush()
            fo.flush()
            os.fsync(fo.fileno())
        with self._files_lock:
            os.replace(tmp, self._directory / base_name(last_seq))
            fsync_dir(self._directory)
            for f in ([base] if base else []) + candidates:
                if str(f.path) in damaged:
                    f.path.rename(f.path.with_name(f.path.name + ".damaged"))
                else:
                    f.path.unlink(missing_ok=True)
            fsync_dir(self._directory)
        self._stats.files_folded += len(candidates)
        log.info(
            "history retention: folded %d file(s) (%d records, newest %d ms) into %s, which keeps the %d "
            "records still live then; as_of is exact from that time on%s",
            len(candidates),
            folded,
            horizon,
            base_name(last_seq),
            len(keep),
            f"; {len(damaged)} damaged file(s) set aside as *.damaged" if damaged else "",
        )
