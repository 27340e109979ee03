"""What makes a Spark → Connect hand-off orderly: stopped between batches, one query per connector.

Real local Spark, the session's embedded daemon, a ``connect-file`` query with an ``OffsetCommitListener``.
No Connect JVM: the connector resumes from the daemon's position, so a line the sink got past that
position is a line Connect delivers again (QA 26 ran Connect and counted exactly those).
Lines are ``line NNNN\\n``, 10 bytes each, so position ``10 * n`` is right after line ``n``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from emulator.spark import OffsetCommitListener, stop_between_batches
from emulator.spark.checkpoint import unfinished_batch
from tests.fixtures.daemon import DaemonProcess
from tests.spark.helpers import Collector, start_file_query, unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]


class SlowSink(Collector):
    """A sink that has the rows, then spends a while on a Spark job of its own (its write's commit,
    say). ``query.stop()`` cancels that job, so a stop during it always cuts the batch off; a stop
    during a plain ``time.sleep`` in the sink cut it off about half the time (measured: 2 of 4)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.in_batch: dict[int, threading.Event] = {}

    def __call__(self, frame: Any, batch_id: int) -> None:
        super().__call__(frame, batch_id)
        self.in_batch.setdefault(batch_id, threading.Event()).set()
        seconds = self.seconds
        frame.sparkSession.range(1).foreach(lambda _: time.sleep(seconds))

    def entered(self, batch_id: int, timeout_s: float = 60.0) -> bool:
        return self.in_batch.setdefault(batch_id, threading.Event()).wait(timeout_s)


@pytest.fixture
def listener(spark: SparkSession, embedded_daemon: DaemonProcess) -> Iterator[OffsetCommitListener]:
    added = OffsetCommitListener(spark, url=embedded_daemon.url)
    spark.streams.addListener(added)
    yield added
    spark.streams.removeListener(added)


def file_read_by_connect_up_to_line_10(daemon: DaemonProcess, path: Path, connector: str, lines: int) -> None:
    path.write_text("".join(f"line {i:04d}\n" for i in range(1, lines + 1)))
    body = {"offsets": [{"partition": {"filename": str(path)}, "offset": {"position": 100}}]}
    daemon.client().alter(connector, body, create=True)


def connect_resumes_at(daemon: DaemonProcess, path: Path, connector: str) -> int | None:
    rows = daemon.client().offsets(connector)
    found = [row["offset"]["position"] for row in rows if row["partition"] == {"filename": str(path)}]
    return found[0] if found else None


def test_query_stop_mid_batch_is_reported_by_wait_for_termination_as_a_batch_connect_repeats(
    spark: SparkSession, embedded_daemon: DaemonProcess, listener: OffsetCommitListener, tmp_path: Path
) -> None:
    """QA 26 D1: ``query.stop()`` while batch 1's sink ran; ``wait_for_termination`` answered True
    with no error, and Connect then repeated batch 1's lines."""
    path, connector, checkpoint = tmp_path / "in.txt", unique("stop-mid-batch"), tmp_path / "cp"
    file_read_by_connect_up_to_line_10(embedded_daemon, path, connector, 40)
    sink = SlowSink(1.0)
    query = start_file_query(spark, embedded_daemon.url, connector, str(path), str(checkpoint), sink, max_lines=10)
    assert sink.entered(1)
    query.stop()

    assert listener.wait_for_termination(query, 60)  # batch 0 is published: the hand-off itself worked
    assert sink.lines[-1] == "line 0030", "the sink got batch 1 (lines 21-30)"
    assert connect_resumes_at(embedded_daemon, path, connector) == 200, "Connect repeats lines 21-30"
    assert unfinished_batch(checkpoint) == 1
    (reported,) = [e for e in listener.errors if "cut off mid-way" in e]
    assert f"query {query.id}: batch 1 was cut off mid-way (offsets/1 without commits/1)" in reported
    assert "its sink may already hold some or all of its output" in reported
    assert "stop_between_batches(query)" in reported


def test_stop_between_batches_lets_the_running_batch_finish_so_connect_repeats_nothing(
    spark: SparkSession, embedded_daemon: DaemonProcess, listener: OffsetCommitListener, tmp_path: Path
) -> None:
    path, connector, checkpoint = tmp_path / "in.txt", unique("stop-between"), tmp_path / "cp"
    file_read_by_connect_up_to_line_10(embedded_daemon, path, connector, 40)
    sink = SlowSink(1.0)
    query = start_file_query(spark, embedded_daemon.url, connector, str(path), str(checkpoint), sink, max_lines=10)
    assert sink.entered(1)
    outcome = stop_between_batches(query, timeout_s=30)

    assert outcome.stopped and outcome.between_batches, outcome
    assert outcome.unfinished_batch is None and outcome.reason is None
    assert listener.wait_for_termination(query, 60)
    assert listener.errors == []
    delivered = len(sink.lines)
    assert delivered >= 20, "batch 1, running when it was called, finished"
    assert sink.lines == [f"line {i:04d}" for i in range(11, 11 + delivered)]
    assert connect_resumes_at(embedded_daemon, path, connector) == 10 * (10 + delivered), (
        "Connect resumes right after the sink's last line"
    )


def test_a_second_running_query_on_a_connector_is_warned_about_and_one_started_after_it_stopped_is_not(
    spark: SparkSession, embedded_daemon: DaemonProcess, listener: OffsetCommitListener, tmp_path: Path
) -> None:
    """QA 26 D2: two ``connect-file`` queries (own checkpoints) on one connector and file each
    delivered every line, and nothing said so on this path (``CommitTarget`` without ``query=`` did)."""
    path, connector = tmp_path / "in.txt", unique("two-owners")
    file_read_by_connect_up_to_line_10(embedded_daemon, path, connector, 30)
    first, second = Collector(), Collector()
    url = embedded_daemon.url
    one = start_file_query(spark, url, connector, str(path), str(tmp_path / "cp1"), first, max_lines=5)
    two = start_file_query(spark, url, connector, str(path), str(tmp_path / "cp2"), second, max_lines=7)
    one.processAllAvailable()
    two.processAllAvailable()
    one.stop()
    two.stop()
    listener.wait_for_termination(one, 60)
    listener.wait_for_termination(two, 60)

    # How many lines both got depends on which started reading first (QA 26: all of them, twice).
    assert first.lines and second.lines
    (warning,) = listener.errors
    assert str(one.id) in warning and str(two.id) in warning
    assert f"connector {connector!r}, and so does query" in warning
    assert "their sinks both get the same records" in warning
    assert f"connect-offsets claim {connector} --owner JOB" in warning
    assert "option claimEpoch" in warning

    after = start_file_query(spark, url, connector, str(path), str(tmp_path / "cp3"), Collector())
    after.processAllAvailable()
    after.stop()
    assert listener.wait_for_termination(after, 60)
    assert listener.errors == [warning], "a query after the others stopped is the next owner, not a second one"
