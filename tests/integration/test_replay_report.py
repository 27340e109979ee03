"""A replay, as an operator watches it: the start-up log and ``connect-offsets status``.

Specification: while a restart replays its log, a progress line every 5 s; the replay's last line
(``offsets log read to end: N records …; serving``) comes before ``ready, serving at``, with the
records read at that moment, and no replay line follows ``ready`` (it once came up to 5 s later,
counting writes made after readiness as replayed). ``connect-offsets status`` on a daemon still
replaying exits 1 with why on its second line: the log being read, records read and partitions at
their end (it once printed ``NOT READY`` and no reason).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.records import LogRecord
from emulator.server.settings import Settings
from emulator.server.wiring import build_runtime, make_app
from tests.fixtures.asgi import served
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.waits import until

RECORDS = 150_000  # a replay that outlasts the building of the HTTP app (a second or two here)
PORT = 48061


def fill(data_dir: Path, records: int = RECORDS) -> None:
    offsets_log = EmbeddedOffsetLog(data_dir)
    offsets_log.open()
    try:
        for start in range(0, records, 10_000):
            offsets_log.append(
                [
                    (b'["replayed",{"file":"/data/%d.txt"}]' % (i % 5_000), b'{"position":%d}' % i)
                    for i in range(start, min(start + 10_000, records))
                ]
            )
    finally:
        offsets_log.close()


@pytest.mark.slow
def test_the_replays_last_line_comes_before_ready_with_its_count_and_none_follows(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    fill(data_dir)
    daemon = daemon_factory("--data-dir", str(data_dir), "--no-history", "--compaction-interval", "never", port=PORT)
    until(lambda: "ready, serving at" in daemon.log_path.read_text(), "the ready line", timeout_s=30)
    client = daemon.client()
    for i in range(3):  # writes after readiness are not part of the replay
        body = {"offsets": [{"partition": {"file": f"/later/{i}"}, "offset": {"position": i}}]}
        client.alter("written-later", body, create=True)
    time.sleep(5.5)  # one progress interval: a late replay line would be written by now

    lines = daemon.log_path.read_text().splitlines()
    [ready] = [n for n, line in enumerate(lines) if "ready, serving at" in line]
    read_to_end = [n for n, line in enumerate(lines) if "offsets log read to end:" in line]
    assert read_to_end and read_to_end[0] < ready, "\n".join(lines)
    assert len(read_to_end) == 1
    assert re.search(
        rf"offsets log read to end: {RECORDS} records, 5000 live keys, 1 connectors; serving", lines[read_to_end[0]]
    )
    after = [line for line in lines[ready + 1 :] if "replaying " in line or "read to end" in line]
    assert after == [], "a replay line after the daemon said it was ready"


def test_status_of_a_daemon_still_replaying_says_why_on_its_second_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    fill(data_dir, records=500)
    runtime = build_runtime(Settings(data_dir=data_dir, history=False))
    release, delivered = threading.Event(), []
    apply = runtime.view.apply

    def held_after_two_partitions(batch: Sequence[LogRecord]) -> None:  # the replay stops part-way
        delivered.append(len(batch))
        if len(delivered) > 2:
            release.wait(30)
        apply(batch)

    runtime.view.apply = held_after_two_partitions  # type: ignore[method-assign]
    with served(make_app(runtime), lifespan="on") as url:
        try:
            until(lambda: len(delivered) > 2, "the replay to reach its third partition")
            status = run_cli("status", "--url", url)
            body = httpx.get(f"{url}/status").json()
        finally:
            release.set()
    assert status.returncode == 1, status.stderr
    first, why, log_line = status.stdout.splitlines()[:3]
    assert first == f"{url}: NOT READY"
    assert body["records_read"] == delivered[0] + delivered[1]
    assert why == (
        f"  why: reading the offsets log to its end: {body['records_read']} records read, "
        f"{body['partitions_at_end']}/25 partitions at their end"
    )
    assert log_line.startswith("log ")
