"""A daemon serving the history archive read-only takes it over when the process writing it dies.

Two daemons on one data directory (so one log and one ``--history-dir``): the first writes the
archive, the second serves it read-only. Killed with ``kill -9``, the writer leaves files half
written and records it never archived; the kernel drops its ``flock``. The second daemon used to
stay read-only until restarted, archiving nothing; now it notices the free lock (tried once a
second), recovers the archive as a start does, reads back from the log what it did not archive while
read-only, and archives its own later writes with its own principal.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.waits import until


def body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": {"f": "a"}, "offset": {"pos": position}}]}


@pytest.mark.slow  # two daemons, a kill -9 and a takeover (about 5 s here, 2026-11-28)
def test_a_read_only_daemon_takes_the_archive_over_when_its_writer_is_killed(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data = str(tmp_path / "shared")
    writer = daemon_factory("--data-dir", data)
    second = daemon_factory("--data-dir", data)
    name = f"takeover-{uuid.uuid4().hex[:8]}"
    path = f"/connectors/{name}/offsets"
    with httpx.Client(base_url=writer.url, timeout=30) as first, httpx.Client(base_url=second.url, timeout=30) as http:
        assert http.get("/history/status").json()["mode"] == "read-only"
        assert http.get("/status").json()["compaction"]["left_to_another_process"] is not None
        assert http.patch(path, params={"create": "true"}, json=body(0)).status_code == 200
        assert first.patch(path, params={"create": "true"}, json=body(1)).status_code == 200

        archived = first.get(f"{path}/history", params={"limit": "100"}).json()["changes"]
        assert len(archived) == 2, "the writer archived both: the takeover reads back from its watermark on"
        writer.kill()  # kill -9: its open file is left half written, its lock dropped by the kernel
        assert http.patch(path, json=body(2)).status_code == 200  # made while nobody archives the log

        until(lambda: http.get("/history/status").json()["mode"] == "writing", "the archive taken over", 10)
        status = http.get("/history/status").json()
        assert status["writer_gone"] is False and status["failure"] is None, status
        overall = http.get("/status").json()
        assert overall["history"]["mode"] == "writing"
        assert overall["compaction"]["left_to_another_process"] is None, "it compacts the log, as the writer did"
        assert http.patch(path, json=body(3)).status_code == 200

        page = http.get(f"{path}/history", params={"limit": "100"}).json()
        assert "warning" not in page, page
        changes = sorted(page["changes"], key=lambda change: change["offset"]["pos"])
        assert [change["offset"]["pos"] for change in changes] == [0, 1, 2, 3], "each write archived exactly once"
        last = changes[-1]
        assert (last["origin"], last["operation"], last["principal"]) == ("daemon", "PATCH", "anonymous"), last
        assert rollback_to_now(http, path).json()["changes"] == [], "the archive holds every write: nothing to undo"
    said = second.log_path.read_text()
    assert "this daemon took the archive over" in said, second.log_tail(60)


def rollback_to_now(http: httpx.Client, path: str) -> httpx.Response:
    return http.post(f"{path}/rollback", params={"to": "now"}, headers={"Content-Type": "application/json"})
