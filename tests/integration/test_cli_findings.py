"""The CLI's answers to issue 8's findings: confirmation before destructive commands, true counts,
warnings about the right side, a quiet exit on a closed pipe, ``--kind``, and a checked ``--url``.

Every command runs as a real process against a real daemon (or embedded logs); "a terminal" is a
real pseudo-terminal (``pty``), so ``isatty`` answers as it does for a person at a shell.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess, free_port

EXIT_REFUSED, EXIT_USAGE, EXIT_CLOSED_PIPE = 1, 2, 141


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Without a terminal: stdin is /dev/null, as in a script or CI."""
    return run_cli(*args, env={**os.environ, **(env or {})})


def cli_on_a_terminal(*args: str, answer: str | None) -> tuple[int, str]:
    """Run with a pseudo-terminal as stdin (and stderr, where the question goes); type ``answer`` at
    the question, or press Ctrl-C there (``None``: a SIGINT, as the terminal sends it)."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "emulator.cli", *args],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=terminal,
        )
        os.close(terminal)
        seen = b""
        deadline = time.monotonic() + 60
        while b"[y/N]" not in seen and proc.poll() is None and time.monotonic() < deadline:
            seen += _read_some(controller)
        if answer is None:
            proc.send_signal(signal.SIGINT)
        else:
            os.write(controller, answer.encode() + b"\n")
        stdout, _ = proc.communicate(timeout=60)
        while chunk := _read_some(controller):
            seen += chunk
        return proc.returncode, (seen + stdout).decode(errors="replace")
    finally:
        os.close(controller)


def _read_some(fd: int) -> bytes:
    import select

    ready, _, _ = select.select([fd], [], [], 0.2)
    if not ready:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:  # the other side closed
        return b""


def seed(daemon: DaemonProcess, name: str, partitions: int = 1) -> None:
    body = {"offsets": [{"partition": {"file": f"f{i}"}, "offset": {"position": i}} for i in range(partitions)]}
    answer = httpx.patch(f"{daemon.url}/connectors/{name}/offsets", params={"create": "true"}, json=body, timeout=30)
    assert answer.status_code == 200, answer.text


def offsets(daemon: DaemonProcess, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = httpx.get(f"{daemon.url}/connectors/{name}/offsets", timeout=30).json()["offsets"]
    return rows


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- confirmation ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_reset_without_a_terminal_needs_yes_and_changes_nothing_without_it(embedded_daemon: DaemonProcess) -> None:
    name = unique("cli-reset")
    seed(embedded_daemon, name)
    refused = cli("reset", name, "--url", embedded_daemon.url)
    assert refused.returncode == EXIT_USAGE
    assert "pass --yes to go ahead" in refused.stderr and "not a terminal" in refused.stderr
    assert len(offsets(embedded_daemon, name)) == 1, "nothing was reset"
    done = cli("reset", name, "--yes", "--url", embedded_daemon.url)
    assert done.returncode == 0, done.stderr
    assert offsets(embedded_daemon, name) == []


@pytest.mark.slow
def test_reset_on_a_terminal_shows_the_tombstones_then_asks(embedded_daemon: DaemonProcess) -> None:
    name = unique("cli-ask")
    seed(embedded_daemon, name)
    code, seen = cli_on_a_terminal("reset", name, "--url", embedded_daemon.url, answer="n")
    assert code == EXIT_REFUSED and "aborted: nothing was changed" in seen
    assert f'["{name}",{{"file":"f0"}}]  ->  (delete)' in seen and "None" not in seen
    assert len(offsets(embedded_daemon, name)) == 1
    code, seen = cli_on_a_terminal("reset", name, "--url", embedded_daemon.url, answer="y")
    assert code == 0, seen
    assert offsets(embedded_daemon, name) == []


@pytest.mark.slow
def test_rollback_needs_yes_without_a_terminal(embedded_daemon: DaemonProcess) -> None:
    name = unique("cli-rollback")
    seed(embedded_daemon, name)
    before_change = int(time.time() * 1000)
    time.sleep(0.01)
    seed(embedded_daemon, name, partitions=2)
    args = ("rollback", name, "--to", str(before_change), "--url", embedded_daemon.url)
    refused = cli(*args)
    assert refused.returncode == EXIT_USAGE and "--yes" in refused.stderr
    assert len(offsets(embedded_daemon, name)) == 2
    assert cli(*args, "--yes").returncode == 0
    assert len(offsets(embedded_daemon, name)) == 1


@pytest.mark.slow
def test_import_with_prune_needs_yes_without_a_terminal(tmp_path: Path) -> None:
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]}))
    target = f"embedded:{tmp_path / 'log'}"
    assert cli("import", "--from", f"kip875:{body}", "--to", target, "--name", "c", "--quiet").returncode == 0
    body.write_text(json.dumps({"offsets": [{"partition": {"f": 2}, "offset": {"p": 2}}]}))
    prune = ("import", "--from", f"kip875:{body}", "--to", target, "--name", "c", "--prune", "--quiet")
    refused = cli(*prune)
    assert refused.returncode == EXIT_USAGE and "--yes" in refused.stderr
    dry = cli(*prune, "--dry-run")
    assert dry.returncode == 0 and "would write 2 change(s)" in dry.stdout, "the dry run needs no confirmation"
    done = cli(*prune, "--yes")
    assert done.returncode == 0 and "wrote 2 change(s) (2 record(s) written)" in done.stdout, done.stdout


# --- output ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_transfer_summary_counts_every_change_not_only_the_listed_ones(tmp_path: Path) -> None:
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"offsets": [{"partition": {"f": i}, "offset": {"p": i}} for i in range(30)]}))
    result = cli("import", "--from", f"kip875:{body}", "--to", f"embedded:{tmp_path / 'log'}", "--name", "c")
    assert result.returncode == 0, result.stderr
    assert "wrote 30 change(s) (30 record(s) written)" in result.stdout
    assert "30 added" in result.stdout


@pytest.mark.slow
def test_migrate_warns_about_the_destination_it_was_given_partitions_for(tmp_path: Path) -> None:
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]}))
    source, target = f"embedded:{tmp_path / 'src'}", f"embedded:{tmp_path / 'dst'}"
    assert (
        cli("import", "--from", f"kip875:{body}", "--to", source, "--name", "c", "--partitions", "25").returncode == 0
    )
    created = cli("migrate", "--from", source, "--to", target, "--partitions", "3", "--quiet")
    assert created.returncode == 0, created.stderr
    assert "and keeps them" not in created.stderr, "the source's count is not what --partitions is about"
    again = cli("migrate", "--from", source, "--to", target, "--partitions", "5", "--quiet")
    assert "dst/connect-offsets.sqlite3 has 3 partitions and keeps them: the count for a new log (5)" in again.stderr
    assert "src/connect-offsets.sqlite3" not in again.stderr


@pytest.mark.slow
def test_a_connector_name_the_source_lacks_is_refused_or_named(tmp_path: Path) -> None:
    """A mistyped --connector selected nothing and exited 0: an export could replace a backup with an
    empty file. None of the names found: refused, nothing written; some: a note names the rest."""
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"c": {"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]}}))
    backup = tmp_path / "backup.json"
    kept = {"d": {"offsets": [{"partition": {"f": 2}, "offset": {"p": 2}}]}}
    backup.write_text(json.dumps(kept))

    typo = cli("migrate", "--from", f"kip875:{body}", "--to", f"kip875:{backup}", "--connector", "cc")
    assert typo.returncode == 2, typo.stderr
    assert "has no record of 'cc' (--connector); nothing was written" in typo.stderr
    assert json.loads(backup.read_text()) == kept
    partly = cli(
        "migrate", "--from", f"kip875:{body}", "--to", f"kip875:{backup}", "--connector", "c", "--connector", "cc"
    )
    assert partly.returncode == 0, partly.stderr
    assert "note: kip875:" in partly.stderr and "has no record of 'cc' (--connector)" in partly.stderr
    assert json.loads(backup.read_text()) == {"c": {"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]}, **kept}


@pytest.mark.slow  # three CLI processes
def test_naming_a_connector_the_source_lacks_but_the_destination_holds_points_to_prune(tmp_path: Path) -> None:
    """QA 26 D4: after a reset in the daemon, `export --connector file-f` to the worker's file exited 2
    as for a typo, without a word of --prune, the way such a reset is carried over."""
    row = {"offsets": [{"partition": {"filename": "/rx/in.txt"}, "offset": {"position": 250}}]}
    before, after_reset = tmp_path / "before.json", tmp_path / "after-reset.json"
    before.write_text(json.dumps({"file-f": row, "other": row}))
    after_reset.write_text(json.dumps({"other": row}))
    worker = tmp_path / "worker.offsets"
    assert cli("migrate", "--from", f"kip875:{before}", "--to", f"standalone:{worker}", "--quiet").returncode == 0
    kept = worker.read_bytes()

    refused = cli("migrate", "--from", f"kip875:{after_reset}", "--to", f"standalone:{worker}", "--connector", "file-f")
    assert refused.returncode == 2, refused.stderr
    assert "has no record of 'file-f' (--connector); nothing was written" in refused.stderr
    assert f"standalone:{worker} holds offsets of 'file-f'" in refused.stderr
    assert "carry the reset over with --connector file-f --prune" in refused.stderr
    assert "add --yes where no terminal can answer" in refused.stderr  # a script's run has no terminal
    assert worker.read_bytes() == kept

    typo = cli("migrate", "--from", f"kip875:{after_reset}", "--to", f"standalone:{worker}", "--connector", "file-g")
    assert typo.returncode == 2, typo.stderr
    assert "--prune" not in typo.stderr, "a name the destination does not hold either is a typo, not a reset"


@pytest.mark.slow  # four CLI processes
def test_a_connector_reset_at_the_source_is_carried_over_by_naming_it_with_prune(tmp_path: Path) -> None:
    """A reset connector has no records at the source, so --connector refused it as a typo and a whole
    export did not touch its records: a standalone worker resumed from the offsets reset elsewhere.
    Named with --prune, its records at the destination are deleted; a name neither side has is refused."""
    both, after_reset = tmp_path / "both.json", tmp_path / "after-reset.json"
    row = {"offsets": [{"partition": {"server": "mysql1"}, "offset": {"file": "mysql-bin.000003", "pos": 154}}]}
    both.write_text(json.dumps({"mysql-cdc": row, "other": row}))
    after_reset.write_text(json.dumps({"other": row}))
    worker = tmp_path / "worker.offsets"
    assert cli("migrate", "--from", f"kip875:{both}", "--to", f"standalone:{worker}", "--quiet").returncode == 0

    carry_reset = ("migrate", "--from", f"kip875:{after_reset}", "--to", f"standalone:{worker}")
    carried = cli(*carry_reset, "--connector", "mysql-cdc", "--prune", "--yes")
    assert carried.returncode == 0, carried.stderr
    listed = cli("migrate", "--from", f"standalone:{worker}", "--to", f"kip875:{tmp_path / 'now.json'}", "--quiet")
    assert listed.returncode == 0, listed.stderr
    now = json.loads((tmp_path / "now.json").read_text())
    reset = [{"partition": {"server": "mysql1"}, "offset": None}]  # a tombstone, as Connect's file store keeps it
    assert now == {"mysql-cdc": {"offsets": reset}, "other": row}, "the reset reached the worker's file"

    nobody = cli(*carry_reset, "--connector", "mysql-cdc", "--prune", "--yes")  # done: nothing left
    assert nobody.returncode == 2, nobody.stderr
    assert "has no record of 'mysql-cdc' (--connector), and" in nobody.stderr
    assert "has none to delete (--prune); nothing was written" in nobody.stderr


@pytest.mark.slow
def test_a_log_location_that_cannot_be_opened_is_bad_input(tmp_path: Path) -> None:
    """Exit 2 and "nothing was written", as for a file that cannot be read (it was 1, "refused")."""
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"c": {"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]}}))
    (tmp_path / "a-file").write_text("")
    into_a_file = cli("import", "--from", f"kip875:{body}", "--to", f"embedded:{tmp_path / 'a-file'}")
    assert into_a_file.returncode == 2 and "nothing was written" in into_a_file.stderr, into_a_file.stderr
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "connect-offsets.sqlite3").write_text("not a database")
    damaged = cli("export", "--from", f"embedded:{tmp_path / 'damaged'}", "--to", str(tmp_path / "out.avro"))
    assert damaged.returncode == 2 and "corrupt or not a SQLite database" in damaged.stderr, damaged.stderr


@pytest.mark.slow
def test_dot_and_dot_dot_are_connector_names_not_path_steps(daemon_factory: DaemonFactory) -> None:
    """A URL reads /connectors/../offsets as /offsets: the client sent every request for connector
    '..' to another route (a bare 404). Its own daemon: the names cannot be made unique per test."""
    daemon = daemon_factory()
    body = '{"offsets":[{"partition":{"f":"1"},"offset":{"p":1}}]}'
    for name in (".", ".."):
        written = run_cli("alter", name, "--file", "-", "--create", "--url", daemon.url, stdin=body)
        assert written.returncode == 0, written.stderr
        shown = run_cli("get", name, "--json", "--url", daemon.url)
        assert shown.returncode == 0 and json.loads(shown.stdout) == json.loads(body), shown.stderr
    assert json.loads(run_cli("list", "--json", "--url", daemon.url).stdout) == [".", ".."]


def _interrupted_alter(url: str, body: str | None, ready: Callable[[subprocess.Popen[str]], None]) -> tuple[int, str]:
    """``alter --file -`` sent SIGINT once ``ready`` returns: with ``body`` None its stdin stays open,
    so it is still reading its body; else it has the body."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "alter", unique("cli-int"), "--file", "-", "--url", url],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stderr is not None
    try:
        if body is not None:
            proc.stdin.write(body)
            proc.stdin.close()
        ready(proc)
        proc.send_signal(signal.SIGINT)
        status = proc.wait(timeout=30)
    finally:
        proc.kill()
    with proc.stderr:
        return status, proc.stderr.read()


