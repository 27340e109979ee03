"""Replacing a file so that a crash leaves the old file or the complete new one, never half of one.

Connect rewrites its standalone offsets file in place (truncate, then write): a crash in between
loses every offset. Every file this package writes goes through here instead.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from emulator.formats.file_kinds import check_replaceable, replacement_target


def atomic_write(path: str | Path, data: bytes) -> int:
    """Temp file in the same directory, fsync, rename over ``path``, fsync of the directory.

    Keeps the old file's permissions; a new file gets 0666 less the umask, as ``open`` would give it
    (``mkstemp`` would leave 0600). The temp file is created with that mode, so the umask is never
    read by setting it: ``os.umask`` is process-wide, and another thread creating a file meanwhile
    would get the momentary one. Returns the bytes written.

    Only a regular file is replaced (``NotRegularFileError`` otherwise, before anything is written):
    renaming over a device node or a FIFO would destroy it. A symbolic link's target is replaced,
    and the link kept.
    """
    path = replacement_target(Path(path))
    check_replaceable(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp_name = _create_temp(directory, path.name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            with contextlib.suppress(OSError):
                os.chmod(tmp_name, path.stat().st_mode & 0o7777)
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


def _create_temp(directory: Path, name: str) -> tuple[int, str]:
    """A new file ``.NAME.XXXXXXXX.tmp`` in ``directory``, mode 0666 less the umask, opened for writing."""
    for _ in range(100):
        candidate = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(
                candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666
            ), candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name for {name} in {directory}")
