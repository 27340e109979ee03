"""``serve --port 0`` and ``--url-file``: how another framework learns where a ready daemon listens.

Specification: with ``--port 0`` the system picks a free port; once ``/readyz`` would answer 200 the
daemon prints its URL as one line on stdout and, with ``--url-file``, writes it to that file
atomically. The file never exists while the daemon is not ready: a stale one is removed at
startup, and the daemon removes its own at shutdown. A place the file cannot be written stops
``serve`` at once with one line and exit code 2. Every daemon here is a real process.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from tests.fixtures.daemon import free_port

URL = re.compile(r"^http://127\.0\.0\.1:(\d+)$")


def serve(*args: str, stdout: int = subprocess.PIPE) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_OFFSETS_")}
    return subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "serve", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env={**clean, "PYTHONUNBUFFERED": "1"},
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def first_line(proc: subprocess.Popen[str], timeout_s: float = 30.0) -> str:
    """The first stdout line, read on a thread so that a daemon printing nothing cannot hang the test."""
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stream = proc.stdout
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout_s).rstrip("\n")
    except queue.Empty:
        raise AssertionError(f"no line on stdout within {timeout_s} s") from None


def wait_for_file(path: Path, proc: subprocess.Popen[str], timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, f"serve exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"{path} not written within {timeout_s} s"
        time.sleep(0.005)
    return path.read_text()


@pytest.mark.slow
def test_port_0_binds_a_free_port_and_prints_the_url_once_ready(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    proc = serve("--port", "0", "--data-dir", str(tmp_path / "data"))
    processes.append(proc)

    url = first_line(proc)

    match = URL.match(url)
    assert match is not None, url
    assert int(match.group(1)) > 0
    assert httpx.get(url + "/readyz", timeout=5).status_code == 200  # ready when announced, not merely bound


@pytest.mark.slow
def test_the_url_file_holds_the_url_once_ready_and_is_gone_after_shutdown(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    url_file = tmp_path / "run" / "daemon.url"
    url_file.parent.mkdir()
    proc = serve("--port", "0", "--url-file", str(url_file), "--data-dir", str(tmp_path / "data"))
    processes.append(proc)

    text = wait_for_file(url_file, proc)

    assert text.endswith("\n") and URL.match(text.strip())
    assert first_line(proc) == text.strip()  # the same URL on stdout
    assert httpx.get(text.strip() + "/readyz", timeout=5).status_code == 200
    assert sorted(p.name for p in url_file.parent.iterdir()) == ["daemon.url"]  # no temporary file left
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled, after shutdown
    assert not url_file.exists()


@pytest.mark.slow
def test_a_stale_url_file_is_removed_before_the_daemon_is_ready(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    url_file = tmp_path / "daemon.url"
    url_file.write_text("http://127.0.0.1:1\n")  # left by a daemon killed with SIGKILL
    proc = serve("--port", "0", "--url-file", str(url_file), "--data-dir", str(tmp_path / "data"))
    processes.append(proc)

    url = first_line(proc)

    assert url_file.read_text() == url + "\n" != "http://127.0.0.1:1\n"


@pytest.mark.slow
def test_the_url_file_appears_only_when_readyz_answers_200(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """A log that takes a while to replay: while ``/readyz`` says 503 there is no file, and the
    moment the file is there ``/readyz`` says 200 (it never goes back)."""
    data_dir = tmp_path / "data"
    log = EmbeddedOffsetLog(data_dir, partitions=25, synchronous="NORMAL")
    log.open()
    # Long enough that the replay outlasts starting the HTTP server, which now overlaps it (serve
    # starts reading before FastAPI is imported): with 60,000 records the replay was sometimes done first.
    for start in range(0, 300_000, 10_000):
        log.append([(f'["c",{{"n":{i}}}]'.encode(), b'{"p":1}') for i in range(start, start + 10_000)])
    log.close()
    url_file = tmp_path / "daemon.url"
    port = free_port()  # a known port, so /readyz can be asked before the URL is announced
    proc = serve("--port", str(port), "--url-file", str(url_file), "--data-dir", str(data_dir), "--no-history")
    processes.append(proc)

    not_ready_without_file = 0
    deadline = time.monotonic() + 60
    while not url_file.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        try:
            status = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code
        except httpx.TransportError:
            continue
        exists = url_file.exists()
        if status == 503:
            assert not exists, "the URL file was written while /readyz answered 503"
            not_ready_without_file += 1

    assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    assert url_file.read_text() == f"http://127.0.0.1:{port}\n"
    assert not_ready_without_file > 0, "the replay was too short to observe the window before readiness"


@pytest.mark.slow
def test_a_wildcard_host_is_announced_as_the_loopback_url(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    # Beyond loopback without authentication only by saying so (the daemon refuses otherwise).
    proc = serve("--host", "0.0.0.0", "--port", "0", "--insecure-no-auth", "--data-dir", str(tmp_path / "data"))
    processes.append(proc)

    url = first_line(proc)

    assert URL.match(url), url
    assert httpx.get(url + "/healthz", timeout=5).status_code == 200
    # The log names the wildcard: "listening on http://127.0.0.1:…" read as unreachable from elsewhere.
    proc.terminate()
    _, logged = proc.communicate(timeout=30)
    port = url.rsplit(":", 1)[1]
    assert f"listening on 0.0.0.0:{port}, every interface ({url} from this machine)" in logged, logged


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("missing/daemon.url", "the directory {dir}/missing does not exist"),
        ("a-file/daemon.url", "{dir}/a-file is not a directory"),
        ("read-only/daemon.url", "the directory {dir}/read-only is not writable"),
    ],
)
@pytest.mark.slow
def test_a_url_file_that_cannot_be_written_stops_serve_with_one_line(tmp_path: Path, where: str, reason: str) -> None:
    if where.startswith("read-only") and os.geteuid() == 0:
        pytest.skip("root may write into a read-only directory, so there is nothing to refuse")
    (tmp_path / "read-only").mkdir(mode=0o500)
    (tmp_path / "a-file").write_text("")
    proc = serve("--port", "0", "--url-file", str(tmp_path / where), "--data-dir", str(tmp_path / "data"))
    _, stderr = proc.communicate(timeout=60)

    assert proc.returncode == 2
    expected = f"error: cannot write --url-file {tmp_path / where}: {reason.format(dir=tmp_path)}"
    assert stderr.splitlines()[-1] == expected
    assert not (tmp_path / "data").exists()  # refused before the storage was opened
