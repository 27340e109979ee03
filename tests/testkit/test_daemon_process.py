"""The daemon as a context manager, for frameworks other than pytest (``emulator.testing.process``).

Specification: ``with EmbeddedDaemon() as daemon`` starts ``connect-offsets serve`` on a port the
system picks, in a fresh data directory that is removed afterwards, and ``daemon.url`` answers;
nothing of it imports pytest. A daemon that exits or is not ready in time raises
``DaemonStartError`` ending with its log, and is not left running. ``KafkaDaemon`` does the same on
a broker's offsets topic.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from emulator.testing import DaemonStartError, EmbeddedDaemon, KafkaDaemon, OffsetsKit
from emulator.testing.process import OWNER_LOCK, remove_stale_workdirs
from tests.fixtures.broker import TansuBroker
from tests.fixtures.sockets import silent_port
from tests.testkit.conftest import exited

SCRIPT = """
import sys
from emulator.testing import EmbeddedDaemon, OffsetsKit

with EmbeddedDaemon() as daemon, OffsetsKit(daemon.url) as kit:
    kit.seed("orders-src", [({"filename": "/data/orders.csv"}, {"position": 4096})])
    kit.assert_offsets("orders-src", [({"filename": "/data/orders.csv"}, {"position": 4096})])
    print(daemon.url, daemon.workdir, daemon.proc.pid)
print("pytest" in sys.modules, daemon.workdir.exists(), daemon.proc.poll() is not None)
"""


@pytest.mark.slow  # a Python process of its own that starts a daemon
def test_a_script_runs_a_daemon_with_the_context_manager_and_without_pytest(tmp_path: Path) -> None:
    script = tmp_path / "pipeline_check.py"
    script.write_text(SCRIPT)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_OFFSETS_")}

    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=clean)

    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    url, workdir, _pid = first.split()
    assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
    assert Path(workdir).name.startswith("connect-offsets-")
    assert second == "False False True"  # no pytest imported; work directory removed; process stopped


ORPHANING_SCRIPT = """
import threading, time
from emulator.testing import EmbeddedDaemon

daemon = EmbeddedDaemon()
starter = threading.Thread(target=daemon.start)  # not the main thread: no parent-death signal for the daemon
starter.start()
starter.join()
print(daemon.workdir, daemon.proc.pid, daemon.url, flush=True)
time.sleep(600)
"""


@pytest.mark.slow  # a Python process of its own that starts a daemon
@pytest.mark.skipif(sys.platform == "win32", reason="no flock: a directory there is removed only when its daemon stops")
def test_a_work_directory_is_taken_for_stale_only_once_neither_its_kit_nor_its_daemon_runs(tmp_path: Path) -> None:
    """The sweep at the next start (docs/testing.md) removes a killed run's directory, and never one
    still in use: not while the script that made it runs, nor while its daemon runs on without it.
    A directory without the kit's lock file is not the kit's to remove."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    (temp / "connect-offsets-not-the-kits").mkdir()  # the prefix, without the lock file
    (temp / "other").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_OFFSETS_")} | {"TMPDIR": str(temp)}
    script = subprocess.Popen(
        [sys.executable, "-c", ORPHANING_SCRIPT], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    daemon_pid = 0
    try:
        assert script.stdout is not None
        workdir, pid, url = script.stdout.readline().split()
        daemon_pid = int(pid)
        assert (Path(workdir) / OWNER_LOCK).read_text() == f"{script.pid}\n"
        assert remove_stale_workdirs(temp) == []  # the script runs

        script.kill()
        script.wait(10)
        assert not exited(daemon_pid, within_s=1.0)  # orphaned, it runs on
        assert remove_stale_workdirs(temp) == []
        assert httpx.get(url + "/readyz", timeout=10).status_code == 200

        os.kill(daemon_pid, signal.SIGKILL)
        assert exited(daemon_pid, within_s=30)
        assert remove_stale_workdirs(temp) == [Path(workdir)]
        assert sorted(p.name for p in temp.iterdir()) == ["connect-offsets-not-the-kits", "other"]
    finally:
        if script.poll() is None:
            script.kill()
            script.wait(10)
        if daemon_pid and not exited(daemon_pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(daemon_pid, signal.SIGKILL)


@pytest.mark.slow  # two daemons, one after the other
def test_a_given_data_dir_is_kept_and_reopened(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedDaemon(data) as first, OffsetsKit(first.url) as kit:
        kit.client.alter("kept", {"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]}, create=True)
    with EmbeddedDaemon(data) as second:
        assert second.client().offsets("kept") == [{"partition": {"f": 1}, "offset": {"p": 1}}]
    assert (data / "history").is_dir()


def test_a_daemon_that_exits_raises_with_its_log() -> None:
    daemon = EmbeddedDaemon(extra_args=["--offsets-partitions", "0"])
    with pytest.raises(DaemonStartError) as failure:
        daemon.start()

    message = str(failure.value)
    assert message.startswith("the daemon exited with code 2 before it was ready\n--- daemon log (last lines) ---")
    assert message.endswith("error: --offsets-partitions: expected an integer >= 1, got '0'")
    assert not daemon.workdir.exists()


@pytest.fixture
def silent_broker() -> Iterator[str]:
    """A port that accepts connections and never answers: a broker that hangs."""
    with silent_port() as port:
        yield f"127.0.0.1:{port}"


@pytest.mark.slow
def test_a_daemon_not_ready_in_time_is_killed_and_raises(silent_broker: str) -> None:
    daemon = KafkaDaemon(silent_broker, start_timeout_s=1.0)
    with pytest.raises(DaemonStartError, match=r"^the daemon was not ready within 1 s \(command: "):
        daemon.start()
    assert daemon.proc is not None and daemon.proc.poll() is not None
    assert not daemon.workdir.exists()


def test_a_daemon_never_started_has_no_url_and_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    daemon = EmbeddedDaemon()
    with pytest.raises(RuntimeError, match="not running"):
        _ = daemon.url
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # a daemon on Kafka
@pytest.mark.kafka
def test_a_kafka_daemon_works_on_the_brokers_offsets_topic(kafka_broker: TansuBroker) -> None:
    topic = kafka_broker.unique_topic("kit-daemon")
    with KafkaDaemon(kafka_broker.bootstrap, offsets_topic=topic, extra_args=["--offsets-partitions", "3"]) as d:
        status = httpx.get(d.url + "/status", timeout=10).json()
        with OffsetsKit(d.url) as kit:
            kit.seed("c", [({"f": 1}, {"p": 1})])
            assert kit.offsets("c") == [{"partition": {"f": 1}, "offset": {"p": 1}}]

    assert status["log"] == f"kafka://{kafka_broker.bootstrap}/{topic}" and status["partitions"] == 3


def test_waiting_for_a_url_where_something_else_answers_ends_in_seconds_not_at_the_timeout(tmp_path: Path) -> None:
    """A web server that is no daemon (a wrong port, say) answers 404 for every route: final, so the
    wait ends after ``NOT_A_DAEMON_S``, not the session's 60 s, with what answered."""
    from emulator.testing.process import NOT_A_DAEMON_S, wait_until_ready

    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split(" port ")[1].split()[0])
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="answers, but not as a connect-offsets daemon") as failure:
            wait_until_ready(f"http://127.0.0.1:{port}", timeout_s=60)
        assert NOT_A_DAEMON_S <= time.monotonic() - started < NOT_A_DAEMON_S + 5
        assert "404" in str(failure.value)
    finally:
        server.kill()
        server.wait()
