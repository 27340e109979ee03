"""Which directory holds a log's archive, and taking over one an earlier version named by description.

An archive's directory is named after the log's ``archive_identity`` (the embedded log's stored id,
a Kafka cluster's id and topic), which a moved data directory or another ``--bootstrap-servers``
string does not change. Versions before 2026-11-28 named it after the log's ``description`` (the
SQLite file's absolute path, the bootstrap string): such a directory is renamed to the new name the
first time it is opened, with its ``state.json`` and ``log.json`` rewritten first, so the archive
goes on where it was (same epoch, same watermark; recovery does not read every file again). The
rows keep the ``log`` they were written with: it is inside each row's checksum.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from emulator.history.directory import log_slug, read_marker, write_marker, written_by_a_live_process
from emulator.history.files import fsync_dir, scan_dir
from emulator.history.state import ArchiveState, NewerArchive, load_state, save_state
from emulator.model.times import format_time_ms

log = logging.getLogger(__name__)

PEER_WAIT_S = 2.0
"""How long the lock of an earlier version's directory is tried before it is taken to be held by a
daemon of that version: a daemon of this version starting at the same moment holds it only while it
rewrites two small files and renames the directory."""


@dataclass(frozen=True, slots=True)
class ArchiveLocation:
    """The directory to open and the identity its ``state.json`` carries."""

    directory: Path
    identity: str


def locate(root: Path, identity: str, description: str) -> Path:
    """The directory that holds the archive now, without changing anything (for a process that only
    looks: ``connect-offsets compact``, a daemon without history): the one named by ``identity``, or
    an earlier version's, named by ``description``, when only that one exists."""
    stable = root / log_slug(identity)
    legacy = root / log_slug(description)
    if identity != description and not stable.exists() and legacy.is_dir():
        return legacy
    return stable


def adopt(root: Path, identity: str, description: str) -> ArchiveLocation:
    """The directory to open as the archive of the log ``identity`` (``HistoryArchive.open``): named
    by ``identity``, into which an earlier version's directory named by ``description`` is renamed
    first when only that one exists. Left where it is, and opened as before, while a live process
    holds its writer's lock (a daemon of an earlier version on the same log: renaming the directory
    under it would break its writes) or when a newer version wrote its state. One named by
    ``description`` beside one named by ``identity`` (an earlier version's, started after a rollback)
    is left unread, with a WARNING naming it and what it holds (``_say_left_beside``).

    Raises ``OSError`` when the directory cannot be renamed or its files rewritten."""
    stable = root / log_slug(identity)
    if identity == description:
        return ArchiveLocation(stable, identity)
    legacy = root / log_slug(description)
    if stable.exists():
        if legacy.is_dir():
            _say_left_beside(root, legacy, stable, description)
        return ArchiveLocation(stable, identity)
    earlier_identity: str | None = None  # set when the archive is another log's, last seen where this one is
    if not legacy.is_dir():
        found = _last_seen_here(root, identity, description)
        if found is None:
            return ArchiveLocation(stable, identity)
        legacy, earlier_identity = found
    fd = os.open(legacy / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _lock_within(fd, PEER_WAIT_S, stable):
            if stable.exists():  # another daemon of this version renamed it meanwhile
                return ArchiveLocation(stable, identity)
            if earlier_identity is not None:  # the other log's daemon (on its deleted file?) still writes it
                log.warning(
                    "history archive %s last archived a log at %s with another id (%s), and a running process "
                    "still writes it: this log starts an archive of its own, %s",
                    legacy,
                    description,
                    earlier_identity,
                    stable,
                )
                return ArchiveLocation(stable, identity)
            log.warning(
                "history archive %s was named by an earlier version after %s; a running process writes it (a "
                "daemon of that version on this log?), so it is opened there as before instead of being renamed "
                "to %s: restart this daemon once that one has stopped",
                legacy,
                description,
                stable.name,
            )
            return ArchiveLocation(legacy, description)
        if stable.exists():  # renamed by a daemon of this version that held the lock until now
            return ArchiveLocation(stable, identity)
        state = _state(legacy, identity, description, earlier_identity)
        if isinstance(state, NewerArchive):
            return ArchiveLocation(legacy, description)  # refused there, by name, as before
        if state is not None and state.log != identity:
            state.log = identity
            save_state(legacy, state)
        write_marker(legacy, identity, description)
        os.rename(legacy, stable)
        fsync_dir(root)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)  # releases the flock; the writer takes it again in the renamed directory
    if earlier_identity is not None:
        log.warning(
            "history archive %s last archived the log at %s, which had another id (%s): the log there now was "
            "created anew, and goes on in that archive, renamed to %s (a new epoch begins where its records differ; "
            "the earlier log's history stays readable with --epoch)",
            legacy,
            description,
            earlier_identity,
            stable,
        )
        return ArchiveLocation(stable, identity)
    log.info(
        "history archive %s, named by an earlier version after %s, renamed to %s, named after %s: it stays this "
        "log's archive wherever the log is moved or reached from",
        legacy,
        description,
        stable,
        identity,
    )
    return ArchiveLocation(stable, identity)


