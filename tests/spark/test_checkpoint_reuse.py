"""A ``connect-file`` checkpoint belongs to one connector and one file, as its offsets say.

QA's repro: a query on ``file-src`` stopped; a line appended; the same query with
``connector=other-src`` on the same checkpoint ran without a word, read only the new line, and
the listener created ``other-src`` at ``file-src``'s position. A reused checkpoint for another
``file`` was already refused; another connector now is too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pyspark.errors import StreamingQueryException

from emulator.spark import OffsetCommitListener
from tests.fixtures.daemon import DaemonProcess
from tests.spark.helpers import Collector, append, start_file_query, stored_position, unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_checkpoint_reused_with_another_connector_is_refused_and_creates_nothing(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    file, checkpoint = tmp_path / "in.txt", str(tmp_path / "cpA")
    first, other = unique("file-src"), unique("other-src")
    file.write_text("one\ntwo\n")
    client = embedded_daemon.client()
    listener = OffsetCommitListener(spark, url=embedded_daemon.url)
    spark.streams.addListener(listener)
    try:
        out = Collector()
        query = start_file_query(spark, embedded_daemon.url, first, str(file), checkpoint, out)
        query.processAllAvailable()
        query.stop()
        assert listener.wait_for_termination(query, 60)
        assert out.lines == ["one", "two"] and stored_position(client, first, str(file)) == 8

        append(file, b"three\n")
        again = Collector()
        reused = start_file_query(spark, embedded_daemon.url, other, str(file), checkpoint, again)
        try:
            with pytest.raises(StreamingQueryException) as refused:
                reused.awaitTermination(60)
        finally:
            reused.stop()
        listener.wait_for_termination(reused, 30)
    finally:
        spark.streams.removeListener(listener)

    assert (
        f"the checkpoint is for connector {first!r}, but option connector is {other!r}; "
        "use a new checkpoint location for another connector"
    ) in str(refused.value)
    assert again.lines == []
    assert other not in client.connectors()
    assert stored_position(client, first, str(file)) == 8
