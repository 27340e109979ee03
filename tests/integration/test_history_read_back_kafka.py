"""The history archive on a Kafka topic reads back from the broker what it let go while its disk
refused writes: the records the reader delivered meanwhile are archived once, with their origins,
and the view's reader never waited for the archive's disk."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.history.archive import HistoryArchive
from emulator.history.origins import OriginRegistry, write_origin
from emulator.history.query import HistoryReader
from emulator.history.tracked_log import TrackedLog
from emulator.logs.kafka.offsets_log import KafkaOffsetLog
from emulator.model.records import Position
from emulator.view.offset_view import OffsetView
from tests.fixtures.broker import TANSU_TAIL_FETCH_WAIT_MS, TansuBroker
from tests.fixtures.disk_faults import block_archive_files

pytestmark = pytest.mark.kafka


@pytest.fixture
def kafka_stack(kafka_broker: TansuBroker, tmp_path: Path) -> Iterator[tuple[KafkaOffsetLog, HistoryArchive]]:
    """log → view → archive (a queue of 2 records) as the daemon wires them, on the session's broker."""
    log = KafkaOffsetLog(
        kafka_broker.bootstrap,
        kafka_broker.unique_topic("read-back"),
        partitions=3,
        tail_fetch_wait_ms=TANSU_TAIL_FETCH_WAIT_MS,
    )
    log.open()
    view = OffsetView()
    archive = HistoryArchive(
        tmp_path / "history",
        log.description,
        origins=OriginRegistry(),
        progress=log.progress,
        read_own_writes=log.read_own_writes,
        reread=log.reread,
        queue_records=2,
        retry_max_s=0.2,
        rotate_bytes=1,
        tick_s=0.05,
    )
    archive.open()
    view.add_listener(archive.listener)
    log.start_reading(view.apply)
    try:
        yield log, archive
    finally:
        log.close()
        archive.close()


def wait_applied(log: KafkaOffsetLog, positions: list[Position], timeout_s: float = 10.0) -> None:
    """Until the reader handed ``positions`` to the view (and so to the archive's listener)."""
    deadline = time.monotonic() + timeout_s
    while not all(log.progress().positions.get(p.partition, 0) > p.offset for p in positions):
        assert time.monotonic() < deadline, f"the view did not get {positions} within {timeout_s} s"
        time.sleep(0.005)


def wait_status(archive: HistoryArchive, done: Any, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while not done(status := archive.status()):
        assert time.monotonic() < deadline, f"the archiver never got there: {status}"
        time.sleep(0.02)
    return status


@pytest.mark.slow  # waits out the file writer's three quick attempts (1.5 s)
def test_records_let_go_during_a_stall_are_read_back_from_the_broker(
    kafka_stack: tuple[KafkaOffsetLog, HistoryArchive],
) -> None:
    log, archive = kafka_stack
    assert log.wait_caught_up(10)
    tracked = TrackedLog(log, archive.origins)
    blocked = block_archive_files(archive.directory)
    wait_applied(log, log.append([(b'["c",{"f":0}]', b'{"p":0}')]))
    wait_status(archive, lambda s: s["mode"] == "stalled")
    for n in range(1, 9):  # one per batch, so that Tansu reports exact end offsets
        key = b'["c",{"f":%d}]' % (n % 4)
        if n == 5:
            with write_origin("PATCH", "c"):
                wait_applied(log, tracked.append([(key, b'{"p":%d}' % n)]), timeout_s=5.0)
        else:
            wait_applied(log, log.append([(key, b'{"p":%d}' % n)]), timeout_s=5.0)  # the reader never waits
    assert archive.status()["records_let_go"] >= 6
    for path in blocked:
        path.rmdir()
    status = wait_status(archive, lambda s: s["mode"] == "writing" and not s["offsets_to_read_back"])
    assert archive.sync(10), "in sync once read back, with no batch after the gap"
    assert status["records_not_archived"] == 0 and status["epochs_started"] == 0, status
    rows = list(HistoryReader(archive.directory, archive).rows())
    assert sorted(r["value"] for r in rows) == sorted(b'{"p":%d}' % n for n in range(9)), "every record, once"
    assert [r["origin"] for r in rows if r["value"] == b'{"p":5}'] == ["daemon"]
