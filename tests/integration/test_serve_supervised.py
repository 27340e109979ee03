"""``serve`` as a supervisor runs it: reloads sent as SIGHUP, standard streams closed, settings in
the environment with a typo. Each of these ended the daemon or was silently ignored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.fixtures.daemon import DaemonFactory, DaemonProcess, free_port
from tests.integration.auth_helpers import mint

pytestmark = pytest.mark.slow  # daemon starts


def wait_for_line(daemon: DaemonProcess, text: str, timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        found = [line for line in daemon.log_path.read_text().splitlines() if text in line]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"no log line with {text!r}:\n{daemon.log_tail()}"
        time.sleep(0.05)


def test_sighup_without_credential_files_is_logged_and_the_daemon_goes_on(daemon_factory: DaemonFactory) -> None:
    """A supervisor's reload (``kill -HUP``) ended a daemon without credential files: exit 129, no
    shutdown, nothing in its log."""
    daemon = daemon_factory()
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGHUP)
    line = wait_for_line(daemon, "SIGHUP")
    assert "nothing to reload" in line, line
    assert daemon.proc.poll() is None, daemon.log_tail()
    assert httpx.get(daemon.url + "/readyz").status_code == 200
    assert daemon.stop() == -signal.SIGTERM, daemon.log_tail()


def test_sighup_while_the_storage_opens_does_not_end_the_daemon(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    """With a tokens file, SIGHUP reloads once the daemon serves; sent while it still waits for its
    broker, it ended the process (exit 129)."""
    _, line = mint("ops", ["admin"])
    (tmp_path / "tokens").write_text(line + "\n")
    (tmp_path / "tokens").chmod(0o600)
    daemon = daemon_factory(
        "--bootstrap-servers", f"127.0.0.1:{free_port()}", "--tokens-file", str(tmp_path / "tokens"), wait_ready=False
    )
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGHUP)
    line = wait_for_line(daemon, "SIGHUP")
    assert "before the daemon serves" in line, line
    assert daemon.proc.poll() is None, daemon.log_tail()
    assert httpx.get(daemon.url + "/readyz").status_code == 503  # still opening, still answering
    assert daemon.stop() == -signal.SIGTERM, daemon.log_tail()


@pytest.mark.parametrize("tokens", [False, True], ids=["no-credential-files", "tokens-file"])
def test_sighup_from_the_first_moments_of_the_start_does_not_end_the_daemon(tmp_path: Path, tokens: bool) -> None:
    """A supervisor's reload sent right after a (re)start: the handler came after 1–1.6 s of imports
    and parsing, and a SIGHUP before it ended the process (exit 129, nothing logged). Sent every
    0.1 s from 0.3 s after the spawn (the interpreter's own start) until the daemon is ready."""
    args = ["serve", "--port", str(port := free_port()), "--data-dir", str(tmp_path / "data")]
    if tokens:
        _, line = mint("ops", ["admin"])
        (tmp_path / "tokens").write_text(line + "\n")
        (tmp_path / "tokens").chmod(0o600)
        args += ["--tokens-file", str(tmp_path / "tokens")]
    log_path = tmp_path / "daemon.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "emulator.cli", *args], stdout=log, stderr=subprocess.STDOUT)
    sent: list[float] = []
    ready = threading.Event()

    def hang_up() -> None:  # apart from the readiness polls: a connection to the port may wait for its answer
        time.sleep(0.3)
        while not ready.is_set() and proc.poll() is None:
            proc.send_signal(signal.SIGHUP)
            sent.append(time.monotonic())
            time.sleep(0.1)

    signaller = threading.Thread(target=hang_up)
    signaller.start()
    try:
        # Raises if the daemon exits meanwhile (an earlier SIGHUP ended it), with its log.
        DaemonProcess(args, port, log_path, proc).wait_until("/readyz", 60)
        ready.set()
        signaller.join()
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert proc.poll() is None, log_path.read_text()[-2000:]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == -signal.SIGTERM, log_path.read_text()[-2000:]
    finally:
        ready.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert len(sent) >= 3, f"the daemon was ready before the test could signal it ({len(sent)} SIGHUPs)"


@pytest.mark.parametrize("closed", [1, 2], ids=["stdout-closed", "stderr-closed"])
def test_a_daemon_started_with_a_standard_stream_closed_serves_and_stops_by_its_signal(
    tmp_path: Path, closed: int
) -> None:
    """``serve >&-`` served, then exited 1 on SIGTERM writing its URL to the missing stdout;
    ``serve 2>&-`` exited 1 at once, without a word."""
    port = free_port()
    log_path = tmp_path / "daemon.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "emulator.cli", "serve", "--port", str(port), "--data-dir", str(tmp_path / "data")],
            stdout=log if closed == 2 else None,
            stderr=log if closed == 1 else None,
            preexec_fn=lambda: os.close(closed),
        )
    try:
        DaemonProcess([], port, log_path, proc).wait_until("/readyz", 60)  # raises if it exits meanwhile
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == -signal.SIGTERM, log_path.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    written = log_path.read_text()
    assert "Traceback" not in written, written[-2000:]
    if closed == 1:  # the log is all there; the URL went nowhere, as asked
        assert "Finished server process" in written, written[-2000:]
    else:
        assert written.strip() == f"http://127.0.0.1:{port}", written


def test_a_misspelt_variable_is_named_with_the_setting_it_likely_meant(
    daemon_factory: DaemonFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CONNECT_OFFSETS_TOKEN_FILE`` (for ``…_TOKENS_FILE``) started the daemon without
    authentication, and nothing said so."""
    monkeypatch.setenv("CONNECT_OFFSETS_TOKEN_FILE", "/etc/connect-offsets/tokens")
    monkeypatch.setenv("CONNECT_OFFSETS_TEST_ANYTHING", "the test kit's own namespace")
    daemon = daemon_factory()
    warning = (
        "CONNECT_OFFSETS_TOKEN_FILE is set but is not a connect-offsets setting: ignored "
        "(did you mean CONNECT_OFFSETS_TOKENS_FILE?)"
    )
    assert "WARNING" in wait_for_line(daemon, warning)
    assert "CONNECT_OFFSETS_TEST_ANYTHING" not in daemon.log_path.read_text()

    status = subprocess.run(
        [sys.executable, "-m", "emulator.cli", "status", "--url", daemon.url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 0, status.stderr
    assert status.stderr.splitlines()[0] == f"warning: {warning}", status.stderr
