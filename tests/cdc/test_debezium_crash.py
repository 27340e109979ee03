"""A crashed Spark driver: the batch that was running is the only one delivered twice, counted exactly.

Spark first this time (the connector's first start, streaming only: ``snapshot.mode=no_data``). The
sink fails in batch 2 after writing its rows, as a driver dying mid-batch would: ``offsets/2`` is in
the checkpoint, ``commits/2`` is not. What was delivered but not completed is delivered again —
Debezium's at-least-once rule (offsets are committed after the records) and Spark's (a batch without
``commits/N`` is run again) — and nothing else is:

- handed to Connect with ``connect-offsets spark-handoff`` (the last completed batch, from the
  checkpoint alone), the connector re-emits exactly batch 2's changes, then the new ones;
- restarted from its checkpoint, Spark replays batch 2 with the same changes (same ``seq``, key,
  offsets and event; only the envelope's processing time is new: the engine restarts from batch 1's
  offsets and the slot still holds the changes), then continues.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from emulator.spark import OffsetCommitListener
from tests.cdc.helpers import Capture, ChangeCollector, file_store, run_connect, start_query, wait_for_changes
from tests.cdc.postgres import PostgresServer
from tests.fixtures.daemon import DaemonFactory

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.jvm, pytest.mark.slow]

STREAM_ONLY = {"debezium.snapshot.mode": "no_data"}
CRASH_BATCH = 2


def crash_run(spark: SparkSession, url: str, capture: Capture, pg: PostgresServer, checkpoint: Path) -> ChangeCollector:
    """Spark streams changes 1-7 (at most 3 per batch) and dies in batch 2 after writing its rows."""
    sink = ChangeCollector(fail_on_batch=CRASH_BATCH)
    query = start_query(spark, url, capture, pg, checkpoint, sink, max_records=3, options=STREAM_ONLY)
    deadline = time.monotonic() + 90
    while not pg.slot_active(capture.slot):  # the engine created its slot: changes from now on are streamed
        assert query.isActive and time.monotonic() < deadline, f"the engine never started: {query.exception()}"
        time.sleep(0.2)
    for i in range(1, 8):
        capture.insert(pg, [i])
    with pytest.raises(Exception, match="fails in batch 2"):
        query.awaitTermination(120)
    assert [batch for batch, _ in sink.batches][-1] == CRASH_BATCH
    pg.wait_slot_released(capture.slot)  # the engine process closed itself when Spark's worker went away
    return sink


def last_completed(sink: ChangeCollector) -> dict[str, Any]:
    return [rows for batch, rows in sink.batches if batch < CRASH_BATCH and rows][-1][-1]


def test_a_crashed_driver_hands_off_to_connect_which_repeats_only_the_unfinished_batch(
    spark: SparkSession, postgres: PostgresServer, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    pg, capture = postgres, Capture.unique()
    capture.create(pg)
    daemon = daemon_factory()
    client = daemon.client()
    checkpoint = tmp_path / "checkpoint"
    sink = crash_run(spark, daemon.url, capture, pg, checkpoint)
    crashed = [change for batch, rows in sink.batches if batch == CRASH_BATCH for change in _changes(rows)]
    assert crashed, "the crashed batch had written rows"

    handoff = cli(
        "spark-handoff", "--checkpoint", str(checkpoint), "--connector", capture.connector, "--url", daemon.url
    )
    assert handoff.returncode == 0, handoff.stderr
    done = last_completed(sink)
    expected = [{"partition": json.loads(done["source_partition"]), "offset": json.loads(done["source_offset"])}]
    assert client.offsets(capture.connector) == expected, "the daemon holds the last completed batch's end"

    # Connect (standalone, the daemon's offsets exported to its file) resumes after batch 1: the
    # crashed batch's changes again, then the ones Spark never got to, then new ones.
    completed = len(sink.changes) - len(crashed)
    offsets_file = tmp_path / "connect.offsets"
    assert cli("export", "--to", f"standalone:{offsets_file}", "--url", daemon.url).returncode == 0
    resumed = run_connect(
        capture,
        pg,
        file_store(offsets_file),
        9 - completed,
        tmp_path / "connect",
        during=lambda: capture.insert(pg, [8, 9]),
    )
    assert resumed[: len(crashed)] == crashed
    assert resumed == [("c", i) for i in range(completed + 1, 10)]
    delivered = sink.changes + resumed
    assert len(delivered) - len(set(delivered)) == len(crashed), "exactly the unfinished batch is delivered twice"
    assert sorted(set(delivered)) == [("c", i) for i in range(1, 10)], "and no change is missing"


def test_a_restarted_query_replays_the_unfinished_batch_identically(
    spark: SparkSession, postgres: PostgresServer, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    pg, capture = postgres, Capture.unique()
    capture.create(pg)
    daemon = daemon_factory()
    client = daemon.client()
    checkpoint = tmp_path / "checkpoint"
    first = crash_run(spark, daemon.url, capture, pg, checkpoint)
    crashed_rows = [row for batch, rows in first.batches if batch == CRASH_BATCH for row in rows]

    listener = OffsetCommitListener(spark, url=daemon.url)
    spark.streams.addListener(listener)
    again = ChangeCollector()
    try:
        query = start_query(spark, daemon.url, capture, pg, checkpoint, again, max_records=3, options=STREAM_ONLY)
        remaining = 7 - len(first.changes) + len(crashed_rows)
        wait_for_changes(query, again, remaining)
        capture.insert(pg, [8, 9])
        wait_for_changes(query, again, remaining + 2)
        query.processAllAvailable()
        query.stop()
        assert listener.wait_for_termination(query, 60)
    finally:
        spark.streams.removeListener(listener)
    replayed = [[without_processing_time(r) for r in rows] for batch, rows in again.batches if batch == CRASH_BATCH]
    assert replayed == [[without_processing_time(r) for r in crashed_rows]], "batch 2 again, change for change"
    delivered = first.changes + again.changes
    assert len(delivered) - len(set(delivered)) == len(crashed_rows)
    assert sorted(set(delivered)) == [("c", i) for i in range(1, 10)]
    last = again.rows[-1]
    expected = [{"partition": json.loads(last["source_partition"]), "offset": json.loads(last["source_offset"])}]
    assert client.offsets(capture.connector) == expected


def without_processing_time(row: dict[str, Any]) -> dict[str, Any]:
    """A row without the envelope's top-level ``ts_ms``/``ts_us``/``ts_ns``: when the connector
    processed the change, which a replay cannot repeat. The change itself (``source`` with its LSN,
    transaction and commit time, ``before``/``after``, ``op``), the key, ``seq`` and offsets must."""
    value = json.loads(row["value"])
    for field in ("ts_ms", "ts_us", "ts_ns"):
        value.pop(field, None)
    return {**row, "value": value}


def _changes(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    collector = ChangeCollector()
    collector.batches.append((0, rows))
    return collector.changes


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator.cli", *args], capture_output=True, text=True, timeout=60, check=False
    )
