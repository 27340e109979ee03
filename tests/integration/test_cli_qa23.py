"""QA pass 23's CLI findings: a 401's hint offers only the ways in the daemon takes; an inverted
``history`` range is refused; a ``--url`` answered by another service is exit 3, not 1; a big
``alter --dry-run`` shows progress and a summary on stderr; ``migrate --prune --dry-run`` reads its
destination once. Every command runs as a real process against real daemons (or a real other service)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from emulator.model.times import format_time_ms, parse_time_ms
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess, free_port
from tests.fixtures.waits import until
from tests.integration.auth_helpers import write_security_files

EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 1, 2, 3
TOKEN_WAY = "a bearer token (--token, or CONNECT_OFFSETS_TOKEN)"
BASIC_WAY = "an HTTP Basic user (--user, or CONNECT_OFFSETS_USER, with the password in CONNECT_OFFSETS_PASSWORD)"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Without a terminal, and with no ``CONNECT_OFFSETS_*`` variable but those given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_OFFSETS_")}
    return run_cli(*args, env={**clean, **(env or {})})


def hint_of(shown: subprocess.CompletedProcess[str]) -> str:
    hints = [line for line in shown.stderr.splitlines() if line.startswith("hint: ")]
    assert len(hints) == 1, shown.stderr
    return hints[0]


@pytest.mark.slow  # two daemons of their own
def test_a_401_hint_offers_only_the_ways_in_the_daemon_advertises(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """QA 23 #1: a daemon with tokens alone was said to take an HTTP Basic user too, and one with Basic
    users alone a bearer token: the hint follows its ``WWW-Authenticate`` challenges."""
    files = write_security_files(tmp_path)
    tokens_only = daemon_factory("--tokens-file", str(files.tokens_file))
    basic_only = daemon_factory("--credentials-file", str(files.credentials))

    asked = cli("list", "--url", tokens_only.url)
    assert asked.returncode == EXIT_REFUSED, asked.stderr
    assert hint_of(asked) == f"hint: the daemon wants credentials: only {TOKEN_WAY}"
    wrong = cli("list", "--url", tokens_only.url, env={"CONNECT_OFFSETS_TOKEN": "not-a-token"})
    assert hint_of(wrong) == f"hint: the daemon did not accept the credentials given; it takes only {TOKEN_WAY}"

    asked = cli("list", "--url", basic_only.url)
    assert asked.returncode == EXIT_REFUSED, asked.stderr
    assert hint_of(asked) == f"hint: the daemon wants credentials: only {BASIC_WAY}"
    wrong = cli("list", "--url", basic_only.url, "--token", "t")
    assert hint_of(wrong) == f"hint: the daemon did not accept the credentials given; it takes only {BASIC_WAY}"


@pytest.mark.slow
def test_a_401_hint_offers_both_ways_where_the_daemon_takes_both(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    files = write_security_files(tmp_path)
    both = daemon_factory("--tokens-file", str(files.tokens_file), "--credentials-file", str(files.credentials))
    asked = cli("get", f"qa23-{uuid.uuid4().hex[:8]}", "--url", both.url)
    assert asked.returncode == EXIT_REFUSED, asked.stderr
    assert hint_of(asked) == f"hint: the daemon wants credentials: {TOKEN_WAY} or {BASIC_WAY}"


@pytest.mark.slow  # three CLI processes
def test_history_refuses_a_from_later_than_its_to_naming_both_times(embedded_daemon: DaemonProcess) -> None:
    """QA 23 #2: ``--from now --to now-1h`` printed "(no changes in that range)", exit 0, for a connector
    whose changes lie in the hour before: the daemon answers an inverted range with an empty page."""
    name = f"qa23-{uuid.uuid4().hex[:8]}"
    httpx.patch(
        f"{embedded_daemon.url}/connectors/{name}/offsets",
        params={"create": "true"},
        json={"offsets": [{"partition": {"f": "a"}, "offset": {"p": 1}}]},
        timeout=30,
    ).raise_for_status()
    url = ("--url", embedded_daemon.url)

    inverted = cli("history", name, "--from", "now", "--to", "now-1h", *url)
    assert inverted.returncode == EXIT_USAGE, inverted.stdout + inverted.stderr
    assert inverted.stdout == "", "nothing listed"
    resolved = dict(line.split(": ", 1) for line in inverted.stderr.splitlines() if line.startswith("--"))
    assert set(resolved) == {"--from now", "--to now-1h"}, inverted.stderr
    assert inverted.stderr.splitlines()[-1] == (
        f"error: --from {resolved['--from now']} is later than --to {resolved['--to now-1h']}: no change can lie in "
        "that range; give the earlier time to --from (changes are listed newest first either way)"
    )

    absolute = cli("history", name, "--from", "2026-01-02T00:00:00Z", "--to", "1767225600000", *url)
    assert absolute.returncode == EXIT_USAGE, absolute.stderr
    first, second = (format_time_ms(parse_time_ms(t)) for t in ("2026-01-02T00:00:00Z", "1767225600000"))
    assert f"error: --from {first} is later than --to {second}: no change can lie in that range" in absolute.stderr

    ordered = cli("history", name, "--from", "now-1h", "--to", "now", *url)
    assert ordered.returncode == 0 and '{"f": "a"}' in ordered.stdout, ordered.stdout + ordered.stderr


@pytest.fixture
def other_web_server(tmp_path: Path) -> Iterator[str]:
    """Python's own ``http.server`` on a free port: a web server that is no connect-offsets daemon (its
    GETs of unknown paths answer a 404 HTML page, its PATCH/POST/DELETE a 501 one)."""
    served = tmp_path / "served"
    served.mkdir()
    port = free_port()
    with (tmp_path / "http.server.log").open("ab") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(served), str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            try:
                return httpx.get(url, timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        until(answers, "http.server to answer", timeout_s=20)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.slow  # five CLI processes
def test_a_url_answered_by_another_web_server_is_exit_3_saying_it_is_no_daemon(
    other_web_server: str, embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    """QA 23 #3: ``--url`` at another web server was exit 1 ("refused") with its HTML for a message; the
    daemon is not there, which is exit 3. A daemon's own 404 (an unknown connector) stays exit 1, and so
    does its web framework's 404 for a wrong base path: both carry Connect's JSON body."""
    name = f"qa23-{uuid.uuid4().hex[:8]}"
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"offsets": [{"partition": {"f": "a"}, "offset": {"p": 1}}]}))
    for args, status, path in [
        (("list",), 404, "/connectors"),
        (("get", name), 404, f"/connectors/{name}/offsets"),
        (("alter", name, "--file", str(body), "--create"), 501, f"/connectors/{name}/offsets"),
        (("export", "--to", str(tmp_path / "out.json")), 404, "/offsets/records"),
    ]:
        shown = cli(*args, "--url", other_web_server)
        assert shown.returncode == EXIT_UNREACHABLE, (args, shown.stderr)
        error = shown.stderr.strip().splitlines()[-1]
        assert error.startswith(f'error: {other_web_server}{path} answered HTTP {status} (text/html: "Error response')
        assert "which is not a connect-offsets daemon's answer" in error, error
        assert error.endswith("check the daemon's URL (host, port, base path)"), error

    unknown = cli("get", name, "--url", embedded_daemon.url)
    assert unknown.returncode == EXIT_REFUSED, unknown.stderr
    assert "not a connect-offsets daemon" not in unknown.stderr, unknown.stderr
    wrong_base = cli("get", name, "--url", embedded_daemon.url + "/api")
    assert wrong_base.returncode == EXIT_REFUSED, wrong_base.stderr
    assert "without being a connect-offsets daemon route" in wrong_base.stderr, wrong_base.stderr


@pytest.mark.slow  # 10,050 partitions planned by the daemon
def test_a_long_alter_dry_run_shows_progress_and_ends_with_a_summary_on_stderr(
    embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    """QA 23 #4: 70,000 partitions took seconds without a word on stderr, then scrolled past. Progress
    lines as a transfer's (above 10,000 records) and a closing count; stdout unchanged."""
    name = f"qa23-{uuid.uuid4().hex[:8]}"
    now = [{"partition": {"f": i}, "offset": {"p": i}} for i in range(30)]
    httpx.patch(
        f"{embedded_daemon.url}/connectors/{name}/offsets", params={"create": "true"}, json={"offsets": now}, timeout=30
    ).raise_for_status()
    # 0-9 the same again, 10-19 changed, 20-24 reset, 25-29 left alone, then 10,020 new ones
    planned = [{"partition": {"f": i}, "offset": {"p": i if i < 10 else -i}} for i in range(20)]
    planned += [{"partition": {"f": i}, "offset": None} for i in range(20, 25)]
    planned += [{"partition": {"f": i}, "offset": {"p": i}} for i in range(30, 10_050)]
    body = tmp_path / "offsets.json"
    body.write_text(json.dumps({"offsets": planned}))

    shown = cli("alter", name, "--file", str(body), "--dry-run", "--url", embedded_daemon.url)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "Dry run: nothing was written. 10045 record(s) would be written." and len(lines) == 10_046
    assert lines[1].startswith("  partition ") and f'["{name}",{{"f":0}}]  ->  {{"p":0}}' in shown.stdout
    where = f"{embedded_daemon.url}/connectors/{name}/offsets (dry run)"
    assert shown.stderr.splitlines() == [
        f"read {body}: 10045/10045 records",
        f"sending to {where}: 0/10045 records",
        f"answered by {where}: 10045/10045 records",
        "dry run of 10,045 partition(s): 15 changed (5 of them reset), 10 unchanged, 10,020 new; nothing was written",
    ]
    quiet = cli("alter", name, "--file", str(body), "--dry-run", "--quiet", "--url", embedded_daemon.url)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == shown.stdout, quiet.stderr


