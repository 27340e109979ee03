"""Spark's committer sends (query id, batch id) as a commit sequence: a republished batch is dropped
by the daemon itself, so no process (a restarted run, a late listener event) can move an offset back."""

from __future__ import annotations

import uuid

from emulator.client.http import OffsetsClient
from emulator.spark.committer import DaemonOffsets
from tests.fixtures.daemon import DaemonProcess

PARTITION = {"filename": "/data/in.txt"}


def test_a_republished_batch_is_dropped_by_the_daemon(embedded_daemon: DaemonProcess) -> None:
    name = f"seq-{uuid.uuid4().hex[:8]}"
    query = f"spark-query:{uuid.uuid4()}"
    with DaemonOffsets(embedded_daemon.url) as daemon:
        first = daemon.commit(name, [(PARTITION, {"position": 100})], sequence=(query, 7))
        assert [c["offset"] for c in first.written] == [{"position": 100}]
        # The same batch again, with an offset the client-side check would let through (it moves
        # forward), as a second process republishing batch 7 would: only the daemon can tell.
        replay = daemon.commit(name, [(PARTITION, {"position": 150})], sequence=(query, 7))
        assert replay.written == []
        assert replay.skipped[0]["reason"] == f"stale sequence 7 from source {query!r}: 7 was already applied"
        later = daemon.commit(name, [(PARTITION, {"position": 150})], sequence=(query, 8))
        assert [c["offset"] for c in later.written] == [{"position": 150}]
    with OffsetsClient(embedded_daemon.url) as client:
        assert client.offsets(name) == [{"partition": PARTITION, "offset": {"position": 150}}]
