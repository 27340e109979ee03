"""Which files an import may read and an export may replace.

A path on the command line is not always a regular file. ``/dev/zero`` or ``/dev/full`` never end
(reading one exhausts memory), a FIFO blocks until some writer opens it, and replacing a device
node or a FIFO by renaming a new file over it destroys it: an export to ``snapshot:/dev/null`` once
turned a machine's ``/dev/null`` into a 2 kB regular file. So:

- a destination must be a regular file (or not exist yet); anything else is refused before a byte
  is read or written;
- a source may be a regular file, or a pipe (``--from kip875:<(curl …)``, ``/dev/stdin``), which is
  read until its writer closes it, within a deadline and a size bound; devices, directories and
  sockets are refused.
"""

from __future__ import annotations

import os
import select
import stat
import sys
import time
from pathlib import Path

STREAM_LIMIT_BYTES = 1 << 30
"""The most a pipe may deliver: a stream has no size to check up front, and one that never ends
(``yes |``) would otherwise grow until the process runs out of memory."""

STREAM_TIMEOUT_S = 300.0
"""How long a pipe may take to deliver its data where no ``--timeout`` says otherwise."""

_CHUNK = 1 << 20


class NotRegularFileError(OSError):
    """The path names a device, FIFO, directory or socket where a regular file is needed."""


class StreamError(OSError):
    """A pipe that did not deliver its data: nothing within the deadline, or more than the limit."""


def kind(mode: int) -> str:
    """What a file of this mode is, in the words an error message uses."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_replaceable(path: Path) -> None:
    """Refuse to replace anything but a regular file; a path that does not exist yet is fine.

    Follows symbolic links: the file replaced is the link's target (see ``replacement_target``)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError:
        return  # the write itself will say why the path cannot be used
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(
            f"{path} is {kind(mode)}, not a regular file; an export only writes regular files (it replaces "
            "the file by renaming a new one over it, which would destroy a device or FIFO)"
        )


def replacement_target(path: Path) -> Path:
    """The file an atomic replacement writes: a symbolic link's target, so the link stays a link
    (as a shell's ``>`` or Connect's own file writes leave it)."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def read_source(path: Path, *, timeout_s: float) -> bytes:
    """The whole content of a regular file or a pipe.

    A FIFO is opened without blocking and read only when ``select`` says data (or its writer's close)
    arrived: a FIFO nobody ever writes to ends with ``StreamError`` after ``timeout_s``, not a hang.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    mode = os.stat(path).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise NotRegularFileError(f"{path} is {kind(mode)}; only a regular file or a pipe can be read")
    fd = os.open(path, flags if stat.S_ISFIFO(mode) else os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return _read_opened(fd, str(path), timeout_s)  # what was opened, should the path have changed since
    finally:
        os.close(fd)


def read_stdin(timeout_s: float) -> bytes:
    """Standard input's whole content (a location's path ``-``): a redirected file or a pipe, read as
    ``read_source`` reads them. A terminal is refused: the command would sit waiting for typing."""
    fd = sys.stdin.fileno() if sys.stdin is not None else 0
    if os.isatty(fd):
        raise StreamError(
            "standard input is a terminal: pipe the file into it (… | connect-offsets …) or redirect it (< FILE)"
        )
    return _read_opened(fd, "standard input", timeout_s)


def _read_opened(fd: int, name: str, timeout_s: float) -> bytes:
    """All of an open regular file, or of a pipe or socket within ``timeout_s``; anything else refused."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        chunks = []
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return _read_stream(fd, name, timeout_s)
    raise NotRegularFileError(f"{name} is {kind(mode)}; only a regular file or a pipe can be read")


def _read_stream(fd: int, name: str, timeout_s: float) -> bytes:
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(remaining, 0.0)) if remaining > 0 else ([], [], [])
        if not ready:
            raise StreamError(
                f"{name} is a pipe that delivered {size} byte(s) and did not reach its end within "
                f"{timeout_s:g} s; is anything writing to it?"
            )
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            continue
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > STREAM_LIMIT_BYTES:
            raise StreamError(
                f"{name} is a pipe that delivered more than {STREAM_LIMIT_BYTES >> 20} MiB; write it to a file first"
            )
        chunks.append(chunk)
