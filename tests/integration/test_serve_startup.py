"""``serve`` replays the log while the HTTP stack is still being imported and built.

The replay is started by ``wiring.serve`` right after the log and the history archive are open, and
FastAPI is imported only afterwards (``make_app``), so a restore's wait for the broker overlaps that
second of startup (issue 12; benchmarks/RESULTS.md, "Round 5"). These pin both halves: the module
``serve`` lives in does not pull FastAPI in, and an app told that reading already started serves
what was replayed without starting the reader a second time (which the log refuses).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from fastapi.testclient import TestClient

from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.server.wiring import assemble_runtime, make_app, start_reading
from emulator.view.offset_view import OffsetView

ROOT = Path(__file__).resolve().parents[2]


def test_the_serve_wiring_imports_without_fastapi() -> None:
    probe = "import sys, emulator.server.wiring; print('fastapi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


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
