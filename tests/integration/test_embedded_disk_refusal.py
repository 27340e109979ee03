"""When the embedded log's storage refuses writes, the daemon says so and comes back by itself.

A full disk, an I/O error or a read-only file fails a write at once, and every later one alike until
an operator acts. So such a write answers 503 ``log_storage_refused`` with ``Retry-After`` (nothing
was written: a retry is safe, and the Python clients retry it), ``/readyz`` answers 503 with the
reason while reads go on, and once the storage takes a write of the refused size again the daemon is
ready without anyone writing through it (a load balancer that stopped sending requests would
otherwise never bring it back).

The refusal is the kernel's: the daemon's file-size limit (``RLIMIT_FSIZE``, set on the running
process with ``prlimit``) is lowered to just above its write-ahead log, so SQLite's next growth
fails as on a disk with no space left (``EFBIG``, which SQLite reports as an I/O error; a real full
disk gives ``ENOSPC``, "database or disk is full", and takes the same path, as docs/operations.md
records from a tmpfs filled to the last byte). Raising the limit again is freeing the disk.
"""

from __future__ import annotations

import base64
import resource
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from emulator.client.http import OffsetsClient
from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.logs.embedded.storage_faults import StorageFaults, storage_fault
from emulator.model.connectors import NoConnectCluster
from emulator.server.wiring import assemble_runtime, make_app, start_reading
from emulator.view.offset_view import OffsetView
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.fixtures.disk_faults import fill, small_disk
from tests.fixtures.processes import free_port
from tests.fixtures.waits import until

BIG = "y" * 20_000
"""A value large enough that a few of them outgrow the write-ahead log's headroom."""


def body(partition: str, offset: object) -> dict[str, object]:
    return {"offsets": [{"partition": {"file": partition}, "offset": {"position": offset}}]}


