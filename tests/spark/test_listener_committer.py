"""``ListenerCommitter`` publishes the end offsets of queries whose sources are not ours.

The expected offsets come from Spark's own report (``query.lastProgress``) of the last batch,
mapped as documented in ``emulator.spark.shapes``: a Kafka-shaped offset becomes Connect's sink
shape (``kafka_topic``/``kafka_partition`` -> ``kafka_offset``), anything else is flattened under
``{"spark_source": index}``. The consumer-group path (``kind="sink"``) is checked with a real
consumer group on the broker.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql.streaming.listener import StreamingQueryListener

from emulator.spark import CommitTarget, ListenerCommitter
from emulator.spark.committer import DaemonOffsets, SinkOffsetsUnsupported
from emulator.spark.handoff import HandoffError
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory, DaemonProcess, KafkaDaemon
from tests.fixtures.sockets import silent_port
from tests.spark.helpers import unique
from tests.spark.probe_source import FixedOffsetsSource, KafkaShapedSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _run(spark: SparkSession, frame: Any, checkpoint: Path, committer: ListenerCommitter) -> dict[str, Any]:
    spark.streams.addListener(committer)
    try:
        query = (
            frame.writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        query.processAllAvailable()
        last = query.lastProgress
        query.stop()
        assert committer.wait_for_termination(query, 60)
    finally:
        spark.streams.removeListener(committer)
    assert committer.errors == []
    assert last is not None
    end: dict[str, Any] = json.loads(last["sources"][0]["endOffset"])
    return end


def test_a_file_sources_end_offset_is_flattened_under_its_source_index(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("x\ny\n")
    connector = unique("spark-text")
    committer = ListenerCommitter(spark, url=embedded_daemon.url, targets=[CommitTarget(0, connector)])
    end = _run(spark, spark.readStream.format("text").load(str(folder)), tmp_path / "cp", committer)
    assert set(end) == {"logOffset"}
    assert embedded_daemon.client().offsets(connector) == [
        {"partition": {"spark_source": 0}, "offset": {"logOffset": end["logOffset"]}}
    ]


def test_a_kafka_shaped_end_offset_is_stored_in_connects_sink_shape(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    spark.dataSource.register(KafkaShapedSource)
    connector, topic = unique("spark-kafka"), unique("events")
    committer = ListenerCommitter(spark, url=embedded_daemon.url, targets=[CommitTarget(0, connector)])
    frame = spark.readStream.format("kafka-shaped-probe").option("topic", topic).option("total", "6").load()
    end = _run(spark, frame, tmp_path / "cp", committer)
    assert end == {topic: {"0": 6, "1": 3}}
    rows = embedded_daemon.client().offsets(connector)
    assert sorted(rows, key=lambda r: r["partition"]["kafka_partition"]) == [
        {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 6}},
        {"partition": {"kafka_topic": topic, "kafka_partition": 1}, "offset": {"kafka_offset": 3}},
    ]


@pytest.mark.kafka
def test_kind_sink_commits_to_the_connectors_consumer_group(
    spark: SparkSession, kafka_broker: TansuBroker, kafka_daemon: KafkaDaemon, tmp_path: Path
) -> None:
    with DaemonOffsets(kafka_daemon.url) as daemon:
        try:
            daemon.require_sink_support()
        except SinkOffsetsUnsupported as exc:
            pytest.skip(f"this daemon has no sink-offsets support (?kind=sink) yet: {exc}")
    spark.dataSource.register(KafkaShapedSource)
    connector, topic = unique("spark-sink"), kafka_broker.unique_topic("events")
    kafka_broker.create_topic(topic, 2)
    committer = ListenerCommitter(spark, url=kafka_daemon.url, targets=[CommitTarget(0, connector, kind="sink")])
    frame = spark.readStream.format("kafka-shaped-probe").option("topic", topic).option("total", "4").load()
    end = _run(spark, frame, tmp_path / "cp", committer)
    assert end == {topic: {"0": 4, "1": 2}}

    group = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": f"connect-{connector}"})
    try:
        committed = group.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=15)
    finally:
        group.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 4), (1, 2)]


def _text_query(spark: SparkSession, folder: Path, checkpoint: Path) -> Any:
    return (
        spark.readStream.format("text")
        .load(str(folder))
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def _two_batches_the_second_while_the_daemon_is_down(
    spark: SparkSession, daemon: DaemonProcess, committer: ListenerCommitter, folder: Path, checkpoint: Path
) -> Any:
    """Two batches; the daemon stops between them (the listener's events are asynchronous: batch 0's
    progress may or may not have reached it), so only the termination can hand batch 1 over.
    Returns the stopped query."""
    (folder / "a.txt").write_text("x\n")
    query = _text_query(spark, folder, checkpoint)
    query.processAllAvailable()
    daemon.stop()
    (folder / "b.txt").write_text("y\n")
    query.processAllAvailable()
    query.stop()
    return query


def test_a_termination_the_daemon_cannot_take_is_an_error_naming_spark_handoff(
    spark: SparkSession, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    folder, checkpoint = tmp_path / "in", tmp_path / "cp"
    folder.mkdir()
    daemon = daemon_factory()
    connector = unique("spark-down")
    committer = ListenerCommitter(spark, url=daemon.url, targets=[CommitTarget(0, connector)])
    committer.termination_retry_s = 1.0  # the daemon stays down: no need to wait the default 30 s
    spark.streams.addListener(committer)
    try:
        query = _two_batches_the_second_while_the_daemon_is_down(spark, daemon, committer, folder, checkpoint)
        with pytest.raises(HandoffError) as raised:
            committer.wait_for_termination(query, 60)
    finally:
        spark.streams.removeListener(committer)
    message = str(raised.value)
    assert "publishing offsets on termination failed: cannot reach the connect-offsets daemon" in message, message
    command = f"connect-offsets spark-handoff --url {daemon.url} --checkpoint "
    assert command in message and str(checkpoint) in message, message
    assert f"--connector {connector} --source-index 0`" in message, message


def test_a_target_naming_a_source_the_query_lacks_fails_the_handover(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    """It returned True with nothing published (the query has one source: index 0)."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("x\n")
    committer = ListenerCommitter(spark, url=embedded_daemon.url, targets=[CommitTarget(3, unique("no-such-source"))])
    committer.termination_retry_s = 1.0
    spark.streams.addListener(committer)
    try:
        query = _text_query(spark, folder, tmp_path / "cp")
        query.processAllAvailable()
        query.stop()
        with pytest.raises(HandoffError, match=r"no source with that index in this query \(source 3 -> "):
            committer.wait_for_termination(query, 60)
    finally:
        spark.streams.removeListener(committer)


