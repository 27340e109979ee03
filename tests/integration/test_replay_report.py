"""The start-up log tells a replay's progress and ends it where the daemon becomes ready.

Specification: while a restart replays its log, a progress line every 5 s; the replay's last line
(``offsets log read to end: N records …; serving``) comes before ``ready, serving at``, with the
records read at that moment, and no replay line follows ``ready`` (it once came up to 5 s later,
counting writes made after readiness as replayed).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.waits import until

RECORDS = 150_000  # a replay that outlasts the building of the HTTP app (a second or two here)
PORT = 48061


def fill(data_dir: Path) -> None:
    offsets_log = EmbeddedOffsetLog(data_dir)
    offsets_log.open()
    try:
        for start in range(0, RECORDS, 10_000):
            offsets_log.append(
                [
                    (b'["replayed",{"file":"/data/%d.txt"}]' % (i % 5_000), b'{"position":%d}' % i)
                    for i in range(start, start + 10_000)
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
