"""A CDC pipeline moves from Kafka Connect to Spark and back, with no gap and no duplicate.

The real pieces: a PostgreSQL server (``wal_level=logical``), Debezium's Postgres connector in
Debezium's embedded engine as "Kafka Connect" (``connect_worker.py``: offsets in Connect's own
``KafkaOffsetBackingStore`` on the test broker, or a standalone ``FileOffsetBackingStore`` file), the
daemon serving the same offsets, and a local Spark running ``connect-debezium``. Each engine streams
some changes and stops gracefully; the next one must emit exactly the changes after the previous
one's last, in order. Changes are compared as (Debezium ``op``, row id).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from emulator.client.http import OffsetsClient
from emulator.formats.standalone import load_file
from emulator.spark import OffsetCommitListener
from tests.cdc.helpers import (
    Capture,
    ChangeCollector,
    eventually,
    file_store,
    ids,
    kafka_store,
    run_connect,
    start_query,
    wait_for_changes,
)
from tests.cdc.postgres import PostgresServer
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.integration.connect_helpers import read_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.jvm, pytest.mark.slow]


def daemon_offsets(client: OffsetsClient, connector: str) -> list[dict[str, Any]] | None:
    try:
        return client.offsets(connector)
    except Exception:
        return None


def offsets_of(row: dict[str, Any]) -> list[dict[str, Any]]:
    """What Connect resumes from after a Spark row: its source partition and offset."""
    return [{"partition": json.loads(row["source_partition"]), "offset": json.loads(row["source_offset"])}]


def spark_leg(
    spark: SparkSession,
    url: str,
    capture: Capture,
    pg: PostgresServer,
    work: Path,
) -> ChangeCollector:
    """Changes made while nothing ran, a transaction split across micro-batches (2 changes per
    trigger), and changes made while the query runs; then ``stop()`` with the listener."""
    capture.insert(pg, [6, 7])
    pg.sql(
        "BEGIN",
        f"INSERT INTO public.{capture.table} VALUES (8, 'row 8')",
        f"INSERT INTO public.{capture.table} VALUES (9, 'row 9')",
        f"UPDATE public.{capture.table} SET name = 'row 1 again' WHERE id = 1",
        "COMMIT",
    )
    listener = OffsetCommitListener(spark, url=url)
    spark.streams.addListener(listener)
    out = ChangeCollector()
    try:
        engine = {"engineDir": str(work / "engine")}
        query = start_query(spark, url, capture, pg, work / "checkpoint", out, max_records=2, options=engine)
        wait_for_changes(query, out, 5)
        capture.insert(pg, [10, 11])
        wait_for_changes(query, out, 7)
        query.processAllAvailable()  # the last batch is complete (commits/N written) before stop()
        query.stop()
        assert listener.wait_for_termination(query, 60), "the listener never saw the query terminate"
    finally:
        spark.streams.removeListener(listener)
    assert listener.errors == []
    assert out.changes == [("c", 6), ("c", 7), ("c", 8), ("c", 9), ("u", 1), ("c", 10), ("c", 11)]
    assert len(out.batches) >= 4, "several micro-batches ran (2 changes per trigger)"
    return out


def test_connect_to_spark_and_back_on_the_offsets_topic(
    spark: SparkSession,
    postgres: PostgresServer,
    kafka_broker: TansuBroker,
    daemon_factory: DaemonFactory,
    tmp_path: Path,
) -> None:
    pg, capture = postgres, Capture.unique()
    topic = kafka_broker.unique_topic("cdc-offsets")
    store = kafka_store(kafka_broker.bootstrap, topic)
    capture.create(pg, rows=[1, 2, 3])

    # Connect snapshots rows 1-3, gets 4-5, and stops; its offsets are in the topic.
    first = run_connect(capture, pg, store, 5, tmp_path / "connect-1", during=lambda: capture.insert(pg, [4, 5]))
    assert ids(first) == [1, 2, 3, 4, 5]
    daemon = daemon_factory("--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic)
    client = daemon.client()
    assert eventually(lambda: daemon_offsets(client, capture.connector), lambda o: bool(o)), "Connect's offsets"

    # Spark continues with exactly the changes after Connect's, and hands its offsets back.
    out = spark_leg(spark, daemon.url, capture, pg, tmp_path)
    last = out.rows[-1]
    assert client.offsets(capture.connector) == offsets_of(last)

    # Connect resumes with exactly the changes after Spark's last.
    second = run_connect(capture, pg, store, 2, tmp_path / "connect-2", during=lambda: capture.insert(pg, [12, 13]))
    assert second == [("c", 12), ("c", 13)]

    # Bytes: every record of the connector has Connect's key bytes, and the daemon wrote Spark's last
    # offset as the engine's own OffsetStorageWriter wrote it into its store (the engine's file).
    records = [r for r in read_topic(kafka_broker.bootstrap, topic, expect=3) if capture.connector in str(r.key)]
    assert len({r.key for r in records}) == 1 and len({r.partition for r in records}) == 1, records
    values = [r.value for r in records]
    assert last["source_offset"].encode() in values
    engine_file = load_file(tmp_path / "engine" / "offsets.dat").records
    assert [r.key for r in engine_file] == [records[0].key]
    assert engine_file[0].value in values, "the engine's own flushed offset is one the daemon wrote, byte for byte"


def test_connect_to_spark_and_back_on_the_embedded_log(
    spark: SparkSession, postgres: PostgresServer, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """No Kafka: Connect is a standalone worker (``FileOffsetBackingStore``); its file goes into the
    daemon's embedded log with ``connect-offsets import`` and comes back with ``export``."""
    pg, capture = postgres, Capture.unique()
    offsets_file = tmp_path / "connect.offsets"
    capture.create(pg, rows=[1, 2, 3])
    first = run_connect(
        capture, pg, file_store(offsets_file), 5, tmp_path / "connect-1", during=lambda: capture.insert(pg, [4, 5])
    )
    assert ids(first) == [1, 2, 3, 4, 5]
    daemon = daemon_factory()
    client = daemon.client()
    assert cli("import", "--from", f"standalone:{offsets_file}", "--url", daemon.url).returncode == 0
    connect_key = load_file(offsets_file).records[0].key

    out = spark_leg(spark, daemon.url, capture, pg, tmp_path)
    last = out.rows[-1]
    assert client.offsets(capture.connector) == offsets_of(last)

    exported = cli("export", "--to", f"standalone:{offsets_file}", "--url", daemon.url)
    assert exported.returncode == 0, exported.stderr
    entries = load_file(offsets_file).records
    assert [(r.key, r.value) for r in entries] == [(connect_key, last["source_offset"].encode())]
    second = run_connect(
        capture, pg, file_store(offsets_file), 2, tmp_path / "connect-2", during=lambda: capture.insert(pg, [12, 13])
    )
    assert second == [("c", 12), ("c", 13)]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator.cli", *args], capture_output=True, text=True, timeout=60, check=False
    )