def _reading_stdin(proc: subprocess.Popen[str]) -> None:
    """Until the process waits in read(2) on descriptor 0 (``/proc/PID/syscall``: number 0, first
    argument 0x0 on x86-64 and arm64's 63), or for descriptor 0 to be readable in select(2) (a pipe is
    read within a timeout, as a transfer's ``KIND:-``: x86-64's select 23 or pselect6 270, arm64's
    pselect6 72, first argument 1 descriptor): a loaded machine may take seconds to start the interpreter."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        fields = Path(f"/proc/{proc.pid}/syscall").read_text().split()
        if fields[:2] in (["0", "0x0"], ["63", "0x0"], ["23", "0x1"], ["270", "0x1"], ["72", "0x1"]):
            return
        time.sleep(0.05)
    raise AssertionError("the command never read its stdin")


@pytest.mark.slow
def test_ctrl_c_during_a_write_says_it_may_have_been_applied() -> None:
    """ "interrupted" alone read as "nothing happened" after an import the daemon had applied in full.
    The "daemon" here takes the whole request and never answers: the interruption comes while it waits."""
    with socket.socket() as listener, contextlib.ExitStack() as held:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(30)

        def request_received(_: subprocess.Popen[str]) -> None:
            connection = held.enter_context(listener.accept()[0])  # open until the end: no answer, no reset
            connection.settimeout(30)
            received = b""
            while not received.endswith(b'{"offsets":[]}'):
                received += connection.recv(65536)

        status, stderr = _interrupted_alter(
            f"http://127.0.0.1:{listener.getsockname()[1]}", '{"offsets":[]}', request_received
        )
    assert status == 130, stderr
    assert stderr.strip().endswith(
        "may have been applied; check the destination (`connect-offsets get`, or a dry run) before running it again"
    )


_SIGINT_TO_ANOTHER_THREAD = """
import signal, sys, threading, time
threading.Thread(target=lambda: time.sleep(3600), daemon=True).start()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
from emulator.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""``connect-offsets`` whose main thread, and every thread it starts, blocks SIGINT: the kernel hands
the signal to one idle thread, whose C handler flags Python's handler, and no call of the main
thread is interrupted. That is the state a SIGINT leaves when it lands just before a blocking call
(the race behind a hang of the test above under load), made on purpose instead of by chance."""


def _in_poll(pid: int) -> bool:
    """Whether a thread of ``pid`` waits in poll(2) (x86-64 7, ppoll 271; arm64 ppoll 73)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, IndexError):
            if (task / "syscall").read_text().split()[0] in ("7", "271", "73"):
                return True
    return False


