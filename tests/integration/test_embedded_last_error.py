"""A stalled commit and writes the disk refused stay on the embedded log's record after they end.

``/readyz`` names either while it lasts; once it is over, ``/status`` ``reader.last_error`` (and
``reader.last_error_at``, ``connect_offsets_reader_last_error_timestamp_seconds``) is where an operator
learns what happened and when, as the Kafka backend keeps its broker watch's failed probes there. The
embedded log kept only its reader's errors: after a disk that was full, or a commit that hung, both
stayed ``null`` and the metric absent.

The refusal is the kernel's, on a daemon process (its file-size limit lowered with ``prlimit``, as in
``test_embedded_disk_refusal.py``); the stall is another connection's ``BEGIN IMMEDIATE`` under an
in-process app over a real SQLite log, whose threshold is lowered from 5 s so the test takes a second
(``test_embedded_stall.py``).
"""

from __future__ import annotations

import resource
import sqlite3
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.model.records import Position
from emulator.server.wiring import assemble_runtime, make_app, start_reading
from emulator.view.offset_view import OffsetView
from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.waits import until
from tests.integration.scrape import parse

METRIC = "connect_offsets_reader_last_error_timestamp_seconds"
BIG = "y" * 20_000
"""A value large enough that a few of them outgrow the write-ahead log's headroom."""


def body(partition: str, offset: object) -> dict[str, object]:
    return {"offsets": [{"partition": {"file": partition}, "offset": {"position": offset}}]}


def at(reader: dict[str, Any]) -> float:
    """``reader.last_error_at`` as a ``time.time()``."""
    return datetime.fromisoformat(reader["last_error_at"].replace("Z", "+00:00")).timestamp()


@pytest.mark.slow
def test_writes_the_disk_refused_stay_the_logs_last_error_after_it_takes_writes_again(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    daemon = daemon_factory("--data-dir", str(data), "--no-history")
    assert daemon.proc is not None
    connector = f"refused-last-error-{time.monotonic_ns()}"
    url = f"/connectors/{connector}/offsets"
    with httpx.Client(base_url=daemon.url, timeout=30) as http:
        assert http.patch(f"{url}?create=true", json=body("a", 1)).status_code == 200
        assert http.get("/status").json()["reader"]["last_error"] is None
        assert parse(http.get("/metrics")).get(METRIC) is None

        files = [data / "connect-offsets.sqlite3", data / "connect-offsets.sqlite3-wal"]
        headroom = max(f.stat().st_size for f in files) + 100_000
        before = time.time()
        resource.prlimit(daemon.proc.pid, resource.RLIMIT_FSIZE, (headroom, resource.RLIM_INFINITY))
        try:
            refused = None
            for i in range(12):
                answer = http.patch(url, json=body(f"big-{i}", BIG))
                if answer.status_code != 200:
                    refused = answer
                    break
            assert refused is not None, "the write-ahead log grew past the limit without a refusal"
            assert refused.headers["X-Connect-Offsets-Error"] == "log_storage_refused", refused.text
            reader = http.get("/status").json()["reader"]
            assert reader["last_error"].startswith("the storage refuses writes: the disk reported an I/O error")
            assert before - 1 <= at(reader) <= time.time() + 1
        finally:
            resource.prlimit(daemon.proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        until(lambda: http.get("/readyz").status_code == 200, "ready once the storage takes writes", timeout_s=10)

        # Over, and still on record: what happened, and when (the fault's last refusal).
        reader = http.get("/status").json()["reader"]
        assert reader["last_error"].startswith("the storage refuses writes: the disk reported an I/O error")
        stamp = parse(http.get("/metrics")).get(METRIC)
        assert stamp is not None and before - 1 <= stamp <= time.time()
        assert abs(stamp - at(reader)) < 0.01
        assert http.patch(url, json=body("after", 2)).status_code == 200


def test_a_stalled_commit_stays_the_logs_last_error_after_it_returned(tmp_path: Path) -> None:
    connector = f"stall-last-error-{time.monotonic_ns()}"
    log = EmbeddedOffsetLog(tmp_path, partitions=2, synchronous="NORMAL", stalled_commit_s=0.3)
    log.open()
    runtime = assemble_runtime(log, OffsetView(), NoConnectCluster())
    start_reading(runtime)
    other = sqlite3.connect(log.path, isolation_level=None, check_same_thread=False)
    landed: list[list[Position]] = []
    try:
        with TestClient(make_app(runtime, reading_started=True), base_url="http://localhost") as client:
            until(lambda: client.get("/readyz").status_code == 200, "ready after the replay")
            assert client.get("/status").json()["reader"]["last_error"] is None

            before = time.time()
            other.execute("BEGIN IMMEDIATE")  # the write lock, held as by a commit that does not return
            write = threading.Thread(
                target=lambda: landed.append(
                    log.append([(encode_key(connector, {"file": "a"}), encode_offset({"position": 2}))], 30.0)
                )
            )
            write.start()
            until(lambda: client.get("/readyz").status_code == 503, "503 once the commit is stalled")
            reader = client.get("/status").json()["reader"]
            assert reader["last_error"].startswith(f"a write to {log.description} has been waiting for SQLite's")
            seen = at(reader)

            other.execute("COMMIT")  # the commit returns
            write.join(10)
            assert len(landed) == 1, "the held write did not land"
            until(lambda: client.get("/readyz").status_code == 200, "ready again once the commit returned")

            # Over, and still on record: how long it waited, that it was written, and when it ended.
            reader = client.get("/status").json()["reader"]
            message = reader["last_error"]
            assert message.startswith(f"a write to {log.description} waited "), message
            assert message.endswith(
                "s for SQLite's write lock, commit and fsync (the disk did not answer, or another process held the "
                "log's write lock); then it wrote 1 record"
            ), message
            assert float(message.split(" waited ")[1].split(" s ")[0]) >= 0.3
            assert before <= seen <= at(reader) <= time.time() + 0.01
            stamp = parse(client.get("/metrics")).get(METRIC)
            assert stamp is not None and abs(stamp - at(reader)) < 0.01
    finally:
        other.close()
        log.close()
