"""A ``connect-offsets serve`` child process for tests and other frameworks: start, learn the URL, stop.

The daemon runs as a real process, as users run it, rather than in the test's interpreter: its
replay, settings and shutdown are then the ones a test means to trust, a crash cannot take the test
run down, and a test may kill it. It binds an ephemeral port (``--port 0``) and reports its URL
through ``--url-file`` once ``/readyz`` would answer 200, so starting needs no free-port guess
(which another process can take before the daemon binds it) and no HTTP polling.

The child gets no ``CONNECT_OFFSETS_*`` variable from the environment: a test session started in a
shell that configures a daemon for production must not turn the test daemon into that daemon.
Everything it needs is on its command line.

A work directory the kit makes itself (``tempfile.mkdtemp``, prefix ``connect-offsets-``) is removed
when the daemon stops. A run killed before that (SIGTERM or SIGKILL to pytest, a CI timeout) runs no
cleanup code at all: the daemon exits with its parent (see ``_die_with_parent``) but the directory,
with its log and data, stays. So every work directory the kit makes holds ``kit-owner.lock``, locked
(``flock``) by the kit and inherited by its daemon, and the next time the kit makes one, in any run
or script, it first removes the directories of its own whose lock it can take: the kernel releases a
``flock`` only when every process holding it has gone, however it went. Why this and not:

- a pid in the marker: pids are reused, and a ``/tmp`` shared between containers (pid namespaces)
  shows another container's live run as a pid that does not exist here, whose directory would go;
- pytest's base temporary directory: it serves the plugin only, and pytest keeps a killed run's
  numbered directory for 3 days (its lock file is removed at exit, which a killed run never reaches),
  so a CI that kills a run every hour would still gather 72 of them;
- the daemon deleting the directory when its parent dies: a SIGKILL to the process group (what most
  CI timeouts send) kills the daemon as well, and the log that says why the run hung would go with it.

A killed run's log therefore stays readable until the kit next starts a daemon on that machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from emulator.client.errors import ClientError, UnknownRouteError
from emulator.client.history import HistoryClient
from emulator.client.http import AsyncOffsetsClient
from emulator.server.options import ENV_PREFIX
from emulator.testing.options import DEFAULT_START_TIMEOUT_S

__all__ = ["DaemonProcess", "DaemonStartError", "EmbeddedDaemon", "KafkaDaemon", "wait_until_ready"]

_PR_SET_PDEATHSIG = 1

WORKDIR_PREFIX = "connect-offsets-"
OWNER_LOCK = "kit-owner.lock"
"""In each work directory the kit made: locked while the kit or its daemon runs (module docstring)."""

if sys.platform != "win32":
    import fcntl


class DaemonStartError(RuntimeError):
    """The daemon exited, or was not ready within its deadline; the message ends with its log's tail."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the kernel stops the daemon if its parent dies (a test run killed with SIGKILL).

    The kernel sends it when the *thread* that spawned the child ends, so it is asked for only
    when the main thread spawns the daemon (see ``launch``).
    """
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def make_owned_workdir() -> tuple[Path, int | None]:
    """A fresh temporary work directory and the descriptor holding its owner lock (None where
    ``flock`` is not available: such a directory is never taken for stale), after removing the
    stale ones a killed run left (module docstring).

    The lock is taken on a file of another name and renamed into place, so a sweep running at the
    same moment never finds ``OWNER_LOCK`` unlocked in a directory that is just being made."""
    remove_stale_workdirs()
    path = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    if sys.platform == "win32":
        return path, None
    claim = path / (OWNER_LOCK + ".new")
    fd = os.open(claim, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.rename(claim, path / OWNER_LOCK)
    except OSError:  # a file system without flock: the directory is only removed when the daemon stops
        os.close(fd)
        claim.unlink(missing_ok=True)
        return path, None
    return path, fd


def remove_stale_workdirs(root: str | Path | None = None) -> list[Path]:
    """Remove the work directories the kit made in ``root`` (the temporary directory) whose owner
    lock nobody holds any more; returns them.

    Only this user's directories named ``connect-offsets-*`` that hold ``OWNER_LOCK`` are looked
    at: a directory without it is someone else's, an older kit's, or one being made. A lock held
    means a live kit or daemon, on this machine or in another container sharing the directory; the
    lock is kept while the directory is removed, so two sweeps never remove the same one at once."""
    if sys.platform == "win32":
        return []
    removed: list[Path] = []
    try:
        entries = list(os.scandir(tempfile.gettempdir() if root is None else root))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(WORKDIR_PREFIX):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            fd = os.open(os.path.join(entry.path, OWNER_LOCK), os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by a live kit or daemon (or no flock here: then nothing is known either)
            os.close(fd)
            continue
        try:
            shutil.rmtree(entry.path, ignore_errors=True)
        finally:
            os.close(fd)
        removed.append(Path(entry.path))
    return removed


def clean_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the daemon's own settings variables (see the module's docstring)."""
    return {k: v for k, v in environ.items() if not k.startswith(ENV_PREFIX)} | {"PYTHONUNBUFFERED": "1"}