@pytest.mark.slow
def test_ctrl_c_that_interrupts_no_call_still_ends_a_write_waiting_for_its_answer() -> None:
    """A SIGINT that interrupted no system call left the command waiting for its answer until the
    --timeout (60 s here; 90 by default): it acts within a fraction of a second, with the same words."""
    with socket.socket() as listener, contextlib.ExitStack() as held:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(30)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        command = ["alter", unique("cli-int"), "--file", "-", "--url", url, "--timeout", "60"]
        proc = subprocess.Popen(
            [sys.executable, "-c", _SIGINT_TO_ANOTHER_THREAD, *command],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdin is not None and proc.stderr is not None
        try:
            proc.stdin.write('{"offsets":[]}')
            proc.stdin.close()
            connection = held.enter_context(listener.accept()[0])  # open until the end: no answer, no reset
            connection.settimeout(30)
            received = b""
            while not received.endswith(b'{"offsets":[]}'):
                received += connection.recv(65536)
            deadline = time.monotonic() + 30
            while not _in_poll(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _in_poll(proc.pid), "the command never waited in poll(2) for its answer"
            signalled = time.monotonic()
            proc.send_signal(signal.SIGINT)
            status = proc.wait(timeout=10)
            took = time.monotonic() - signalled
        finally:
            proc.kill()
        with proc.stderr:
            stderr = proc.stderr.read()
    assert status == 130, stderr
    assert took < 2, f"exit {took:.1f} s after SIGINT"
    assert stderr == (
        "interrupted: what `alter` had already sent may have been applied; check the destination "
        "(`connect-offsets get`, or a dry run) before running it again\n"
    )


@pytest.mark.slow
def test_ctrl_c_while_the_body_is_read_from_stdin_says_nothing_was_sent(embedded_daemon: DaemonProcess) -> None:
    """It said the write "may have been applied" though the body was still being read."""
    status, stderr = _interrupted_alter(embedded_daemon.url, None, _reading_stdin)
    assert status == 130, stderr
    assert stderr.strip() == "interrupted: `alter` sent no change (only its dry run, if any): nothing was changed"


@pytest.mark.slow
def test_ctrl_c_at_the_question_says_nothing_was_changed(embedded_daemon: DaemonProcess) -> None:
    """It said "what `reset` had already sent may have been applied", though only the dry run was sent."""
    name = unique("cli-int-ask")
    seed(embedded_daemon, name)
    status, said = cli_on_a_terminal("reset", name, "--url", embedded_daemon.url, answer=None)
    assert status == 130, said
    assert "interrupted: `reset` sent no change (only its dry run, if any): nothing was changed" in said, said
    assert "may have been applied" not in said
    assert len(offsets(embedded_daemon, name)) == 1


@pytest.mark.slow
def test_a_kafka_destination_nobody_answers_ends_the_transfer_at_its_timeout(tmp_path: Path) -> None:
    """It waited for ever (the daemon's way at start-up), ignoring --timeout, naming --bootstrap-servers."""
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"c": {"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]}}))
    nobody = f"kafka://127.0.0.1:{free_port()}/offsets"
    started = time.monotonic()
    done = cli("migrate", "--from", f"kip875:{body}", "--to", nobody, "--timeout", "3")
    assert done.returncode == 2, done.stderr
    assert time.monotonic() - started < 30
    assert "(--to) within 3 s (--timeout)" in done.stderr and "nothing was written" in done.stderr, done.stderr
    source_down = cli("migrate", "--from", nobody, "--to", f"kip875:{tmp_path / 'out.json'}", "--timeout", "2")
    dry_run_down = cli("migrate", "--from", f"kip875:{body}", "--to", nobody, "--dry-run", "--timeout", "2")
    for said, role in ((source_down, "--from"), (dry_run_down, "--to")):  # they said "cannot reach the brokers"
        assert said.returncode == 2, said.stderr
        assert "cannot reach the Kafka cluster at 127.0.0.1:" in said.stderr, said.stderr
        assert f"({role}) within 2 s (--timeout)" in said.stderr and "nothing was written" in said.stderr


@pytest.mark.slow
def test_a_closed_pipe_ends_the_command_quietly(embedded_daemon: DaemonProcess) -> None:
    name = unique("cli-pipe")
    seed(embedded_daemon, name, partitions=3000)  # ~200 KB of JSON: more than a pipe holds
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "get", name, "--json", "--url", embedded_daemon.url],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(100)  # then go away, as `| head -c 100` does
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == EXIT_CLOSED_PIPE
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


@pytest.mark.slow
def test_a_stdout_that_cannot_be_written_is_one_line_and_exit_74(embedded_daemon: DaemonProcess) -> None:
    """``> /dev/full`` gave a traceback and exit 1; after ``alter`` nobody could tell it had been applied."""
    name = unique("cli-full")
    body = json.dumps({"offsets": [{"partition": {"file": "f0"}, "offset": {"position": 5}}]})
    said: dict[str, tuple[int, str]] = {}
    for command, args in (("list", ()), ("alter", (name, "--file", "-", "--create"))):
        with open("/dev/full", "w") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "emulator.cli", command, *args, "--url", embedded_daemon.url],
                input=body,
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
        said[command] = (proc.returncode, proc.stderr)
    error = "error: cannot write the output to stdout: No space left on device"
    assert said["list"] == (74, error + "\n")
    assert said["alter"] == (74, error + "; `alter` itself succeeded (its change was made): only its report was lost\n")
    assert offsets(embedded_daemon, name) == [{"partition": {"file": "f0"}, "offset": {"position": 5}}]


@pytest.mark.slow
def test_kind_reaches_the_daemon_for_get_alter_and_reset(embedded_daemon: DaemonProcess, tmp_path: Path) -> None:
    """The embedded log has no consumer groups, so the daemon's answer to ``kind=sink`` proves the
    option arrived; ``--kind source`` is Connect's default behaviour."""
    name = unique("cli-kind")
    seed(embedded_daemon, name)
    url = ("--url", embedded_daemon.url)
    body = tmp_path / "sink.json"
    body.write_text(
        json.dumps({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": None}]})
    )
    for args in (("get", name), ("alter", name, "--file", str(body)), ("reset", name, "--dry-run")):
        sink = cli(*args, "--kind", "sink", *url)
        assert sink.returncode == EXIT_REFUSED and "the embedded log has no consumer groups" in sink.stderr, args
    assert json.loads(cli("get", name, "--kind", "source", "--json", *url).stdout)["offsets"] == offsets(
        embedded_daemon, name
    )
    assert cli("get", name, "--kind", "both", *url).returncode == EXIT_USAGE


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_transfers_check_the_daemon_url_like_every_command(how: str, tmp_path: Path) -> None:
    args = ["export", "--to", str(tmp_path / "out.json"), "--quiet"]
    if how == "flag":
        result = cli(*args, "--url", "localhost:8081")
        assert result.returncode == EXIT_USAGE and "--url" in result.stderr
    else:
        result = cli(*args, env={"CONNECT_OFFSETS_URL": "localhost:8081"})
        assert result.returncode == EXIT_USAGE and "CONNECT_OFFSETS_URL" in result.stderr
    assert "http:// or https:// URL" in result.stderr


@pytest.mark.slow  # 2-7 s here (2026-11-27)
def test_connection_options_may_come_before_the_command(embedded_daemon: DaemonProcess) -> None:
    """``connect-offsets --url U get NAME`` is how people write it (kubectl, git); it was refused as
    "invalid choice: 'U'". Options the command does not take are still refused by name."""
    name = unique("cli-url-first")
    seed(embedded_daemon, name)
    first = cli("--url", embedded_daemon.url, "--json", "get", name)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["offsets"] == offsets(embedded_daemon, name)
    unknown = cli("--no-such-option", "get", name, "--url", embedded_daemon.url)
    assert unknown.returncode == EXIT_USAGE and "unrecognized arguments: --no-such-option" in unknown.stderr
    assert cli("--help").returncode == 0 and cli("--version", "get").returncode == 0


@pytest.mark.parametrize(
    "args",
    [
        ("alter", "c", "--file", "-", "--url", "http://127.0.0.1:48899"),
        ("import", "--from", "kip875:-", "--url", "http://127.0.0.1:48899"),
    ],
)
def test_a_body_on_standard_input_that_is_a_terminal_is_refused_at_once(args: tuple[str, ...]) -> None:
    """QA 21 #3: ``alter --file -`` on a terminal waited without a word for an end of file that a
    person rarely knows to type, where ``import --from kip875:-`` refuses at once (docs/transfers.md:
    alter --file follows the same rules). Nothing is sent: the daemon's port has no listener."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "emulator.cli", *args],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(terminal)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"`{' '.join(args)}` waited for a terminal's end of input")
    finally:
        os.close(controller)
    assert proc.returncode == EXIT_USAGE, stderr
    assert "standard input is a terminal: pipe the file into it" in stderr, stderr
    assert stdout == ""
