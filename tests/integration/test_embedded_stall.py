"""A commit that does not come back makes the embedded daemon not ready, and says why.

A disk that stops answering its fsync, or another process holding the log's write lock, holds every
write behind the transaction in it. ``/readyz`` then answers 503 naming the wait, as it does for a
Kafka cluster that stopped answering, while reads of the view go on; once the commit returns, the
write lands and the daemon is ready again. The reason names the log's file, so a probe without
credentials learns that the log cannot be reached, not where it is (as for a Kafka cluster's
hosts). The app runs in-process over a real SQLite log, whose threshold is lowered from
``STALLED_COMMIT_S`` (5 s) so the test takes a second; a second connection's ``BEGIN IMMEDIATE`` is
the stalled commit (a hung fsync cannot be made on demand).
"""

from __future__ import annotations

import base64
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.embedded.offsets_log import STALLED_COMMIT_S, EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.model.records import Position
from emulator.server.auth.config import build_security
from emulator.server.auth.status import HIDDEN
from emulator.server.settings import Settings
from emulator.server.wiring import assemble_runtime, make_app, start_reading
from emulator.view.offset_view import OffsetView
from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.waits import until
from tests.integration.auth_helpers import PASSWORDS, mint, write_security_files
from tests.integration.scrape import parse

STALL_S = 0.3


def test_a_stalled_commit_makes_readyz_answer_503_with_why_and_reads_go_on(tmp_path: Path) -> None:
    assert STALLED_COMMIT_S == 5.0  # the daemon's threshold, half the default --write-timeout
    connector = f"stall-{time.monotonic_ns()}"
    log = EmbeddedOffsetLog(tmp_path, partitions=2, synchronous="NORMAL", stalled_commit_s=STALL_S)
    log.open()
    log.append([(encode_key(connector, {"file": "a"}), encode_offset({"position": 1}))])
    runtime = assemble_runtime(log, OffsetView(), NoConnectCluster())
    start_reading(runtime)
    files = write_security_files(tmp_path / "security")
    security = build_security(
        Settings(credentials_file=files.credentials, tokens_file=files.tokens_file, scopes_file=files.scopes)
    )
    credentials = base64.b64encode(f"alice:{PASSWORDS['alice']}".encode()).decode()
    admin = {"Authorization": f"Basic {credentials}"}  # alice is the admin of the authentication tests' files
    other = sqlite3.connect(log.path, isolation_level=None, check_same_thread=False)
    landed: list[list[Position]] = []
    try:
        with TestClient(
            make_app(runtime, security=security, reading_started=True), base_url="http://localhost"
        ) as client:
            until(lambda: client.get("/readyz").status_code == 200, "ready after the replay")

            other.execute("BEGIN IMMEDIATE")  # the write lock, held as by a commit that does not return
            write = threading.Thread(
                target=lambda: landed.append(
                    log.append([(encode_key(connector, {"file": "a"}), encode_offset({"position": 2}))], 30.0)
                )
            )
            write.start()
            assert client.get("/readyz").status_code == 200, "not ready before the threshold"
            until(lambda: client.get("/readyz").status_code == 503, "503 once the commit is stalled")
            body = client.get("/readyz", headers=admin).json()
            assert body["error_code"] == 503 and body["ready"] is False
            assert body["unreachable"].startswith(f"a write to {log.description} has been waiting for SQLite's")
            assert "another process holds the log's write lock" in body["message"]
            probe = client.get("/readyz").json()  # no credentials, as a load balancer's probe
            assert probe["ready"] is False and probe["unreachable"] == HIDDEN
            assert probe["message"] == f"Not ready: the offsets log's storage cannot be reached now (why: {HIDDEN})"
            assert str(tmp_path) not in str(probe)
            assert parse(client.get("/metrics", headers=admin)).get("connect_offsets_ready") == 0
            offsets = client.get(f"/connectors/{connector}/offsets", headers=admin)  # reads are still answered
            assert offsets.status_code == 200
            assert offsets.json()["offsets"][0]["offset"] == {"position": 1}

            other.execute("COMMIT")  # the commit returns
            write.join(10)
            assert len(landed) == 1, "the held write did not land"
            until(lambda: client.get("/readyz").status_code == 200, "ready again once the commit returned")
            assert log.reachability() is None
            assert parse(client.get("/metrics", headers=admin)).get("connect_offsets_ready") == 1
    finally:
        other.close()
        log.close()