def _main_thread_on_linux() -> bool:
    return sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()


class DaemonProcess:
    """One ``connect-offsets serve`` process with the given serve arguments, on a loopback port
    the system picks. Its work directory holds the URL file and ``daemon.log`` (stdout and stderr);
    a directory this object created is deleted when the daemon stops.

    ``launch()`` only spawns; ``wait_ready()`` waits for the URL. ``start()`` does both, and using
    the object as a context manager starts and stops it.
    """

    def __init__(
        self,
        serve_args: Sequence[str] = (),
        *,
        workdir: str | Path | None = None,
        host: str = "127.0.0.1",
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        python: str = sys.executable,
    ) -> None:
        self._own_workdir = workdir is None
        self._workdir = None if workdir is None else Path(workdir)
        self._owner_lock: int | None = None
        self.serve_args = list(serve_args)
        self.host = host
        self.start_timeout_s = start_timeout_s
        self.python = python
        self.proc: subprocess.Popen[bytes] | None = None
        self._url: str | None = None
        self.launched_at: float | None = None
        self._launched_wall: float | None = None
        self.ready_after_s: float | None = None
        """Seconds from spawning the process to its URL file being written (startup, replay and
        readiness), whenever ``wait_ready`` looks."""

    # ---- lifecycle ---------------------------------------------------------------------------

    @property
    def workdir(self) -> Path:
        """Created on first use (a temporary directory unless one was given), so an object that
        is never started leaves nothing behind."""
        if self._workdir is None:
            self._workdir, self._owner_lock = make_owned_workdir()
        return self._workdir

    @property
    def url_file(self) -> Path:
        return self.workdir / "daemon.url"

    @property
    def log_path(self) -> Path:
        return self.workdir / "daemon.log"

    def backend_args(self) -> list[str]:
        """The arguments that choose the log; subclasses add theirs before ``serve_args``."""
        return []

    @property
    def command(self) -> list[str]:
        return [
            self.python,
            "-m",
            "emulator.cli",
            "serve",
            "--host",
            self.host,
            "--port",
            "0",
            "--url-file",
            str(self.url_file),
            *self.backend_args(),
            *self.serve_args,
        ]

    def launch(self) -> Self:
        """Spawn the process and return at once; ``wait_ready`` learns its URL."""
        if self.proc is not None:
            raise RuntimeError("this daemon was already launched")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.url_file.unlink(missing_ok=True)
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=clean_environment(os.environ),
                # the daemon holds the owner lock too: a daemon that outlives this process (no parent-death
                # signal outside Linux's main thread) keeps its directory from being taken for stale
                pass_fds=() if self._owner_lock is None else (self._owner_lock,),
                preexec_fn=_die_with_parent if _main_thread_on_linux() else None,
            )
        self.launched_at = time.monotonic()
        self._launched_wall = time.time()
        return self

    def wait_ready(self, timeout_s: float | None = None) -> str:
        """The daemon's URL, once it is ready. Raises :class:`DaemonStartError` (after stopping
        the process) when it exits or is not ready in time."""
        if self._url is not None:
            return self._url
        if self.proc is None or self.launched_at is None:
            raise RuntimeError("launch() the daemon first")
        deadline = self.launched_at + (self.start_timeout_s if timeout_s is None else timeout_s)
        delay = 0.002
        while True:
            url = self._read_url()
            if url is not None:
                self._url = url
                self.ready_after_s = self._ready_after()
                return url
            if self.proc.poll() is not None:
                message = f"the daemon exited with code {self.proc.returncode} before it was ready\n{self.log_tail()}"
                self._cleanup()
                raise DaemonStartError(message)
            if time.monotonic() > deadline:
                message = (
                    f"the daemon was not ready within {deadline - self.launched_at:g} s "
                    f"(command: {' '.join(self.command)})\n{self.log_tail()}"
                )
                self.stop(signal.SIGKILL)
                raise DaemonStartError(message)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _ready_after(self) -> float:
        """When the daemon wrote its URL file, from the file's time: the fixture may look long after."""
        assert self.launched_at is not None and self._launched_wall is not None
        try:
            return max(self.url_file.stat().st_mtime - self._launched_wall, 0.0)
        except OSError:
            return time.monotonic() - self.launched_at

    def _read_url(self) -> str | None:
        try:
            text = self.url_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return text or None  # written atomically, so never partial; empty only if someone else wrote it

    def start(self, timeout_s: float | None = None) -> Self:
        self.launch()
        self.wait_ready(timeout_s)
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int | None:
        """Stop the process (SIGTERM: a clean shutdown that closes the log and the archive) and
        wait for it; one that does not exit in time is killed. Returns its exit code."""
        code: int | None = None
        proc = self.proc
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            code = proc.returncode
        self._cleanup()
        return code

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def _cleanup(self) -> None:
        self._url = None
        if self._own_workdir and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        if self._owner_lock is not None:  # after the removal: until then no sweep takes the directory
            os.close(self._owner_lock)
            self._owner_lock = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---- what a test uses --------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the daemon is not running (start() it, or use it as a context manager)")
        return self._url

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self._url is not None

    def client(self, timeout_s: float = 60.0) -> HistoryClient:
        """A synchronous client (the KIP-875 routes and the history routes); close it when done."""
        return HistoryClient(self.url, timeout_s=timeout_s)

    def async_client(self, timeout_s: float = 60.0) -> AsyncOffsetsClient:
        """An asyncio client; use it as ``async with daemon.async_client() as client:``."""
        return AsyncOffsetsClient(self.url, timeout_s=timeout_s)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "--- no daemon log ---"
        return "--- daemon log (last lines) ---\n" + "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self._url!r}, pid={self.proc.pid if self.proc else None})"


