"""Ctrl-C at a terminal: ``serve`` shuts down and exits 130 with one word, never a Python traceback —
both while it serves and while it still waits for its storage (``emulator.server.starting``)."""

from __future__ import annotations

import signal

import pytest

from tests.fixtures.daemon import DaemonFactory, free_port

pytestmark = pytest.mark.slow  # two daemon starts


@pytest.mark.parametrize("waiting", [False, True], ids=["serving", "waiting-for-its-broker"])
def test_ctrl_c_exits_130_saying_interrupted(daemon_factory: DaemonFactory, waiting: bool) -> None:
    args = ["--bootstrap-servers", f"127.0.0.1:{free_port()}"] if waiting else []
    daemon = daemon_factory(*args, wait_ready=not waiting)  # /healthz answers in both cases
    code = daemon.stop(signal.SIGINT)
    log = daemon.log_path.read_text()
    assert code == 130, log[-3000:]
    assert log.rstrip().splitlines()[-1] == "interrupted", log[-2000:]
    assert "Traceback" not in log, log[-2000:]
