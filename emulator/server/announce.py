"""Telling whoever started the daemon where it listens, once it is ready.

With ``--port 0`` the system picks the port, so a test framework or a script cannot know the URL
in advance; and a URL known before the log is replayed would only invite requests answered with
503. So the daemon announces its URL once ``/readyz`` would answer 200 (the same readiness the
route reports): one line on stdout, and with ``--url-file`` a file written atomically, so a
reader sees no file or the whole URL, never part of it.

The file is removed when the daemon starts (a file left by a killed run must not be mistaken for
this run's) and when it stops, so the file exists exactly while a ready daemon serves at that URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from emulator.formats.atomic import atomic_write
from emulator.server.options import SettingsError

log = logging.getLogger(__name__)

_FIRST_POLL_S = 0.005
_MAX_POLL_S = 0.25


class UrlFileError(SettingsError):
    """``--url-file`` names a place the daemon cannot write; the message names the fix.

    A setting's error, not a listening one: the command line then names the variable the path came
    from (``CONNECT_OFFSETS_URL_FILE``), as for every other file setting."""


def clear_url_file(path: Path | None) -> None:
    """Remove a file left by an earlier run, and check that the file can be written once ready.

    Checked at startup so that a wrong path stops the daemon with one line, instead of a daemon
    that serves while whoever waits for the file times out.
    """
    if path is None:
        return
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.exists():
        raise UrlFileError(f"cannot write --url-file {path}: the directory {directory} does not exist")
    if not directory.is_dir():
        raise UrlFileError(f"cannot write --url-file {path}: {directory} is not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UrlFileError(f"cannot write --url-file {path}: the directory {directory} is not writable")
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise UrlFileError(f"cannot remove the old --url-file {path}: {exc.strerror or exc}") from exc


def remove_url_file(path: Path | None) -> None:
    """At shutdown: the URL no longer answers, so the file must not say it does."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class Announcement:
    url: str
    url_file: Path | None
    is_ready: Callable[[], bool]
    """``/readyz``'s rule (``Health.readiness()["ready"]``)."""
    on_ready: Callable[[], None] | None = None
    """Called once ready, before anything is announced: the replay's last line
    (``wiring.ReplayReport.finish``) comes before ``ready, serving at``, never after it."""

    async def when_ready(self) -> None:
        """Poll readiness (5 ms at first, backing off to 250 ms for a long replay), then announce.

        Polling, because readiness is a snapshot of the reader's progress with no event to wait
        on; the first polls are short so that a fresh embedded log is announced within
        milliseconds of being ready.
        """
        delay = _FIRST_POLL_S
        while not self.is_ready():
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_POLL_S)
        await asyncio.to_thread(self._announce)

    def _announce(self) -> None:
        """Blocking (a file write with fsync, a write to stdout): run off the event loop."""
        if self.on_ready is not None:
            self.on_ready()
        if self.url_file is not None:
            try:
                atomic_write(self.url_file, f"{self.url}\n".encode())
            except OSError as exc:
                log.error("ready, but cannot write --url-file %s: %s", self.url_file, exc)
        try:
            # One write: print() sends the URL and its newline apart, and with an unbuffered stdout
            # shared with the log (``> log 2>&1``) a log line from the event loop landed in between.
            sys.stdout.write(f"{self.url}\n")
            sys.stdout.flush()
        except (OSError, ValueError) as exc:  # stdout closed or gone: the log line below still says it
            log.warning("cannot print the URL on stdout: %s", exc)
        log.info("ready, serving at %s", self.url)


class AnnouncingServer(uvicorn.Server):
    """uvicorn's server, announcing the URL once it accepts connections and the daemon is ready.

    Started after uvicorn's own startup, because only then do the sockets listen: announcing
    from the app's lifespan could send a client to a port that still refuses connections.
    """

    def __init__(
        self, config: uvicorn.Config, announcement: Announcement, on_shutdown: Callable[[], None] | None = None
    ) -> None:
        """``on_shutdown``: called on the event loop as the shutdown begins, before the requests in
        flight are waited for (the large writes still waiting for their turn are refused then)."""
        super().__init__(config)
        self._announcement = announcement
        self._on_shutdown = on_shutdown
        self._task: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._task = asyncio.create_task(self._announcement.when_ready(), name="announce-url")

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        remove_url_file(self._announcement.url_file)
        if self._on_shutdown is not None:
            self._on_shutdown()
        await super().shutdown(sockets=sockets)
