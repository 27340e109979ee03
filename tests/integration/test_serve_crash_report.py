"""``serve`` turns on faulthandler: a native crash in a Python thread leaves every thread's stack
on stderr instead of a silent exit (docs/operations.md, "Faults")."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.processes import free_port


@pytest.mark.slow  # a daemon process started and crashed
def test_a_segfault_in_the_daemon_prints_the_python_stacks_on_stderr(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "serve", "--port", str(port), "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _probe(port).startswith(b"HTTP/1.1 200"):
            assert process.poll() is None and time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.1)
        process.send_signal(signal.SIGSEGV)  # what a crashing C call raises in the thread running it
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in stderr, stderr[-2000:]
    assert 'File "' in stderr and "emulator/cli/main.py" in stderr, "the main thread's stack is printed"


def _probe(port: int) -> bytes:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return sock.recv(4096)
    except OSError:
        return b""
