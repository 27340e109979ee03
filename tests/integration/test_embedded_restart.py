"""The embedded default survives ``kill -9``: every acknowledged write is there after restart."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import httpx
import pytest

from tests.fixtures.daemon import DaemonFactory


@pytest.mark.slow
def test_kill_9_mid_stream_keeps_every_acknowledged_write(daemon_factory: DaemonFactory, tmp_path: Any) -> None:
    data_dir = str(tmp_path / "data")
    daemon = daemon_factory("--data-dir", data_dir)
    name = f"kill9-{uuid.uuid4().hex[:8]}"
    acknowledged: dict[int, int] = {}
    stop = threading.Event()

    def writer(worker: int) -> None:
        with httpx.Client(base_url=daemon.url, timeout=10) as http:
            n = 0
            while not stop.is_set():
                n += 1
                body = {"offsets": [{"partition": {"worker": worker}, "offset": {"n": n}}]}
                try:
                    response = http.patch(f"/connectors/{name}/offsets", json=body, params={"create": "true"})
                except httpx.TransportError:
                    return
                if response.status_code == 200:
                    acknowledged[worker] = n

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while sum(acknowledged.values()) < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    daemon.kill()
    stop.set()
    for t in threads:
        t.join(10)
    assert sum(acknowledged.values()) >= 200, f"too few writes acknowledged before the kill: {acknowledged}"

    restarted = daemon_factory("--data-dir", data_dir)
    offsets = {o["partition"]["worker"]: o["offset"]["n"] for o in restarted.client().offsets(name)}
    for worker, last_ack in acknowledged.items():
        # The last write may have landed without its acknowledgement reaching us, never the reverse.
        assert offsets[worker] >= last_ack, f"worker {worker}: acknowledged {last_ack}, restored {offsets[worker]}"
        assert offsets[worker] <= last_ack + 1


@pytest.mark.slow
def test_a_damaged_embedded_log_stops_startup_with_a_clear_error(tmp_path: Any) -> None:
    import subprocess
    import sys

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "connect-offsets.sqlite3").write_bytes(b"this is not a database" * 100)
    result = subprocess.run(
        [sys.executable, "-m", "emulator.cli", "serve", "--data-dir", str(data_dir), "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "corrupt or not a SQLite database" in result.stderr
    assert "Traceback" not in result.stderr
