"""Exact handoff between Kafka Connect's FileStreamSourceConnector and Spark's ``connect-file``.

The connector is Apache Kafka 4.3.0's own code (oracle JVM subprocess, ``KafkaOffsetBackingStore`` on
the session's Tansu broker); the daemon serves that same offsets topic; Spark is a real local Spark.
"Exact" means: every line of the file reaches exactly one engine's output, in order, across the
switch, in both directions, and whichever engine resumes starts right after the other one's last
line. Spark calls a source's ``commit`` one batch late and never ``stop()``, so the Spark → Connect
direction is only exact through the listener or ``spark-handoff``; the crashed-driver test shows
the late commit first, then repairs it with the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emulator.spark import OffsetCommitListener
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.oracle import JavaOracle
from tests.spark.helpers import (
    Collector,
    append,
    daemon_args,
    eventually,
    lines_bytes,
    run_connector,
    start_file_query,
    stored_position,
    unique,
    written_positions,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.kafka, pytest.mark.jvm, pytest.mark.spark, pytest.mark.slow]


def numbered(first: int, last: int) -> list[str]:
    return [f"line {i:03d} of the growing file" for i in range(first, last + 1)]


@dataclass(frozen=True)
class Handoff:
    """One handoff's offsets topic, input file and connector name; the daemon starts once Connect ran."""

    topic: str
    file: Path
    connector: str
    daemon_factory: DaemonFactory


@pytest.fixture
def setup(kafka_broker: TansuBroker, daemon_factory: DaemonFactory, tmp_path: Path) -> Handoff:
    topic = kafka_broker.unique_topic("spark-handoff")
    return Handoff(topic, tmp_path / "input.txt", unique("file-src"), daemon_factory)


def test_connect_to_spark_and_back_through_the_listener(
    spark: SparkSession, java_oracle: JavaOracle, kafka_broker: TansuBroker, setup: Handoff, tmp_path: Path
) -> None:
    topic, source, connector = setup.topic, setup.file, setup.connector
    path = str(source)

    # Connect reads the first 5 lines of a growing file and is stopped (its offset is committed).
    source.write_bytes(lines_bytes(numbered(1, 5)))
    assert run_connector(java_oracle, kafka_broker, topic, connector, path, 5) == numbered(1, 5)
    daemon = setup.daemon_factory(*daemon_args(kafka_broker, topic))
    client = daemon.client()
    after_connect = len(lines_bytes(numbered(1, 5)))
    assert eventually(lambda: stored_position(client, connector, path), lambda p: p == after_connect) == after_connect

    # The file grows; Spark continues with the same connector name and a fresh checkpoint.
    append(source, lines_bytes(numbered(6, 12)))
    listener = OffsetCommitListener(spark, url=daemon.url)
    spark.streams.addListener(listener)
    try:
        out = Collector()
        query = start_file_query(spark, daemon.url, connector, path, str(tmp_path / "checkpoint"), out, max_lines=3)
        query.processAllAvailable()
        assert out.lines == numbered(6, 12)
        append(source, lines_bytes(numbered(13, 15)))
        query.processAllAvailable()
        query.stop()
        assert listener.wait_for_termination(query, 60), "the listener never saw the query terminate"
    finally:
        spark.streams.removeListener(listener)
    assert out.lines == numbered(6, 15), "Spark's output is exactly the lines Connect had not emitted"
    assert len(out.batches) >= 3, "several micro-batches ran (3 lines per trigger)"
    assert listener.errors == []
    assert stored_position(client, connector, path) == len(lines_bytes(numbered(1, 15)))

    # The restarted connector emits exactly the lines after Spark's last completed batch.
    append(source, lines_bytes(numbered(16, 18)))
    assert run_connector(java_oracle, kafka_broker, topic, connector, path, 3) == numbered(16, 18)
    history = written_positions(kafka_broker.bootstrap, topic, connector)
    assert history == sorted(history), f"every write moved the offset forward: {history}"


def test_crashed_driver_is_repaired_with_spark_handoff_and_old_checkpoints_never_rewind(
    spark: SparkSession, java_oracle: JavaOracle, kafka_broker: TansuBroker, setup: Handoff, tmp_path: Path
) -> None:
    topic, source, connector = setup.topic, setup.file, setup.connector
    path = str(source)
    source.write_bytes(lines_bytes(numbered(1, 4)))
    assert run_connector(java_oracle, kafka_broker, topic, connector, path, 4) == numbered(1, 4)
    daemon = setup.daemon_factory(*daemon_args(kafka_broker, topic))
    client = daemon.client()
    after_connect = len(lines_bytes(numbered(1, 4)))
    assert eventually(lambda: stored_position(client, connector, path), lambda p: p == after_connect) == after_connect

    # Spark without a listener: its reader commits each batch only when the next one is planned.
    append(source, lines_bytes(numbered(5, 11)))
    checkpoint = tmp_path / "checkpoint"
    out = Collector()
    query = start_file_query(spark, daemon.url, connector, path, str(checkpoint), out, max_lines=4)
    query.processAllAvailable()
    query.stop()
    assert out.lines == numbered(5, 11)
    spark_end = len(lines_bytes(numbered(1, 11)))
    # batches: lines 5-8, then 9-11; the reader committed the first one only (in the background)
    after_first_batch = len(lines_bytes(numbered(1, 8)))
    late = eventually(lambda: stored_position(client, connector, path), lambda p: p == after_first_batch)
    assert late == after_first_batch < spark_end, f"the last batch is never committed by the reader ({late})"

    # The driver is gone; the checkpoint says how far Spark got. The CLI publishes it.
    handoff = _cli("spark-handoff", "--checkpoint", str(checkpoint), "--connector", connector, "--url", daemon.url)
    assert handoff.returncode == 0, handoff.stderr
    assert stored_position(client, connector, path) == spark_end
    append(source, lines_bytes(numbered(12, 14)))
    assert run_connector(java_oracle, kafka_broker, topic, connector, path, 3) == numbered(12, 14)
    after_connect_again = len(lines_bytes(numbered(1, 14)))
    assert (
        eventually(lambda: stored_position(client, connector, path), lambda p: p == after_connect_again)
        == after_connect_again
    )

    # Running the CLI again against the (now older) checkpoint does not move the connector back.
    again = _cli(
        "spark-handoff", "--checkpoint", str(checkpoint), "--connector", connector, "--url", daemon.url, "--json"
    )
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["written"] == [] and "backwards" in report["skipped"][0]["reason"]

    # Restarting the old query from its checkpoint: Spark resumes from its checkpoint (its truth),
    # and none of its commits (reader replay, listener) moves the shared offset backwards.
    listener = OffsetCommitListener(spark, url=daemon.url)
    spark.streams.addListener(listener)
    try:
        replay = Collector()
        restarted = start_file_query(spark, daemon.url, connector, path, str(checkpoint), replay, max_lines=2)
        restarted.processAllAvailable()
        restarted.stop()
        assert listener.wait_for_termination(restarted, 60)
    finally:
        spark.streams.removeListener(listener)
    assert replay.lines == numbered(12, 14), "Spark resumes from its own checkpoint, not from the daemon"
    assert stored_position(client, connector, path) == after_connect_again
    history = written_positions(kafka_broker.bootstrap, topic, connector)
    assert history == sorted(history), f"every write moved the offset forward: {history}"
    assert history[-1] == after_connect_again


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator.cli", *args], capture_output=True, text=True, timeout=60, check=False
    )
