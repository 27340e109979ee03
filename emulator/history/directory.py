"""One log's archive directory: its name, its marker file, and the lock that makes one process its writer.

Several daemons may serve the same log with the same history directory. Two writers would archive
every record twice and race on renames, so the first to take an ``flock`` on ``lock`` writes; the
others open the archive read-only (queries work, they archive nothing, the writer sees the same
records). ``flock`` is released by the kernel when the process dies, so a crash never leaves a
stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
from pathlib import Path


class HistoryError(Exception):
    """The archive directory cannot be used (permissions, not a directory, damaged state)."""


def log_slug(identity: str) -> str:
    """A directory name for a log: readable, and unique through a hash of the full identity."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", identity).strip("_")[:80]
    return f"{readable}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


class WriterLock:
    """The directory, created with its ``log.json`` marker, and the writer's ``flock`` on ``lock``."""

    def __init__(self, directory: Path, identity: str) -> None:
        self.directory = directory
        self._identity = identity
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Prepare the directory and try to become its writer; False when another process is.

        Raises ``HistoryError`` when the directory cannot be created or the lock file opened.
        """
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            marker = self.directory / "log.json"
            if not marker.exists():
                marker.write_text(json.dumps({"log": self._identity}) + "\n", encoding="utf-8")
            fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise HistoryError(f"history directory {self.directory} cannot be used: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give up the writer's role (idempotent)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
            self._fd = None


def written_by_a_live_process(directory: Path) -> bool:
    """Whether a running process holds the writer's lock of this archive directory, found without
    taking that lock even for an instant: a daemon starting at that instant would find it taken and
    serve its archive read-only for good. Linux lists every ``flock`` in ``/proc/locks``; elsewhere
    the lock is tried (and released), which leaves that instant open."""
    lock = directory / "lock"
    try:
        st = os.stat(lock)
    except OSError:
        return False  # never written: no writer
    listed = _listed_flock(st)
    if listed is not None:
        return listed
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _listed_flock(st: os.stat_result) -> bool | None:
    """Whether ``/proc/locks`` lists an exclusive ``flock`` on this file; None where it cannot be read.
    Its lines read ``1: FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF`` (hex device)."""
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            lines = locks.readlines()
    except OSError:
        return None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[3] == "WRITE" and fields[5] == wanted:
            return True
    return False
