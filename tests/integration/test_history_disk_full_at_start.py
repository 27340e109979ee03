"""A daemon whose history disk is full when it starts serves offsets all the same.

Before, the archive's crash recovery failed to save its state on the full disk and the daemon
refused to start ("cannot be recovered: No space left on device"), although a disk that fills while
it runs only stalls the archive. Now it starts, says why the archive waits, lets what the reader
delivers go as offset ranges, opens the archive once the disk takes writes and reads those ranges
back from the log: what it had archived before is skipped, what came meanwhile is archived once.

The full disk is real: a 1 MiB tmpfs filled to its last byte, which needs root (mount); elsewhere
the test skips and says so.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.disk_faults import fill, small_disk
from tests.integration.scrape import parse


@pytest.fixture
def history_disk(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path / "history-disk") as disk:
        yield disk


def history_status(url: str) -> dict[str, Any]:
    status: dict[str, Any] = httpx.get(f"{url}/history/status", timeout=10).json()
    return status


def patch(url: str, connector: str, n: int, create: bool = False) -> None:
    body = {"offsets": [{"partition": {"file": f"f{n}"}, "offset": {"position": n}}]}
    params = {"create": "true"} if create else {}
    answer = httpx.patch(f"{url}/connectors/{connector}/offsets", params=params, json=body)
    assert answer.status_code == 200, answer.text


@pytest.mark.slow  # two daemon starts and the archive's retry interval
def test_a_full_history_disk_at_start_defers_the_archive_and_loses_nothing(
    daemon_factory: DaemonFactory, history_disk: Path, tmp_path: Path
) -> None:
    connector = f"full-start-{time.monotonic_ns()}"
    args = ["--data-dir", str(tmp_path / "data"), "--history-dir", str(history_disk / "history")]
    first = daemon_factory(*args)
    patch(first.url, connector, 0, create=True)
    patch(first.url, connector, 1)
    first.stop()
    filler = fill(history_disk)

    daemon = daemon_factory(*args)  # ready although the archive cannot be recovered
    assert "No space left on device; offsets are served as usual" in daemon.log_tail(60)
    status = history_status(daemon.url)
    assert status["mode"] == "stalled" and "could not be opened" in status["failure"], status
    patch(daemon.url, connector, 2)
    page = httpx.get(f"{daemon.url}/connectors/{connector}/offsets/history", timeout=10).json()
    assert "the archiver cannot write" in page["warning"], page
    console = httpx.get(f"{daemon.url}/ui/api/connectors", timeout=10).json()["history"]
    assert "the archiver cannot write for" in console["behind"], "the console says so above every page"
    metrics = parse(httpx.get(f"{daemon.url}/metrics", timeout=10))
    assert metrics.get("connect_offsets_history_mode", mode="stalled") == 1
    assert (metrics.get("connect_offsets_history_offsets_to_read_back") or 0) >= 3, "the replay's 2 and the new one"

    filler.unlink()  # the disk takes writes again
    deadline = time.monotonic() + 30
    while (status := history_status(daemon.url))["mode"] != "writing" or status["offsets_to_read_back"]:
        assert time.monotonic() < deadline, f"the archive never opened: {status}"
        time.sleep(0.1)
    assert status["records_skipped_replay"] == 2 and status["records_not_archived"] == 0, status
    assert httpx.get(f"{daemon.url}/ui/api/connectors", timeout=10).json()["history"]["behind"] is None
    metrics = parse(httpx.get(f"{daemon.url}/metrics", timeout=10))
    assert metrics.get("connect_offsets_history_offsets_to_read_back") == 0
    assert metrics.get("connect_offsets_history_records_read_back_total") == 3
    assert metrics.get("connect_offsets_history_records_let_go_total") == 3
    changes = httpx.get(f"{daemon.url}/connectors/{connector}/offsets/history", timeout=10).json()["changes"]
    assert sorted(c["offset"]["position"] for c in changes) == [0, 1, 2], "each change once"
    assert {c["origin"] for c in changes} == {"daemon"}


@pytest.mark.slow
def test_a_daemon_stopped_before_its_archive_could_open_stops_at_once(
    daemon_factory: DaemonFactory, history_disk: Path, tmp_path: Path
) -> None:
    """The replay's records wait as offset ranges, most of them archived by an earlier run: they are
    not counted as "not archived", and the next start archives from the log what the archive lacks."""
    args = ["--data-dir", str(tmp_path / "data"), "--history-dir", str(history_disk / "history")]
    first = daemon_factory(*args)
    patch(first.url, f"stopped-{time.monotonic_ns()}", 0, create=True)
    first.stop()
    fill(history_disk)
    daemon = daemon_factory(*args)
    started = time.monotonic()
    daemon.stop()
    assert time.monotonic() - started < 5.0
    tail = daemon.log_tail(30)
    assert "stopped before the archive could be opened; the next start archives from the log" in tail
    assert "records not archived so far" not in tail, "archived records of the replay are not counted as lost"
