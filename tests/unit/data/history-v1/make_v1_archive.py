"""How ``history-v1/`` was made: a history archive written by the daemon's code *before* the audit
fields (``principal``, ``remote``) were added to ``schemas/history-record.avsc``.

Run with an old checkout first on the path (the files here came from commit db933d0)::

    PYTHONPATH=<old checkout> .venv/bin/python tests/unit/data/history-v1/make_v1_archive.py /tmp/v1

then copy ``/tmp/v1/history/<slug>/`` (its ``.avro`` file, ``log.json`` and ``state.json``) here.
The archive holds three records of partition 1 of a 3-partition embedded log: two written by the
daemon (``PATCH`` of connector ``c``) and one external; ``RECORDS`` in the test lists them.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from emulator.history.archive import HistoryArchive
from emulator.history.origins import OriginRegistry, write_origin
from emulator.history.tracked_log import TrackedLog
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.view.offset_view import OffsetView

IDENTITY = "embedded:///v1/v1-offsets.sqlite3"


def main(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    log = EmbeddedOffsetLog(root / "data", partitions=3, synchronous="NORMAL", name="v1-offsets")
    log.open()
    view = OffsetView()
    origins = OriginRegistry()
    archive = HistoryArchive(root / "history", IDENTITY, origins=origins, progress=log.progress, tick_s=0.05)
    archive.open()
    view.add_listener(archive.listener)
    log.start_reading(view.apply)
    deadline = time.monotonic() + 10
    while not log.progress().caught_up:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with write_origin("PATCH", "c"):
        TrackedLog(log, origins).append(
            [(b'["c",{"file":"f1"}]', b'{"pos":10}'), (b'["c",{"file":"f2"}]', b'{"pos":20}')]
        )
    log.append([(b'["c",{"file":"f1"}]', b'{"pos":11}')])
    while log.progress().records_read < 3:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert archive.sync(10)
    log.close()
    archive.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