@pytest.mark.slow  # a daemon process, and a write that waits out its 1 s deadline
def test_a_write_held_by_another_processs_write_lock_answers_503_log_timeout(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """A write that waited out ``--write-timeout`` for SQLite's write lock wrote nothing: 503
    ``log_timeout`` with ``Retry-After``, which clients retry (it was 500 ``log_write_error``)."""
    daemon = daemon_factory("--data-dir", str(tmp_path / "data"), "--write-timeout", "1s")
    connector = f"locked-{time.monotonic_ns()}"

    def patch(position: int) -> httpx.Response:
        body = {"offsets": [{"partition": {"file": "a"}, "offset": {"position": position}}]}
        return httpx.patch(f"{daemon.url}/connectors/{connector}/offsets?create=true", json=body, timeout=30)

    assert patch(1).status_code == 200
    other = sqlite3.connect(tmp_path / "data" / "connect-offsets.sqlite3", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's write in progress
        started = time.monotonic()
        held = patch(2)
        took = time.monotonic() - started
        assert [patch(2).status_code for _ in range(3)] == [503] * 3
        other.execute("COMMIT")
    finally:
        other.close()
    failed = [line for line in daemon.log_tail(200).splitlines() if "request failed" in line]
    assert len(failed) == 1, "one ERROR line per kind of 503 in 30 s, not one per request:\n" + "\n".join(failed)
    assert held.status_code == 503, held.text
    assert held.headers["X-Connect-Offsets-Error"] == "log_timeout" and held.headers["Retry-After"] == "1"
    assert "waiting for another process's write (SQLite's write lock); nothing was written" in held.json()["message"]
    assert took < 1 + 1, took
    assert patch(3).status_code == 200
    answer = httpx.get(f"{daemon.url}/connectors/{connector}/offsets", timeout=30).json()
    assert answer["offsets"][0]["offset"] == {"position": 3}


@pytest.mark.slow  # a daemon process, a write that waits out its 1 s deadline, and readiness watched over 2.5 s
def test_after_a_write_timed_out_on_another_processs_lock_readyz_answers_503_until_the_lock_is_free(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """Once a write has timed out on SQLite's write lock, nothing is in progress, yet the next write
    would time out the same way: ``/readyz`` says 503 naming the lock (it answered 200) for as long as
    the other process holds it, and 200 again by itself, without a write, within about a second of
    its release. The probe stays cheap: ``/readyz`` answers at once while the lock is held."""
    daemon = daemon_factory("--data-dir", str(tmp_path / "data"), "--write-timeout", "1s")
    connector = f"locked-{time.monotonic_ns()}"

    def patch(position: int) -> httpx.Response:
        body = {"offsets": [{"partition": {"file": "a"}, "offset": {"position": position}}]}
        return httpx.patch(f"{daemon.url}/connectors/{connector}/offsets?create=true", json=body, timeout=30)

    assert patch(1).status_code == 200
    other = sqlite3.connect(tmp_path / "data" / "connect-offsets.sqlite3", isolation_level=None)
    with httpx.Client(base_url=daemon.url, timeout=30) as client:
        try:
            other.execute("BEGIN IMMEDIATE")  # e.g. `connect-offsets compact`, or an import, holding it
            assert client.get("/readyz").status_code == 200, "a held lock alone, before any write waited for it"
            timed_out = patch(2)
            assert timed_out.status_code == 503 and timed_out.headers["X-Connect-Offsets-Error"] == "log_timeout"

            locked_at = time.monotonic()
            took: list[float] = []
            while time.monotonic() - locked_at < 2.5:  # past two probes, which found the lock still held
                started = time.monotonic()
                answer = client.get("/readyz")
                took.append(time.monotonic() - started)
                assert answer.status_code == 503, f"ready while the lock is still held: {answer.text}"
            body = answer.json()
            assert body["ready"] is False
            assert body["unreachable"].startswith(f"embedded://{tmp_path / 'data' / 'connect-offsets.sqlite3'} is ")
            assert "is locked by another process since " in body["unreachable"]
            assert "writes time out waiting for SQLite's write lock" in body["unreachable"]
            took.sort()
            assert took[len(took) // 2] < 0.025 and took[-1] < 0.5, (
                f"/readyz must not wait for the lock: median {took[len(took) // 2]:.4f} s, max {took[-1]:.3f} s "
                f"over {len(took)} probes"
            )
            assert patch(3).status_code == 503, "the write fails the same way, as /readyz said"
        finally:
            if other.in_transaction:
                other.execute("COMMIT")
            other.close()
        released_at = time.monotonic()
        until(lambda: client.get("/readyz").status_code == 200, "ready again once the lock is free", timeout_s=5)
        assert time.monotonic() - released_at < 2.5, "the lock is tried about once a second"
    said = daemon.log_path.read_text()
    assert said.count("is locked by another process: a write timed out") == 1, "said once, not per write or probe"
    assert "SQLite's write lock is free again after" in said
    assert patch(4).status_code == 200
    reader = httpx.get(f"{daemon.url}/status", timeout=10).json()["reader"]  # kept after the outage
    assert "timed out waiting for another process's write (SQLite's write lock)" in str(reader["last_error"]), reader
    assert reader["last_error_at"] is not None


@pytest.mark.slow  # a daemon process, and writes that wait out their 1 s deadline
def test_a_503_naming_the_log_shows_where_it_lives_to_admin_only(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    """docs/operations.md: server paths and hosts are shown to ``admin`` only. A ``write:`` token's
    503 said ``embedded:///…/data/connect-offsets.sqlite3: write timed out …``, which ``/status``
    and ``/readyz`` hide from it: it now says "the offsets log", and keeps what it needs to retry
    (what happened, that nothing was written); the admin's answer still names the file."""
    writer, writer_line = mint("writer", ["write:c*"])
    admin, admin_line = mint("ops", ["admin"])
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{writer_line}\n{admin_line}\n")
    tokens.chmod(0o600)
    data = tmp_path / "data"
    daemon = daemon_factory("--data-dir", str(data), "--write-timeout", "1s", "--tokens-file", str(tokens))

    def patch(token: str, position: int) -> httpx.Response:
        body = {"offsets": [{"partition": {"file": "a"}, "offset": {"position": position}}]}
        url = f"{daemon.url}/connectors/c1/offsets?create=true"
        return httpx.patch(url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    assert patch(writer, 1).status_code == 200
    other = sqlite3.connect(data / "connect-offsets.sqlite3", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's write in progress: the writes time out
        as_writer, as_admin = patch(writer, 2), patch(admin, 2)
        other.execute("COMMIT")
    finally:
        other.close()
    for answer in (as_writer, as_admin):
        assert answer.status_code == 503 and answer.headers["X-Connect-Offsets-Error"] == "log_timeout", answer.text
    path = f"embedded://{(data / 'connect-offsets.sqlite3').resolve()}"
    assert as_writer.json()["message"] == (
        "the offsets log: the write timed out waiting for another process's write (SQLite's write lock); "
        "nothing was written"
    )
    assert str(tmp_path) not in as_writer.text
    assert as_admin.json()["message"].startswith(f"{path}: the write timed out waiting for another process's write")
    assert path in daemon.log_tail(200)  # the operator's own log line keeps it whole
