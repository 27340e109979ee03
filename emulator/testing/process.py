"""A ``connect-offsets serve`` child process for tests and other frameworks: start, learn the URL, stop.

The daemon runs as a real process, as users run it, rather than in the test's interpreter: its
replay, settings and shutdown are then the ones a test means to trust, a crash cannot take the test
run down, and a test may kill it. It binds an ephemeral port (``--port 0``) and reports its URL
through ``--url-file`` once ``/readyz`` would answer 200, so starting needs no free-port guess
(which another process can take before the daemon binds it) and no HTTP polling.

The child gets no ``CONNECT_OFFSETS_*`` variable from the environment: a test session started in a
shell that configures a daemon for production must not turn the test daemon into that daemon.
Everything it needs is on its command line.
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


class DaemonStartError(RuntimeError):
    """The daemon exited, or was not ready within its deadline; the message ends with its log's tail."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the kernel stops the daemon if its parent dies (a test run killed with SIGKILL).

    The kernel sends it when the *thread* that spawned the child ends, so it is asked for only
    when the main thread spawns the daemon (see ``launch``).
    """
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


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
            self._workdir = Path(tempfile.mkdtemp(prefix="connect-offsets-"))
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
