"""Writes the embedded log's storage refuses: a full disk, an I/O error, a file made read-only.

Such a write fails at once, and will fail the same way until an operator frees space or mends the
mount, so the daemon treats it as Kafka's backend treats a broker that stopped answering: the
request gets 503 with ``Retry-After`` (nothing was written; retrying later is right, as for a broker
stall) instead of a 500, and ``/readyz`` answers 503 with the reason, so a load balancer or an
orchestrator stops sending writes to a daemon that can only refuse them. Reads of the view go on
being served meanwhile.

Readiness has to come back on its own: with ``/readyz`` at 503 no write may arrive to prove the disk
works again. So while writes fail, a probe thread tries a write every ``PROBE_INTERVAL_S``; the
first write that succeeds, the probe's or a request's, ends the fault and logs how long it lasted.
The probe writes as many bytes as the refused write carried (at least a page, at most
``PROBE_MAX_BYTES``) into a metadata row nothing reads, then removes it: a tiny probe would succeed
on a disk with a few free pages (SQLite reuses its write-ahead log's space) while the write that was
refused would fail again, and readiness would say what is not so. Other SQLite errors (a damaged
file, a locked database) stay what they were: they are not the storage refusing writes.
"""

from __future__ import annotations

import logging
import os
import resource
import sqlite3
from collections.abc import Callable
from pathlib import Path

from emulator.logs.embedded.probed_condition import ProbedCondition
from emulator.logs.last_error import LastError

log = logging.getLogger(__name__)

PROBE_INTERVAL_S = 2.0
"""How often a write is tried while the storage refuses them."""

PROBE_MIN_BYTES = 4096
PROBE_MAX_BYTES = 1 << 20
"""The probe's size bounds: a page at least; at most 1 MiB, so probing a disk that refused a large
import does not fill it again (that import may then be refused once more, and readiness follows)."""

_FAULTS = {
    "SQLITE_FULL": "the disk is full",
    "SQLITE_IOERR": "the disk reported an I/O error",
    "SQLITE_READONLY": "the log's file cannot be written (read-only file or file system)",
    "SQLITE_CANTOPEN": "a file of the log cannot be opened",
}


_WRITE_IOERRS = frozenset({"SQLITE_IOERR_WRITE", "SQLITE_IOERR_SHORT_WRITE", "SQLITE_IOERR_TRUNCATE"})
"""The I/O errors of a file growing: what a write past the file-size limit (``EFBIG``) is reported as."""


def storage_fault(e: sqlite3.Error, path: Path | None = None) -> str | None:
    """What the storage refused, in an operator's words, or None when ``e`` is not such a refusal.
    With the log's ``path``, a refusal the file's permissions or mount explain says so: SQLite
    reports a file made immutable as an I/O error, and a file of another owner as a read-only one.
    An I/O error on write while this process has a file-size limit names the limit: SQLite reports
    a write past it (``EFBIG``) as a mere "disk I/O error"."""
    name = getattr(e, "sqlite_errorname", "") or ""
    for prefix, meaning in _FAULTS.items():
        if name.startswith(prefix):
            why = why_unwritable(path) if path is not None and prefix != "SQLITE_FULL" else None
            if why is None and name in _WRITE_IOERRS:
                why = _file_size_limited()
            return f"{why} (SQLite: {e})" if why else f"{meaning} (SQLite: {e})"
    return None


