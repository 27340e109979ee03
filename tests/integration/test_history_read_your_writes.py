"""History is read-your-writes: a history query right after a PATCH answers includes it.

The view has a write the moment the log acknowledges it, but the archive only gets it when the log's
reader delivers it, which the embedded log does at its next look (appends no longer wake it). A
query therefore first waits, locally, for the reader to pass this daemon's own writes. Each round
queries straight after the PATCH, on one connection, so a query that did not wait would see the
previous position.
"""

from __future__ import annotations

import signal
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.client.history import HistoryClient
from tests.fixtures.daemon import DaemonFactory, DaemonProcess, KafkaDaemon


def rounds(url: str, name: str, n: int) -> None:
    with HistoryClient(url) as client:
        for i in range(n):
            client.alter(name, {"offsets": [{"partition": {"f": "a"}, "offset": {"pos": i}}]}, create=True)
            newest = client.history(name, limit=1)["changes"][0]
            assert newest["offset"] == {"pos": i}, f"round {i}: the history query missed the PATCH before it"


@pytest.mark.slow  # 2-7 s here (2026-11-27)
def test_on_the_embedded_log(embedded_daemon: DaemonProcess) -> None:
    rounds(embedded_daemon.url, f"ryw-{uuid.uuid4().hex[:8]}", 30)


@pytest.mark.kafka
def test_on_kafka(kafka_daemon: KafkaDaemon) -> None:
    rounds(kafka_daemon.url, f"ryw-{uuid.uuid4().hex[:8]}", 15)


@pytest.mark.slow  # two daemons, and a 5 s wait that runs out (9 s here, 2026-11-28)
def test_a_second_daemon_on_the_same_directory_reads_its_writes_or_refuses_to_roll_back(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """A second daemon on the same log and data directory reads the archive the first one writes
    (docs/history.md). Its queries wait until that archive holds its own writes: a rollback to "now"
    right after a PATCH changes nothing (it used to undo the PATCH, from an archive without it). When
    the writer cannot archive them (here: stopped), a history page warns and a rollback is refused
    with a 503 instead of undoing an acknowledged write."""
    data = str(tmp_path / "shared")
    writer = daemon_factory("--data-dir", data)
    second = daemon_factory("--data-dir", data)
    name = f"ryw-second-{uuid.uuid4().hex[:8]}"
    path = f"/connectors/{name}/offsets"
    with httpx.Client(base_url=second.url, timeout=30) as http:
        assert http.get("/history/status").json()["mode"] == "read-only"
        for i in range(5):
            assert http.patch(path, params={"create": "true"}, json=body(i)).status_code == 200
            rolled = rollback_to_now(http, path).json()
            assert rolled["changes"] == [], f"round {i}: the rollback to now undid the PATCH: {rolled}"
            page = http.get(f"{path}/history", params={"limit": "1"}).json()
            assert page["changes"][0]["offset"] == {"pos": i} and "warning" not in page, page
        assert http.get(path).json()["offsets"][0]["offset"] == {"pos": 4}

        assert writer.proc is not None
        writer.proc.send_signal(signal.SIGSTOP)  # the archive's writer cannot archive the next write
        try:
            assert http.patch(path, json=body(5)).status_code == 200
            with ThreadPoolExecutor(3) as pool:  # each waits the 5 s the writer is given
                asked = [
                    pool.submit(alone, second.url, "POST", f"{path}/rollback?to=now"),
                    pool.submit(alone, second.url, "GET", f"{path}/history?limit=1"),
                    pool.submit(alone, second.url, "GET", f"{path}?as_of=now"),
                ]
                refused, page, as_of = (future.result() for future in asked)
        finally:
            writer.proc.send_signal(signal.SIGCONT)
        assert refused.status_code == 503 and refused.headers["X-Connect-Offsets-Error"] == "history_behind"
        assert refused.headers["Retry-After"] == "1"
        assert "another daemon on this log and data directory writes the archive" in refused.json()["message"]
        assert refused.json()["message"].endswith("nothing was written"), refused.json()
        assert "another daemon on this log and data directory" in page.json()["warning"], page.text
        assert "another daemon" in as_of.headers["X-Offsets-History-Warning"], as_of.headers
        assert http.get(path).json()["offsets"][0]["offset"] == {"pos": 5}, "the refused rollback wrote nothing"
        assert rollback_to_now(http, path).json()["changes"] == [], "archived once resumed"


def rollback_to_now(http: httpx.Client, path: str) -> httpx.Response:
    return http.post(f"{path}/rollback", params={"to": "now"}, headers={"Content-Type": "application/json"})


def alone(url: str, method: str, target: str) -> httpx.Response:
    """A request on a connection of its own, so that several can wait at once."""
    with httpx.Client(base_url=url, timeout=30, headers={"Content-Type": "application/json"}) as http:
        return http.request(method, target)


def body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": {"f": "a"}, "offset": {"pos": position}}]}
