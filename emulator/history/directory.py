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
import logging
import os
import re
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class HistoryError(Exception):
    """The archive directory cannot be used (permissions, not a directory, damaged state)."""


def log_slug(identity: str) -> str:
    """A directory name for a log: readable, and unique through a hash of the full identity."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", identity).strip("_")[:80]
    return f"{readable}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


MARKER = "log.json"


class WriterLock:
    """The directory, created with its ``log.json`` marker, and the writer's ``flock`` on ``lock``.

    The marker names the archive's identity (``archive``: what the directory is named after) and the
    log's ``description`` as its writer last saw it (``log``; the ones before it in ``earlier``), so
    that a query naming the log by its path or bootstrap string still finds an archive named by id.
    """

    def __init__(self, directory: Path, identity: str, description: str | None = None, *, create: bool = True) -> None:
        self.directory = directory
        self._identity = identity
        self._description = identity if description is None else description
        self._create = create
        """False for a directory that must exist already: an earlier version's, which a daemon of
        this version starting at the same time may rename; re-created empty, it would split the archive."""
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Prepare the directory and try to become its writer; False when another process is.

        Raises ``HistoryError`` when the directory cannot be created or the lock file opened.
        """
        try:
            if self._create:
                self.directory.mkdir(parents=True, exist_ok=True)
            elif not self.directory.is_dir():
                raise HistoryError(
                    f"history directory {self.directory} was renamed by another daemon starting at the same time "
                    "(it took over this archive an earlier version named); restart this daemon"
                )
            if not (self.directory / MARKER).exists():
                write_marker(self.directory, self._identity, self._description)
            fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise HistoryError(f"history directory {self.directory} cannot be used: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        try:  # only the writer rewrites the marker: two daemons never race on it
            write_marker(self.directory, self._identity, self._description)
        except OSError as exc:
            self.release()
            raise HistoryError(f"history directory {self.directory} cannot be used: {exc}") from exc
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


def read_marker(directory: Path) -> dict[str, Any] | None:
    """The directory's ``log.json``, or None when it has none that can be read."""
    try:
        data = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("log"), str) else None


def write_marker(directory: Path, identity: str, description: str) -> None:
    """Name the archive's identity and the log's current description in ``log.json`` (atomically:
    queries read it meanwhile), keeping the descriptions it named before; untouched when it says so
    already. An earlier version's marker (``{"log": description}``) gains the identity. A marker
    that cannot be read is set aside (``_set_aside_damaged_marker``), never silently overwritten."""
    marker = _marker_to_rewrite(directory)
    earlier = [str(name) for name in marker.get("earlier", []) if isinstance(name, str)]
    named = marker.get("log")
    if isinstance(named, str) and named != description and named not in earlier:
        earlier.append(named)
    wanted: dict[str, Any] = {"log": description, "archive": identity}
    if earlier:
        wanted["earlier"] = earlier
    if marker == wanted:
        return
    tmp = directory / (MARKER + ".tmp")
    tmp.write_text(json.dumps(wanted) + "\n", encoding="utf-8")
    os.replace(tmp, directory / MARKER)


def _marker_to_rewrite(directory: Path) -> dict[str, Any]:
    """The marker ``write_marker`` starts from: ``{}`` when there is none, or when it is damaged (not
    a JSON object naming the log), which is then set aside first."""
    path = directory / MARKER
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError is one too
        problem = f"not JSON ({exc})"
    else:
        if isinstance(data, dict) and isinstance(data.get("log"), str):
            return data
        problem = "not a JSON object naming the log (a string 'log')"
    _set_aside_damaged_marker(path, problem)
    return {}


def _set_aside_damaged_marker(path: Path, problem: str) -> None:
    """Keep a damaged ``log.json`` as ``log.json.damaged`` (``.damaged.1``, … if taken) and say what is
    lost: the descriptions the log had before (its ``earlier`` list), by which queries found this archive."""
    target = path.with_name(path.name + ".damaged")
    n = 0
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged.{n}")
    os.rename(path, target)
    log.error(
        "history: %s is damaged (%s); set aside as %s and written again with the archive's identity and the "
        "log's current description. Lost with it: the log's earlier descriptions it listed ('earlier'), if any: "
        "a query naming the log by one of them (log=) no longer finds this archive; copy them back from %s "
        "into the new file's 'earlier' list if it can still be read",
        path,
        problem,
        target.name,
        target.name,
    )


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