def _file_size_limited() -> str | None:
    """An I/O error on write, said with this process's file-size limit when it has one (asked only
    when a write failed: one ``getrlimit``)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY:
        return None
    return (
        f"the disk reported an I/O error on write; this process's file-size limit (ulimit -f, {soft} bytes) "
        "may be the cause: a file of the log may not grow past it. Raise or lift it (ulimit -f unlimited, "
        "LimitFSIZE= in a systemd unit, prlimit --fsize on the running daemon)"
    )


def why_unwritable(path: Path) -> str | None:
    """Why this process cannot write the log at ``path`` (its file, its write-ahead log and shared
    memory files, its directory), in an operator's words; None when nothing here stands in the way.

    Asked with ``access(2)``, as the kernel judges it (root without ``CAP_DAC_OVERRIDE``, ACLs,
    ``chattr +i``), and never by opening the files: closing any descriptor of a SQLite file drops
    every POSIX lock this process holds on it, those of its open connections included — the daemon's
    own connections, when a refused write asks why."""
    directory = path.parent
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return f"the file system holding {directory} is mounted read-only"
    except OSError:
        return None
    effective = os.access in os.supports_effective_ids
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists() and not os.access(file, os.W_OK, effective_ids=effective):
            return _refused(file)
    if not os.access(directory, os.W_OK | os.X_OK, effective_ids=effective):
        return _refused(directory)
    return None


def _refused(file: Path) -> str:
    try:
        stat = file.stat()
        owner = f"owned by uid {stat.st_uid}, mode {stat.st_mode & 0o7777:04o}"
    except OSError:
        owner = "owner unknown"
    return (
        f"{file} cannot be written by this process (uid {os.geteuid()}; the file is {owner}; or it was made "
        "immutable, chattr +i): run the daemon as the data directory's owner, or give that user write access"
    )


def no_space_left(directory: Path) -> bool:
    """Whether the file system holding ``directory`` has no block or no inode left for this user
    (SQLite reports a full disk at open as a mere I/O error)."""
    try:
        stats = os.statvfs(directory)
    except OSError:
        return False
    return stats.f_bavail == 0 or (stats.f_files > 0 and stats.f_favail == 0)


class StorageFaults(ProbedCondition):
    """Whether the log's storage refuses writes now, since when, and the probe that notices the end.

    ``probe(n)`` makes a durable write of ``n`` bytes, leaves nothing behind, and raises
    ``sqlite3.Error`` when it fails; it runs on a thread of this class's own, never on a request's.

    Every refusal, a write's or the probe's, is also kept as the log's last error (``errors``), as
    the Kafka backend keeps every failed probe of its broker watch: ``/readyz`` says so only while
    the fault lasts, and ``/status`` ``reader.last_error`` then still tells what happened, and its
    time is when the fault was last seen.
    """

    _log = log

    def __init__(
        self,
        description: str,
        probe: Callable[[int], None],
        interval_s: float = PROBE_INTERVAL_S,
        *,
        errors: LastError | None = None,
    ) -> None:
        super().__init__(description, interval_s)
        self._probe = probe
        self._errors = errors
        self._reason = ""
        self._probe_bytes = PROBE_MIN_BYTES

    def failed(self, reason: str, size: int) -> None:
        """A write of ``size`` bytes was refused for ``reason``; the first refusal of a fault is logged
        and starts the probe, which then writes as much as the latest refused write."""
        self._remember(reason)
        with self._lock:
            self._reason = reason
            self._probe_bytes = min(max(size, PROBE_MIN_BYTES), PROBE_MAX_BYTES)
            if not self._begin():
                return
        log.error(
            "%s refuses writes: %s. Writes fail (the daemon: 503, and /readyz 503) until the storage takes one "
            "again; one is tried every %g s",
            self._description,
            reason,
            self._interval_s,
        )

    def _remember(self, reason: str) -> None:
        if self._errors is not None:
            self._errors.remember(f"the storage refuses writes: {reason}")

    def reason(self) -> str | None:
        """``/readyz``'s reason while writes are refused, else None. Never blocks on the storage."""
        held = self._held_for()
        if held is None:
            return None
        return f"writes to {self._description} have been refused for {held:.1f} s: {self._reason}"

    def _ended(self, seconds: float) -> str:
        return f"{self._description} takes writes again after {seconds:.1f} s"

    def _probe_once(self) -> bool | None:
        try:
            self._probe(self._probe_bytes)
        except sqlite3.Error as e:
            reason = storage_fault(e)
            if reason is not None:
                self._remember(reason)
                with self._lock:
                    self._reason = reason
            else:
                log.warning("%s: the write probe failed: %s", self._description, e)
            return False
        except Exception as e:  # e.g. the log closed under the probe
            log.warning("%s: the write probe stopped: %r", self._description, e)
            return None
        return True