class EmbeddedDaemon(DaemonProcess):
    """A daemon on the embedded log (SQLite) in a data directory of its own, by default a fresh
    temporary one: ``with EmbeddedDaemon() as daemon: daemon.url``."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        extra_args: Sequence[str] = (),
        workdir: str | Path | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        super().__init__(extra_args, workdir=workdir, start_timeout_s=start_timeout_s)
        self._data_dir = None if data_dir is None else Path(data_dir)

    @property
    def data_dir(self) -> Path:
        return self._data_dir if self._data_dir is not None else self.workdir / "data"

    def backend_args(self) -> list[str]:
        return ["--data-dir", str(self.data_dir)]


class KafkaDaemon(DaemonProcess):
    """A daemon on a Kafka cluster's offsets topic, Connect's own by default.

    With ``config_topic`` (the workers' ``config.storage.topic``) it answers as the cluster's
    herder does: unknown connectors are 404 and offsets change only while a connector is STOPPED.
    History and claims state live in the work directory.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        offsets_topic: str = "connect-offsets",
        config_topic: str | None = None,
        status_topic: str | None = None,
        extra_args: Sequence[str] = (),
        workdir: str | Path | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        super().__init__(extra_args, workdir=workdir, start_timeout_s=start_timeout_s)
        self.bootstrap_servers = bootstrap_servers
        self.offsets_topic = offsets_topic
        self.config_topic = config_topic
        self.status_topic = status_topic

    def backend_args(self) -> list[str]:
        args = ["--bootstrap-servers", self.bootstrap_servers, "--offsets-topic", self.offsets_topic]
        if self.config_topic is not None:
            args += ["--config-topic", self.config_topic]
        if self.status_topic is not None:
            args += ["--status-topic", self.status_topic]
        return [*args, "--data-dir", str(self.workdir / "data")]


NOT_A_DAEMON_S = 5.0
"""How long ``wait_until_ready`` takes answers that come from something other than a daemon."""


def wait_until_ready(url: str, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> str:
    """Wait until a daemon someone else started (a compose stack, a CI service) answers 200 on
    ``/readyz``; returns ``url``. Raises ``TimeoutError`` with the last answer seen."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    foreign_since: float | None = None
    with HistoryClient(url, timeout_s=5.0) as client:
        while True:
            try:
                if client.ready():
                    return url
                last = "503: still reading its offsets log to the end"
                foreign_since = None
            except UnknownRouteError as exc:
                # Something answers there, and it is no daemon: not worth the whole timeout, but given
                # NOT_A_DAEMON_S, as a proxy in front of a daemon still starting may answer so briefly.
                last = str(exc)
                foreign_since = time.monotonic() if foreign_since is None else foreign_since
                if time.monotonic() - foreign_since >= NOT_A_DAEMON_S:
                    raise TimeoutError(
                        f"{url} answers, but not as a connect-offsets daemon (for {NOT_A_DAEMON_S:g} s): {last}"
                    ) from None
            except ClientError as exc:
                last = str(exc)
                foreign_since = None
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the connect-offsets daemon at {url} was not ready within {timeout_s:g} s: {last}")
            time.sleep(0.2)