def test_a_daemon_restarting_at_the_termination_gets_the_last_batch(
    spark: SparkSession, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    folder, checkpoint, data = tmp_path / "in", tmp_path / "cp", tmp_path / "data"
    folder.mkdir()
    daemon = daemon_factory("--data-dir", str(data))
    connector = unique("spark-restart")
    committer = ListenerCommitter(spark, url=daemon.url, targets=[CommitTarget(0, connector)])
    spark.streams.addListener(committer)
    restarted: list[DaemonProcess] = []
    try:
        query = _two_batches_the_second_while_the_daemon_is_down(spark, daemon, committer, folder, checkpoint)
        time.sleep(1.0)  # the termination's publish has met a closed port by now
        restarted.append(daemon_factory("--data-dir", str(data), port=daemon.port))
        assert committer.wait_for_termination(query, 60)
    finally:
        spark.streams.removeListener(committer)
    last = json.loads((checkpoint / "offsets" / "1").read_text().splitlines()[-1])
    assert restarted[0].client().offsets(connector) == [
        {"partition": {"spark_source": 0}, "offset": {"logOffset": last["logOffset"]}}
    ]
    assert any("publishing offsets on progress failed" in e for e in committer.errors), committer.errors
    assert not any("on termination" in e for e in committer.errors), committer.errors


class _Recorder(StreamingQueryListener):
    """Another listener on the same session: Spark calls the listeners one after another."""

    def __init__(self) -> None:
        self.progress = 0
        self.terminated = threading.Event()

    def onQueryStarted(self, event: Any) -> None:
        """Not needed here."""

    def onQueryProgress(self, event: Any) -> None:
        self.progress += 1

    def onQueryIdle(self, event: Any) -> None:
        """Not needed here."""

    def onQueryTerminated(self, event: Any) -> None:
        self.terminated.set()


def test_a_daemon_that_does_not_answer_holds_up_no_other_listener(spark: SparkSession, tmp_path: Path) -> None:
    """The publishes run on a thread of the query's, not in Spark's listener callbacks: before, each
    progress event held Spark's listener bus (every listener of the session, Spark's UI included)
    for the client's 30 s timeout while the daemon accepted the connection and did not answer."""
    folder = tmp_path / "in"
    folder.mkdir()
    recorder = _Recorder()
    with silent_port() as port:
        committer = ListenerCommitter(spark, url=f"http://127.0.0.1:{port}", targets=[CommitTarget(0, unique("hung"))])
        committer.termination_retry_s = 1.0
        spark.streams.addListener(committer)
        spark.streams.addListener(recorder)
        try:
            (folder / "a.txt").write_text("x\n")
            query = _text_query(spark, folder, tmp_path / "cp")
            query.processAllAvailable()
            (folder / "b.txt").write_text("y\n")
            query.processAllAvailable()
            query.stop()
            assert recorder.terminated.wait(15), "the other listener's events waited behind the daemon"
            assert recorder.progress >= 2
        finally:
            spark.streams.removeListener(recorder)
            spark.streams.removeListener(committer)
    # The port is closed now: the waiting publishes fail, and the handover says so.
    with pytest.raises(HandoffError, match="publishing offsets on termination failed"):
        committer.wait_for_termination(query, 60)


def test_a_query_restarted_from_its_checkpoint_is_waited_for_on_its_own(
    spark: SparkSession, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """The restarted run keeps the query's id: before, the first run's finished termination answered
    for the second at once — True, for a batch the connector never got."""
    folder, checkpoint = tmp_path / "in", tmp_path / "cp"
    folder.mkdir()
    daemon = daemon_factory()
    connector = unique("spark-rerun")
    committer = ListenerCommitter(spark, url=daemon.url, targets=[CommitTarget(0, connector)])
    committer.termination_retry_s = 1.0
    spark.streams.addListener(committer)
    try:
        (folder / "a.txt").write_text("x\n")
        first = _text_query(spark, folder, checkpoint)
        first.processAllAvailable()
        first.stop()
        assert committer.wait_for_termination(first, 60)
        assert daemon.client().offsets(connector) != []
        daemon.stop()
        (folder / "b.txt").write_text("y\n")
        second = _text_query(spark, folder, checkpoint)
        second.processAllAvailable()
        second.stop()
        assert (second.id, second.runId != first.runId) == (first.id, True)
        with pytest.raises(HandoffError, match="publishing offsets on termination failed"):
            committer.wait_for_termination(second, 60)
    finally:
        spark.streams.removeListener(committer)


def test_a_client_the_listener_cannot_make_fails_the_handover_with_the_reason(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client is made inside the publish, so a setting it refuses is that publish's failure,
    reported as any other: not a publishing thread that died and a handover that never comes."""
    folder = tmp_path / "in"
    folder.mkdir()
    committer = ListenerCommitter(spark, url=embedded_daemon.url, targets=[CommitTarget(0, unique("bad-setting"))])
    monkeypatch.setenv("CONNECT_OFFSETS_RETRY_FOR", "soon")
    spark.streams.addListener(committer)
    try:
        (folder / "a.txt").write_text("x\n")
        query = _text_query(spark, folder, tmp_path / "cp")
        query.processAllAvailable()
        query.stop()
        with pytest.raises(HandoffError) as raised:
            committer.wait_for_termination(query, 60)
    finally:
        spark.streams.removeListener(committer)
    assert "publishing offsets on termination failed: CONNECT_OFFSETS_RETRY_FOR: expected a duration" in str(
        raised.value
    )


def _available_now(spark: SparkSession, frame: Any, checkpoint: Path, committer: ListenerCommitter) -> bool:
    """Runs ``frame`` to its end under ``committer``; what ``wait_for_termination`` answered."""
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return committer.wait_for_termination(query, 60)


def test_a_last_batch_kept_back_as_backwards_is_not_a_handover(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another checkpoint's query moved the connector further: the new query's batch is kept back
    (nothing is written), so ``wait_for_termination`` answered True for a batch the connector does
    not have."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        (folder / f"f{i}.txt").write_text(f"x{i}\n")
    connector = unique("spark-behind")
    first = ListenerCommitter(spark, url=embedded_daemon.url, targets=[CommitTarget(0, connector)])
    spark.streams.addListener(first)
    try:
        one_file_a_batch = spark.readStream.format("text").option("maxFilesPerTrigger", "1").load(str(folder))
        assert _available_now(spark, one_file_a_batch, tmp_path / "cpA", first)  # logOffset 2
        assert first.errors == []
    finally:
        spark.streams.removeListener(first)
    # Another job's listener (one listener would keep the target to its first query: not this case).
    committer = ListenerCommitter(spark, url=embedded_daemon.url, targets=[CommitTarget(0, connector)])
    spark.streams.addListener(committer)
    try:
        all_at_once = spark.readStream.format("text").load(str(folder))
        with caplog.at_level("WARNING", logger="emulator.spark.listener"):
            assert _available_now(spark, all_at_once, tmp_path / "cpB", committer) is False  # logOffset 0
    finally:
        spark.streams.removeListener(committer)
    assert embedded_daemon.client().offsets(connector) == [
        {"partition": {"spark_source": 0}, "offset": {"logOffset": 2}}
    ]
    assert len(committer.errors) == 1, committer.errors
    assert "the connector does not have batch 0 after the termination" in committer.errors[0]
    assert "would move backwards (logOffset 2 -> 0)" in committer.errors[0]
    assert committer.errors[0] in caplog.text


def test_an_offset_with_no_partition_to_store_is_not_a_handover(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    """``{"x": {}}`` flattens to no Connect partition: nothing was written, the connector does not
    even exist, and ``wait_for_termination`` answered True."""
    spark.dataSource.register(FixedOffsetsSource)
    connector = unique("spark-empty")
    committer = ListenerCommitter(spark, url=embedded_daemon.url, targets=[CommitTarget(0, connector)])
    spark.streams.addListener(committer)
    try:
        frame = spark.readStream.format("fixed-offsets-probe").option("offsets", json.dumps([{"x": {}}])).load()
        assert _available_now(spark, frame, tmp_path / "cp", committer) is False
    finally:
        spark.streams.removeListener(committer)
    with DaemonOffsets(embedded_daemon.url) as daemon:
        assert daemon.offsets(connector) is None  # no such connector
    assert len(committer.errors) == 1, committer.errors
    assert f"nothing was written to {connector}: the offset has no partition to store" in committer.errors[0]


def test_a_target_without_query_is_kept_by_the_first_query_another_is_skipped_with_a_warning(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("x\ny\n")
    connector = unique("spark-text")
    committer = ListenerCommitter(spark, url=embedded_daemon.url, targets=[CommitTarget(0, connector)])
    spark.streams.addListener(committer)
    try:
        text = _text_query(spark, folder, tmp_path / "cp-text")
        text.processAllAvailable()
        end = json.loads(text.lastProgress["sources"][0]["endOffset"])
        text.stop()
        assert committer.wait_for_termination(text, 60)
        expected = [{"partition": {"spark_source": 0}, "offset": {"logOffset": end["logOffset"]}}]
        assert embedded_daemon.client().offsets(connector) == expected

        with caplog.at_level(logging.WARNING, logger="emulator.spark.listener"):
            rate = (
                spark.readStream.format("rate")
                .option("rowsPerSecond", "5")
                .load()
                .writeStream.format("noop")
                .option("checkpointLocation", str(tmp_path / "cp-rate"))
                .trigger(processingTime="200 milliseconds")
                .start()
            )
            rate.processAllAvailable()
            time.sleep(1)
            rate.stop()
            assert committer.wait_for_termination(rate, 60) is False, "the connector does not have its batches"
    finally:
        spark.streams.removeListener(committer)
    assert embedded_daemon.client().offsets(connector) == expected  # the rate query did not overwrite them
    error, at_termination = committer.errors
    assert f"not publishing to connector {connector!r}" in error
    assert str(rate.id) in error and str(text.id) in error
    assert "does not have" in at_termination and "another query publishes to it" in at_termination
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [error, at_termination]
