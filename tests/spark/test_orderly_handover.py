"""What makes a Spark → Connect hand-off orderly: one query per connector.

Real local Spark, the session's embedded daemon, a ``connect-file`` query with an ``OffsetCommitListener``.
No Connect JVM: the connector resumes from the daemon's position, so a line the sink got past that
position is a line Connect delivers again (QA 26 ran Connect and counted exactly those).
Lines are ``line NNNN\\n``, 10 bytes each, so position ``10 * n`` is right after line ``n``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emulator.spark import OffsetCommitListener
from tests.fixtures.daemon import DaemonProcess
from tests.spark.helpers import Collector, start_file_query, unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]


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