def _say_left_beside(root: Path, legacy: Path, stable: Path, description: str) -> None:
    """A WARNING about an earlier version's archive of this log beside the one this version opens:
    a daemon of that version started it after a rollback below this version (it looks for the
    directory named after the description, so it did not find the renamed one). This version does
    not read it, and its records are in the opened archive only as far as the log still held them
    at this start, as ``external`` (without who made them): the operator must know it is there."""
    base, live, _ = scan_dir(legacy)
    files = ([base] if base else []) + live
    times = [t for f in files for t in (f.min_time, f.max_time) if t is not None]
    held = f"{len(files)} archive file(s)" + (
        f" with records from {format_time_ms(min(times))} to {format_time_ms(max(times))}" if times else ""
    )
    if written_by_a_live_process(legacy):
        held += "; a running process writes it (a daemon of that version on this log)"
    log.warning(
        "history archive %s, named by an earlier version after %s, is left beside this log's archive %s: "
        "a daemon of that version started it (after a rollback below the version that names archives by the "
        "log's id), and it holds %s. This daemon neither reads nor writes it: its records are in %s only as "
        "far as the log still held them at this start, as external (without who made them). Read it with "
        "emulator.history.read_history(%r, log=%r); move it out of %s once it is no longer needed "
        "(docs/operations.md, Upgrades)",
        legacy,
        description,
        stable.name,
        held,
        stable.name,
        str(root),
        description,
        root,
    )


def _lock_within(fd: int, timeout_s: float, renamed_to: Path) -> bool:
    """Take the ``flock`` within ``timeout_s``; False at once when ``renamed_to`` appears (a daemon
    of this version took the directory over meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            if renamed_to.exists() or time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def _last_seen_here(root: Path, identity: str, description: str) -> tuple[Path, str] | None:
    """The archive, named by another log's id, whose writer last saw that log where this one is now
    (``log.json``'s ``log`` is this description), and that id: the log was lost and created anew in
    the same place (the SQLite file deleted, a Kafka cluster replaced behind the same bootstrap
    string), and its archive goes on with the new one, as it did while archives were named by
    description. A directory some other log now writes is not taken (``adopt`` waits for its lock)."""
    for child in sorted(root.iterdir()) if root.is_dir() else []:
        marker = read_marker(child)
        if marker is None or marker["log"] != description:
            continue
        named = marker.get("archive")
        if isinstance(named, str) and named != identity and child.name == log_slug(named):
            return child, named
    return None


def _state(
    directory: Path, identity: str, description: str, earlier_identity: str | None = None
) -> ArchiveState | NewerArchive | None:
    """The saved state under any of its names (a crash may have come between its rewrite and the
    rename; another log's, for a log created anew where that one was); None when there is none or
    it is damaged (recovery rebuilds it, as it would have anyway)."""
    for name in (description, identity, *([earlier_identity] if earlier_identity else [])):
        try:
            return load_state(directory, name)
        except NewerArchive as exc:
            return exc
        except ValueError:
            continue
    return None
