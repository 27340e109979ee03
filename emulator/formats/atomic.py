"""Replacing a file so that a crash leaves the old file or the complete new one, never half of one.

Connect rewrites its standalone offsets file in place (truncate, then write): a crash in between
loses every offset. Every file this package writes goes through here instead.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write(path: str | Path, data: bytes) -> int:
    """Temp file in the same directory, fsync, rename over ``path``, fsync of the directory.

    Keeps the old file's permissions (``mkstemp`` would leave 0600). Returns the bytes written.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask()
        with contextlib.suppress(OSError):
            os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    with contextlib.suppress(OSError):  # some file systems cannot fsync a directory
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return len(data)
