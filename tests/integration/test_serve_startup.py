"""``serve`` listens first, and replays the log while the HTTP stack is still being imported and built.

The replay is started by ``wiring.serve`` right after the log and the history archive are open, and
FastAPI is imported only afterwards (``make_app``), so a restore's wait for the broker overlaps that
second of startup (issue 12; benchmarks/RESULTS.md, "Round 5"). These pin both halves: the module
``serve`` lives in does not pull FastAPI in, and an app told that reading already started serves
what was replayed without starting the reader a second time (which the log refuses).

The port listens before all of that (``emulator.server.listen.listen_early``): a client connecting
during the start waits for its answer in the backlog instead of meeting a refused connection.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.server.wiring import assemble_runtime, make_app, start_reading
from emulator.view.offset_view import OffsetView
from tests.fixtures.daemon import DaemonFactory, free_port
from tests.fixtures.waits import until

ROOT = Path(__file__).resolve().parents[2]


def test_the_serve_wiring_imports_without_fastapi() -> None:
    probe = "import sys, emulator.server.wiring; print('fastapi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a_started_daemon_on_the_embedded_log_never_imported_httpx_or_the_kafka_client(
    daemon_factory: DaemonFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ``connect-offsets serve``, up to ready: every module it imported is in its log
    (``-X importtime`` on stderr). The HTTP client and the Kafka client are for other commands and the
    Kafka backend; both cost every start time (tests/unit/test_cli_imports.py pins the import path)."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    daemon = daemon_factory()
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in daemon.log_path.read_text(errors="replace").splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "emulator.server.wiring" in imported and "fastapi" in imported  # the log is the import trace
    unwanted = ("httpx", "confluent_kafka", "emulator.client.http", "emulator.logs.kafka", "emulator.transfer", "h11")
    assert sorted(m for m in imported if m.startswith(unwanted)) == []


def test_an_app_over_a_log_already_being_read_serves_the_replay_without_restarting_the_reader(
    tmp_path: Path,
) -> None:
    connector = f"startup-{time.monotonic_ns()}"
    seeded = EmbeddedOffsetLog(tmp_path, partitions=2, synchronous="NORMAL")
    seeded.open()
    seeded.append([(encode_key(connector, {"file": "a"}), encode_offset({"position": 7}))])
    seeded.close()

    log = EmbeddedOffsetLog(tmp_path, partitions=2, synchronous="NORMAL")
    log.open()
    runtime = assemble_runtime(log, OffsetView(), NoConnectCluster())
    start_reading(runtime)
    with TestClient(make_app(runtime, reading_started=True)) as client:
        deadline = time.monotonic() + 10
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "the replay did not finish within 10 s"
            time.sleep(0.02)
        response = client.get(f"/connectors/{connector}/offsets")
    assert response.status_code == 200
    assert response.json() == {"offsets": [{"partition": {"file": "a"}, "offset": {"position": 7}}]}


def _first_connection(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> socket.socket:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except ConnectionRefusedError:
            assert proc.poll() is None, f"serve exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"nothing listened on {port} within {timeout_s} s"
            time.sleep(0.005)


@pytest.mark.slow
def test_a_client_connecting_while_the_daemon_starts_is_answered_not_refused(tmp_path: Path) -> None:
    """Before, the port listened only once the HTTP server ran, ~0.85 s after the process started
    here: a script that started the daemon and asked it something at once met a refused connection."""
    port, log_file = free_port(), tmp_path / "serve.log"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_OFFSETS_")}
    with log_file.open("wb") as log_out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "emulator.cli", "serve", "--port", str(port), "--data-dir", str(tmp_path / "d")],
            stdout=subprocess.DEVNULL,
            stderr=log_out,
            env=clean,
        )
    try:
        with _first_connection(port, proc) as connection:
            log_at_connect = log_file.read_text()
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := connection.recv(4096):
                answer += chunk
        assert "listening on" not in log_at_connect, "the connection was made only once the server ran"
        assert answer.startswith(b"HTTP/1.1 200 "), answer
        assert "listening on http://127.0.0.1:" in log_file.read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_a_start_held_by_another_processs_write_lock_says_so(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    """SQLite waits for a lock without a word: /readyz said only "opening the offsets log (10 s so far)"."""
    data = tmp_path / "data"
    daemon_factory("--data-dir", str(data)).stop()  # the log exists
    holder = sqlite3.connect(data / "connect-offsets.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write transaction, open
    try:
        daemon = daemon_factory("--data-dir", str(data), wait_ready=False)

        def reason() -> str:
            answer = httpx.get(f"{daemon.url}/readyz", timeout=5)
            return str(answer.json().get("message", "")) if answer.status_code == 503 else ""

        until(lambda: "waiting for SQLite's write lock, which another process holds" in reason(), "/readyz names it")
        assert "waiting for SQLite's write lock" in daemon.log_tail()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    daemon.wait_until("/readyz", 30)


@pytest.mark.slow
def test_a_sigterm_while_the_start_waits_is_logged_and_ends_the_process_by_it(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """A supervisor stopping a start that hangs on a lock found a log ending at "listening on … while the
    daemon starts": SIGTERM's default action leaves no word. Now the log says the step it stopped at,
    and the exit status is still the signal's (what supervisors and ``test_serve_supervised`` expect)."""
    data = tmp_path / "data"
    daemon_factory("--data-dir", str(data)).stop()  # the log exists
    holder = sqlite3.connect(data / "connect-offsets.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # holds the start at "opening the offsets log"
    try:
        daemon = daemon_factory("--data-dir", str(data), wait_ready=False)
        until(lambda: "waiting for SQLite's write lock" in daemon.log_tail(), "the start waits for the lock")
        assert daemon.stop() == -signal.SIGTERM, daemon.log_tail()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "SIGTERM while the daemon starts (opening the offsets log embedded://" in daemon.log_tail(), (
        daemon.log_tail()
    )
