"""Whether the log's file at its path is still the file this process opened.

A data directory deleted under a running daemon (``rm -rf``), or the log's files deleted or replaced
(a restore copied over it, a cleanup job), leaves SQLite writing to the file it has open: every
commit succeeds into an inode no path leads to, and the next start creates a new, empty log at the
path. Every write acknowledged since is lost, and SQLite says nothing (in WAL mode it does not look).
So the log remembers the device and inode of its file and of its write-ahead log at open, and:

* each group commit compares them with what the path holds now: before ``COMMIT`` (two ``stat``
  calls), so a write to a file that is gone is rolled back and refused (503 ``log_storage_refused``,
  nothing was written), and both once more after it, so a write whose files went during its commit
  (``rm -rf`` while it fsyncs, or the ``-wal`` alone, which holds the commit until a checkpoint) is
  not acknowledged either. About 2.5 µs a ``stat`` on a loaded machine, against a commit's 0.6-1 ms
  of CPU and its fsync;
* a thread of its own compares them every ``CHECK_INTERVAL_S`` while the log is open, so ``/readyz``
  turns 503 and the log says so at ERROR without a write.

The condition is for good: the daemon cannot get back to a file at the path (a restored one is
another file, and the one it has open will not be found by a restart), so writes stay refused until
the daemon is restarted; reads of the view, which hold everything acknowledged before, go on, so the
offsets can still be exported from the daemon before it stops.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from emulator.logs.last_error import LastError

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0
"""How often the file is looked at while no write does."""

_Identity = tuple[int, int]


def _identity(path: str) -> _Identity | None:
    """The file's device and inode; None when no file is at the path (nor its directory)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_dev, st.st_ino


class FileIdentity:
    """The identity of the log's file and write-ahead log, remembered at open, and whether the path
    still leads to them. ``lost()`` is sticky: once the file is gone, it is gone for this process."""

    def __init__(
        self, description: str, path: Path, errors: LastError | None = None, interval_s: float = CHECK_INTERVAL_S
    ) -> None:
        self._description = description
        self._files = (str(path), str(path.with_name(path.name + "-wal")))  # str: no conversion per stat
        self._errors = errors
        self._interval_s = interval_s
        self._opened: list[_Identity | None] = [None, None]
        self._lost: str | None = None
        self._lock = threading.Lock()  # guards _lost's setting (logged once)
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def remember(self) -> None:
        """The files as opened (called once the writing connection has created them), and start
        watching them."""
        self._opened = [_identity(file) for file in self._files]
        if self._watcher is None and not self._stop.is_set():
            self._watcher = threading.Thread(target=self._watch, name="embedded-log-file-watch", daemon=True)
            self._watcher.start()

    def reason(self) -> str | None:
        """Why writes are refused for good, once the file was found gone; None before. Never blocks."""
        return self._lost

    def check(self) -> str | None:
        """Look at the path now: why writes must be refused (the file is no longer the one opened), or
        None. A write-ahead log that did not exist at open is taken as it is the first time it is
        seen."""
        if self._lost is not None:
            return self._lost
        for i, file in enumerate(self._files):
            try:
                now = _identity(file)
            except OSError:  # e.g. a directory made unsearchable: the file may be there; the write tells
                return None
            opened = self._opened[i]
            if opened is None:
                if i == 0:
                    return None  # never opened (remember() not called yet)
                self._opened[i] = now
                continue
            if now != opened:
                return self._found_lost(file, opened, now)
        return None

    def _found_lost(self, file: str, opened: _Identity, now: _Identity | None) -> str:
        what = (
            f"{file} was deleted"
            if now is None
            else f"{file} was replaced by another file (device {now[0]}, inode {now[1]}; "
            f"the log opened device {opened[0]}, inode {opened[1]})"
        )
        reason = (
            f"{what} while this process had it open: a restart would not find the writes made since (it "
            "would open what the path holds now, or create an empty log), so writes are refused until "
            "the process is restarted. A daemon's reads still serve every offset acknowledged before: "
            "export them from it (connect-offsets export), or put the log's files back from a backup, "
            "then restart it knowing what the backup lacks"
        )
        with self._lock:
            if self._lost is not None:
                return self._lost
            self._lost = reason
        log.error("%s: %s", self._description, reason)
        if self._errors is not None:
            self._errors.remember(f"the storage refuses writes: {reason}")
        return reason

    def close(self) -> None:
        """Stop watching (the log is closing). Idempotent."""
        self._stop.set()
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=10.0)

    def _watch(self) -> None:
        while not self._stop.wait(self._interval_s):
            if self.check() is not None:
                return