@pytest.mark.slow  # a daemon process, and the client's Retry-After (5 s) waited on purpose
def test_refused_writes_answer_503_readyz_says_why_and_readiness_returns_by_itself(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    daemon = daemon_factory("--data-dir", str(data), "--no-history")
    assert daemon.proc is not None
    connector = f"refused-{time.monotonic_ns()}"
    http = httpx.Client(base_url=daemon.url, timeout=30)
    url = f"/connectors/{connector}/offsets"
    assert http.patch(f"{url}?create=true", json=body("a", 1)).status_code == 200

    files = [data / "connect-offsets.sqlite3", data / "connect-offsets.sqlite3-wal"]
    headroom = max(f.stat().st_size for f in files) + 100_000
    resource.prlimit(daemon.proc.pid, resource.RLIMIT_FSIZE, (headroom, resource.RLIM_INFINITY))
    try:
        answers = [http.patch(url, json=body(f"big-{i}", BIG)) for i in range(12)]
        refused = [a for a in answers if a.status_code != 200]
        assert refused, "the write-ahead log grew past the limit without a refusal"
        first = refused[0]
        assert first.status_code == 503, first.text
        assert first.headers["X-Connect-Offsets-Error"] == "log_storage_refused"
        assert first.headers["Retry-After"] == "5"
        assert first.json()["message"].endswith("nothing was written")
        assert "refused the write: the disk reported an I/O error" in first.json()["message"]
        assert f"file-size limit (ulimit -f, {headroom} bytes) may be the cause" in first.json()["message"]

        ready = http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["unreachable"].startswith("writes to embedded://")
        assert "have been refused for" in ready.json()["unreachable"]
        status = run_cli("status", "--url", daemon.url)
        assert status.returncode == 1, "`connect-offsets status` exits 1 while the daemon is not ready"
        first, why = status.stdout.splitlines()[:2]
        assert first == f"{daemon.url}: NOT READY"
        assert why.startswith("  why: writes to embedded://") and "have been refused for" in why
        offsets = http.get(url)  # reads go on
        assert offsets.status_code == 200
        assert {"file": "a"} in [row["partition"] for row in offsets.json()["offsets"]]

        with OffsetsClient(daemon.url, retry_for_s=30) as client:
            retried: list[object] = []
            writer = threading.Thread(target=lambda: retried.append(client.alter(connector, body("late", BIG))))
            writer.start()  # refused, then sent again after Retry-After (5 s) by the client
            time.sleep(2.5)  # the first probe has tried a write of the refused size, and failed
            assert http.get("/readyz").status_code == 503, "ready while a write of the refused size still fails"
            resource.prlimit(daemon.proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            took = until(lambda: http.get("/readyz").status_code == 200, "ready once the storage takes writes", 10)
            writer.join(30)
        assert took < 2.0 + 1.0, "the probe runs every 2 s"
        assert retried, "the client's retry of the refused write did not succeed"
    finally:
        resource.prlimit(daemon.proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    partitions = [row["partition"]["file"] for row in http.get(url).json()["offsets"]]
    assert "late" in partitions
    assert http.patch(url, json=body("after", BIG)).status_code == 200
    log = daemon.log_tail(400)
    assert log.count("refuses writes: the disk reported an I/O error") == 1, "one ERROR line per fault"
    assert "takes writes again after" in log


def test_only_the_storage_refusing_writes_is_a_storage_fault(tmp_path: Path) -> None:
    """SQLite's own errors, made for real: a full database and a read-only file are faults that
    pass; a constraint violation and a damaged file are not the storage's doing."""
    path = tmp_path / "x.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(sqlite3.Error) as full:
        conn.execute("INSERT INTO t VALUES (1, zeroblob(100000))")
    assert storage_fault(full.value) == "the disk is full (SQLite: database or disk is full)"
    with pytest.raises(sqlite3.Error) as duplicate:
        conn.execute("INSERT INTO t VALUES (2, x'00')")
        conn.execute("INSERT INTO t VALUES (2, x'00')")
    assert storage_fault(duplicate.value) is None
    conn.close()

    readonly = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    with pytest.raises(sqlite3.Error) as refused:
        readonly.execute("INSERT INTO t VALUES (3, x'00')")
    readonly.close()
    assert (storage_fault(refused.value) or "").startswith("the log's file cannot be written")

    damaged = tmp_path / "damaged.sqlite3"
    damaged.write_bytes(b"not a database" * 100)
    with pytest.raises(sqlite3.Error) as corrupt:
        sqlite3.connect(damaged).execute("SELECT * FROM sqlite_schema").fetchall()
    assert storage_fault(corrupt.value) is None


FILE_SIZE_LIMITED_WRITE = """
import resource, sqlite3, sys
from pathlib import Path
from emulator.logs.embedded.storage_faults import storage_fault
path = Path(sys.argv[1])
conn = sqlite3.connect(path, isolation_level=None)
conn.execute("PRAGMA journal_mode = WAL")
conn.execute("CREATE TABLE t (v BLOB)")
limit = max(f.stat().st_size for f in path.parent.iterdir()) + 50_000
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
try:
    for _ in range(20):
        conn.execute("INSERT INTO t VALUES (zeroblob(20000))")
except sqlite3.Error as e:
    print(limit)
    print(storage_fault(e, path))
"""


def test_a_write_past_the_file_size_limit_names_the_limit(tmp_path: Path) -> None:
    """``ulimit -f`` reached: the kernel answers ``EFBIG``, which SQLite reports as a mere "disk I/O
    error", and an operator looked for a failing disk. With a finite ``RLIMIT_FSIZE``, an I/O error on
    write says the limit may be the cause and how large it is. (A process of its own: the limit is
    the process's.)"""
    path = tmp_path / "x.sqlite3"
    run = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMITED_WRITE, str(path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    limit, reason = run.stdout.splitlines()
    assert reason.startswith(
        f"the disk reported an I/O error on write; this process's file-size limit (ulimit -f, {limit} bytes) "
        "may be the cause"
    )
    assert reason.endswith("(SQLite: disk I/O error)")


@pytest.mark.slow  # 50,000 records imported, and up to one probe interval (2 s) waited
def test_a_large_import_refused_midway_says_how_much_was_written_and_sending_it_again_writes_the_rest(
    tmp_path: Path,
) -> None:
    """Writes of more than 10,000 records go to the log in chunks of 10,000, each durable on its own.
    When the disk refuses the second, the first is written and in effect, so the answer may not say
    "nothing was written" (it did): it says how many were, and the same import sent again, which
    writes only what differs, writes the rest.

    The refusal is SQLite's own "database or disk is full", made with ``max_page_count`` on the
    log's writing connection (a per-connection limit: there is no other way in for a test), set to
    about one and a half chunks' worth of pages measured on a second log with the same records."""
    connector = f"bulk-{time.monotonic_ns()}"
    records = [
        {"key": b64(encode_key(connector, {"file": f"f{i:05d}"})), "value": b64(encode_offset({"position": i}))}
        for i in range(25_000)
    ]
    chunk_pages = pages_for(
        tmp_path / "calibration",
        [(encode_key(connector, {"file": f"f{i:05d}"}), encode_offset({"position": i})) for i in range(10_000)],
    )

    log = EmbeddedOffsetLog(tmp_path / "data", partitions=2, synchronous="NORMAL")
    log.open()
    runtime = assemble_runtime(log, OffsetView(), NoConnectCluster())
    start_reading(runtime)
    try:
        with TestClient(make_app(runtime, reading_started=True), base_url="http://localhost") as client:
            until(lambda: client.get("/readyz").status_code == 200, "ready after the replay", 10)
            limit_pages(log, page_count(log) + chunk_pages * 3 // 2)

            refused = client.post("/offsets/records", json={"records": records})
            assert refused.status_code == 503, refused.text
            # Not log_storage_refused, which says nothing was written: the disk's status and pause, though.
            assert refused.headers["X-Connect-Offsets-Error"] == "write_partly_applied"
            assert refused.headers["Retry-After"] == "5"
            message = refused.json()["message"]
            assert "refused the write: the disk is full (SQLite: database or disk is full)" in message
            assert "nothing was written" not in message
            assert message.endswith(
                "the first 10,000 of this write's 25,000 records were written before it and are in effect, "
                "the other 15,000 were not (sending the same request again writes the rest)"
            )
            assert len(client.get(f"/connectors/{connector}/offsets").json()["offsets"]) == 10_000

            limit_pages(log, 1 << 30)  # space freed
            until(lambda: client.get("/readyz").status_code == 200, "ready once the probe writes", 10)
            again = client.post("/offsets/records", json={"records": records})
            assert again.status_code == 200, again.text
            assert again.json()["written"] == 15_000
            assert len(client.get(f"/connectors/{connector}/offsets").json()["offsets"]) == 25_000
    finally:
        log.close()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def page_count(log: EmbeddedOffsetLog) -> int:
    with sqlite3.connect(log.path) as conn:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])


def pages_for(directory: Path, entries: list[tuple[bytes, bytes]]) -> int:
    """How many pages an append of ``entries`` adds to a fresh log."""
    log = EmbeddedOffsetLog(directory, partitions=2, synchronous="NORMAL")
    log.open()
    try:
        before = page_count(log)
        log.append(entries, 60)
        return page_count(log) - before
    finally:
        log.close()


def limit_pages(log: EmbeddedOffsetLog, pages: int) -> None:
    with log._writing.held() as writer:  # the writing connection's own limit, set between its transactions
        writer.execute(f"PRAGMA max_page_count = {pages}")


def test_a_probe_that_fails_for_another_reason_is_logged_and_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The probe meets another process holding the write lock (SQLITE_BUSY, not the storage): it
    says so, keeps the refusal's reason, and the next probe that writes ends the fault."""
    path = tmp_path / "probe.sqlite3"
    # The holder's COMMIT may meet the probe's shared lock of a failing BEGIN IMMEDIATE (taken, then
    # dropped): it waits for it, as a real writer's busy handler does; the probe itself never waits.
    holder = sqlite3.connect(path, timeout=5)
    prober = sqlite3.connect(path, timeout=0, check_same_thread=False)  # used by the probe thread
    holder.execute("CREATE TABLE t (x)")
    holder.commit()
    holder.execute("BEGIN IMMEDIATE")  # another process's write, in progress
    attempts: list[str] = []

    def probe(size: int) -> None:
        try:  # what the attempt met, told by its outcome (the holder's state may change meanwhile)
            prober.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            attempts.append("busy")
            raise
        prober.execute("INSERT INTO t VALUES (zeroblob(?))", (size,))
        prober.execute("COMMIT")
        attempts.append("written")

    faults = StorageFaults("embedded://probe", probe, interval_s=0.05)
    try:
        with caplog.at_level("WARNING", logger="emulator.logs.embedded.storage_faults"):
            faults.failed("the disk is full (SQLite: database or disk is full)", 4096)
            until = time.monotonic() + 5
            while "busy" not in attempts:
                assert time.monotonic() < until, "the probe never ran"
                time.sleep(0.01)
            assert faults.reason() is not None and "the disk is full" in str(faults.reason())
            holder.execute("COMMIT")  # the other writer is done
            while faults.reason() is not None:
                assert time.monotonic() < until, f"the fault never ended: {attempts}"
                time.sleep(0.01)
        assert attempts[-1] == "written"
        assert any("the write probe failed: database is locked" in r.getMessage() for r in caplog.records)
    finally:
        faults.close()
        holder.close()
        prober.close()


@pytest.mark.slow  # three daemon starts, one of them waiting for the disk
def test_a_full_disk_at_start_is_waited_for_as_a_cluster_that_does_not_answer(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """Opening the log writes (its write-ahead log), so a full disk refused the start, as "disk I/O
    error". Now ``serve`` waits for space with a line every 5 s, as it waits for a Kafka cluster, and
    ``--startup-timeout`` ends the wait with one error line; a disk that is not full still fails at
    once. The disk is a real 1 MiB tmpfs filled to its last byte (root; skips with the reason
    otherwise)."""
    with small_disk(tmp_path / "disk") as disk:
        data = disk / "data"
        first = daemon_factory("--data-dir", str(data), "--no-history")
        assert httpx.patch(f"{first.url}/connectors/kept/offsets?create=true", json=body("a", 7)).status_code == 200
        first.stop()
        filler = fill(disk)

        timed_out = subprocess.run(
            [
                sys.executable,
                "-m",
                "emulator.cli",
                "serve",
                "--data-dir",
                str(data),
                "--no-history",
                "--port",
                "0",
                "--startup-timeout",
                "1s",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert timed_out.returncode == 2
        assert timed_out.stderr.splitlines()[-1] == (
            f"error: embedded offsets log {data / 'connect-offsets.sqlite3'} cannot be opened within 1 s "
            "(--startup-timeout): the file system holding it has no space left"
        )

        waiting = DaemonProcess(["--data-dir", str(data), "--no-history"], free_port(), tmp_path / "waiting.log")
        starter = threading.Thread(target=waiting.start, kwargs={"timeout_s": 60.0})  # returns once ready
        starter.start()
        try:
            until(
                lambda: waiting.log_path.exists() and "has no space left; still trying" in waiting.log_tail(5),
                "the wait said",
                20,
            )
            # Meanwhile the port answers: alive, and not ready with the reason (emulator.server.starting).
            until(lambda: _answers(f"{waiting.url}/healthz") == 200, "/healthz answered while the log waits", 10)
            waiting_ready = httpx.get(f"{waiting.url}/readyz", timeout=5)
            assert waiting_ready.status_code == 503 and waiting_ready.json()["starting"] is True
            assert "the file system holding it has no space left" in waiting_ready.json()["unreachable"]
            filler.unlink()
            starter.join(60)
            offsets = httpx.get(f"{waiting.url}/connectors/kept/offsets", timeout=10).json()["offsets"]
            assert offsets == [{"partition": {"file": "a"}, "offset": {"position": 7}}]
            assert "once its disk had space" in waiting.log_tail(40)
        finally:
            starter.join(60)
            waiting.stop()


def _answers(url: str) -> int | None:
    """The status ``url`` answers with, or None while nothing listens."""
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.TransportError:
        return None
