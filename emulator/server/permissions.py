"""Who else on this machine can read what the daemon keeps: its data and its credential files.

The data directory holds every connector's offsets and their history, readable there without the
API's scopes; the credentials file holds plain passwords. ``serve`` sets the umask to 077 before
it opens anything (``DAEMON_UMASK``), so whatever the daemon creates is its user's alone:
directories 0700, files 0600 (the SQLite log and its -wal/-shm, history files, ``state.json``,
``--url-file``). What already exists is not changed; ``exposed`` names what others can reach, for
a WARNING at start with the ``chmod`` that closes it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from emulator.server.settings import Settings

DAEMON_UMASK = 0o077


def restrict_umask() -> None:
    """Files and directories created from now on are this user's alone (the umask keeps any bit
    the operator's umask already withheld)."""
    os.umask(os.umask(DAEMON_UMASK) | DAEMON_UMASK)


def exposed(settings: Settings) -> list[str]:
    """Warnings for the data directories and credential files that group or others can reach."""
    found: list[str] = []
    data = settings.data_dir.absolute()
    history = settings.history_root  # inside the data directory, the data directory's mode decides
    directories = [
        (data, "data directory"),
        *(() if history.is_relative_to(data) else ((history, "history directory"),)),
    ]
    for directory, what in directories:
        mode = _mode(directory)
        if mode is not None and stat.S_ISDIR(mode) and mode & 0o077:
            found.append(
                f"{what} {directory} is open to other users (mode {stat.S_IMODE(mode):04o}): anyone on this "
                f"machine may read every connector's offsets and history there, whatever the API's scopes; "
                f"chmod 700 {directory}"
            )
    files = (
        (settings.credentials_file, "credentials file", "holds plain passwords"),
        (settings.tokens_file, "tokens file", "lists every token's hash and scopes"),
    )
    for path, what, holds in files:
        mode = _mode(path) if path is not None else None
        if path is not None and mode is not None and mode & 0o077:
            found.append(
                f"{what} {path} is open to group or others (mode {stat.S_IMODE(mode):04o}) and {holds}: "
                f"chmod 600 {path}"
            )
    return found


def _mode(path: Path) -> int | None:
    try:
        return os.stat(path).st_mode
    except OSError:
        return None