@pytest.mark.slow  # a 10,010-record embedded log written, then read
def test_migrate_prune_dry_run_reads_its_destination_once(embedded_daemon: DaemonProcess, tmp_path: Path) -> None:
    """QA 23 #5: ``--prune`` read the destination for its tombstones, then again to plan the diff (a whole
    log, or a file, twice). Counted by the progress line each reading of a log of more than 10,000
    records prints, and for a daemon by its access log: one GET, then the POST that plans."""
    name = f"qa23-{uuid.uuid4().hex[:8]}"
    held = tmp_path / "held.json"
    held.write_text(json.dumps({"offsets": [{"partition": {"f": i}, "offset": {"p": i}} for i in range(10_010)]}))
    wanted = tmp_path / "wanted.json"
    wanted.write_text(json.dumps({"offsets": [{"partition": {"f": i}, "offset": {"p": -i}} for i in range(10)]}))
    log = tmp_path / "log"
    made = cli("migrate", "--from", f"kip875:{held}", "--to", f"embedded:{log}", "--name", name)
    assert made.returncode == 0, made.stderr

    planned = cli(
        "migrate", "--from", f"kip875:{wanted}", "--to", f"embedded:{log}", "--name", name, "--prune", "--dry-run"
    )
    assert planned.returncode == 0, planned.stderr
    assert "would write 10009 change(s)" in planned.stdout, planned.stdout
    assert "9 changed, 10000 removed, 1 unchanged" in planned.stdout, planned.stdout  # -0 is 0: unchanged
    reads = [line for line in planned.stderr.splitlines() if line.startswith("read embedded:")]
    assert len(reads) == 1 and reads[0].endswith("connect-offsets.sqlite3: 10010/10010 records"), planned.stderr

    httpx.patch(
        f"{embedded_daemon.url}/connectors/{name}/offsets",
        params={"create": "true"},
        json={"offsets": [{"partition": {"f": i}, "offset": {"p": i}} for i in range(20)]},
        timeout=30,
    ).raise_for_status()
    before = len(embedded_daemon.log_path.read_text().splitlines())
    to_daemon = cli(
        "migrate", "--from", f"kip875:{wanted}", "--to", embedded_daemon.url, "--name", name, "--prune", "--dry-run"
    )
    assert to_daemon.returncode == 0 and "9 changed, 10 removed, 1 unchanged" in to_daemon.stdout, to_daemon.stderr
    until(lambda: "POST /offsets/records" in embedded_daemon.log_tail(5), "the daemon's access line for the plan")
    asked = [
        line.split("emulator.access: ")[1].split(" 200 ")[0]
        for line in embedded_daemon.log_path.read_text().splitlines()[before:]
        if "emulator.access: " in line and "/offsets/records" in line
    ]
    assert asked == ["GET /offsets/records", "POST /offsets/records"]
