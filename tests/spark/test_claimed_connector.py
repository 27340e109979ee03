"""A Spark job that holds a connector's claim commits under it, on every path that commits.

A claimed connector refuses a write without the claim's current epoch (``connect-offsets claim``,
docs/claims-and-sequences.md). Each Spark path takes the epoch and sends it as ``alter
--claim-epoch`` does: the option ``claimEpoch`` of ``connect-file`` and ``connect-kafka`` (the
source's own commit; ``connect-kafka``'s goes to a sink connector's consumer group), the listener's
``claim_epochs={connector: epoch}`` (its own sources), ``CommitTarget(claim_epoch=)`` (other
sources) and ``spark-handoff --claim-epoch``. With the right epoch the commit lands; with a
stale one, or none, it is refused, nothing is written, and the refusal names the connector, the
epoch given (or that none was) and the knob to change, never a silent skip.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from emulator.spark import CommitTarget, ListenerCommitter, OffsetCommitListener
from emulator.spark.background import committer_for
from emulator.spark.file_source import ConnectFileStreamReader
from emulator.spark.filestream import Cursor
from emulator.spark.handoff import HandoffError
from emulator.spark.kafka_source import ConnectKafkaStreamReader
from emulator.spark.options import OptionError
from emulator.spark.shapes import FileOffset
from tests.fixtures.broker import TansuBroker
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.spark.helpers import Collector, eventually, stored_position, unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark]

LINES = b"one\ntwo\nthree\n"


def claimed(daemon: DaemonProcess, file: Path, *owners: str) -> tuple[str, list[int]]:
    """A connector at position 0 of ``file``, claimed by each owner in turn: (its name, the epochs)."""
    connector = unique("claimed")
    file.write_bytes(LINES)
    client = daemon.client()
    body = {"offsets": [{"partition": {"filename": str(file)}, "offset": {"position": 0}}]}
    client.alter(connector, body, create=True)
    return connector, [int(client.claim(connector, owner)["epoch"]) for owner in owners]


def source_commit(daemon: DaemonProcess, connector: str, file: Path, position: int, **options: str) -> None:
    """What Spark does when it plans the next batch: the reader's ``commit(end)``, then the background
    thread's commit (waited for here)."""
    reader = ConnectFileStreamReader({"url": daemon.url, "connector": connector, "file": str(file), **options})
    reader.commit(FileOffset(connector, str(file), Cursor(position, position)).spark())
    assert committer_for(daemon.url, connector, reader.daemon.credentials, claim_epoch=reader.claim_epoch).flush(30)


def assert_claim_advice(warning: str, source: str, connector: str, given: str, first: int, current: int) -> None:
    """A source's refused commit names the claim (its holder 'spark-run-8' and epoch ``current``),
    what the commit gave (the stale epoch ``first``, or none) and the source's option to change."""
    if given == "stale":
        assert (
            f"claimed by 'spark-run-8' with epoch {current}; the writer with epoch {first} has been fenced" in warning
        )
        assert (
            f"This commit to {connector} gave claim epoch {first} ({source}'s option claimEpoch), which is not "
            f"the connector's current claim" in warning
        )
        assert f"`connect-offsets claims {connector}`" in warning
    else:
        assert f"claimed by 'spark-run-8' (epoch {current})" in warning
        assert (
            f"This commit to {connector} gave no claim epoch: if this job holds that claim, give its epoch "
            f"with {source}'s option claimEpoch" in warning
        )


# -- connect-file's own commit: option claimEpoch -----------------------------------------------------------


@pytest.mark.slow
def test_connect_file_commits_to_a_claimed_connector_under_option_claim_epoch(
    embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    file = tmp_path / "in.txt"
    connector, (epoch,) = claimed(embedded_daemon, file, "spark-run-7")
    source_commit(embedded_daemon, connector, file, 4, claimEpoch=str(epoch))
    assert stored_position(embedded_daemon.client(), connector, str(file)) == 4


@pytest.mark.parametrize("given", ["stale", "none"])
def test_connect_file_refused_for_the_claim_warns_what_to_change_and_writes_nothing(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture, given: str
) -> None:
    file = tmp_path / "in.txt"
    connector, (first, current) = claimed(embedded_daemon, file, "spark-run-7", "spark-run-8")
    options = {"claimEpoch": str(first)} if given == "stale" else {}
    with caplog.at_level(logging.WARNING, logger="emulator.spark.background"):
        source_commit(embedded_daemon, connector, file, 4, **options)
    assert stored_position(embedded_daemon.client(), connector, str(file)) == 0
    (warning,) = [r.getMessage() for r in caplog.records if connector in r.getMessage()]
    assert_claim_advice(warning, "connect-file", connector, given, first, current)


# -- connect-kafka's own commit (a sink connector's consumer group): option claimEpoch ---------------------


def claimed_group(
    broker: TansuBroker, daemon_factory: DaemonFactory, *owners: str
) -> tuple[DaemonProcess, str, str, list[int]]:
    """A daemon with sink support and a sink connector whose group is at offset 0 of a one-partition
    topic, claimed by each owner in turn: (the daemon, the connector, the topic, the epochs)."""
    topic, connector = broker.unique_topic("claimed"), unique("claimed-sink")
    broker.create_topic(topic, 1)
    broker.produce_raw(topic, [(None, f"v{n}".encode(), 0) for n in range(6)])
    daemon = daemon_factory("--bootstrap-servers", broker.bootstrap, "--offsets-topic", broker.unique_topic("offsets"))
    client = daemon.client()
    body = {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 0}}]}
    client.alter(connector, body, create=True, kind="sink")
    return daemon, connector, topic, [int(client.claim(connector, owner)["epoch"]) for owner in owners]


def group_offset(daemon: DaemonProcess, connector: str) -> int:
    (row,) = daemon.client().offsets(connector, kind="sink")
    return int(row["offset"]["kafka_offset"])


def kafka_commit(
    broker: TansuBroker, daemon: DaemonProcess, connector: str, topic: str, offset: int, **options: str
) -> None:
    """The reader's ``commit(end)`` as Spark calls it, then the background thread's commit (waited for)."""
    reader = ConnectKafkaStreamReader(
        {
            "url": daemon.url,
            "connector": connector,
            "topics": topic,
            "kafka.bootstrap.servers": broker.bootstrap,
            **options,
        }
    )
    reader.commit({topic: {"0": offset}})
    committer = committer_for(
        daemon.url,
        connector,
        reader.daemon.credentials,
        kind="sink",
        source="connect-kafka",
        claim_epoch=reader.claim_epoch,
    )
    assert committer.flush(30)


@pytest.mark.slow
@pytest.mark.kafka
def test_connect_kafka_commits_to_a_claimed_connector_under_option_claim_epoch(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    daemon, connector, topic, (epoch,) = claimed_group(kafka_broker, daemon_factory, "spark-run-7")
    kafka_commit(kafka_broker, daemon, connector, topic, 4, claimEpoch=str(epoch))
    assert group_offset(daemon, connector) == 4


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.parametrize("given", ["stale", "none"])
def test_connect_kafka_refused_for_the_claim_warns_what_to_change_and_writes_nothing(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory, caplog: pytest.LogCaptureFixture, given: str
) -> None:
    daemon, connector, topic, (first, current) = claimed_group(
        kafka_broker, daemon_factory, "spark-run-7", "spark-run-8"
    )
    options = {"claimEpoch": str(first)} if given == "stale" else {}
    with caplog.at_level(logging.WARNING, logger="emulator.spark.background"):
        kafka_commit(kafka_broker, daemon, connector, topic, 4, **options)
    assert group_offset(daemon, connector) == 0
    (warning,) = [r.getMessage() for r in caplog.records if connector in r.getMessage()]
    assert warning.startswith(f"connect-kafka {connector}: could not commit"), warning
    assert_claim_advice(warning, "connect-kafka", connector, given, first, current)


@pytest.mark.kafka
@pytest.mark.slow
def test_a_connect_kafka_query_commits_to_a_claimed_group_under_option_claim_epoch(
    spark: SparkSession, kafka_broker: TansuBroker, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """Through Spark's own option handling (it lower-cases the names): the source's commit, one batch
    late, lands in the claimed group with the epoch given."""
    daemon, connector, topic, (epoch,) = claimed_group(kafka_broker, daemon_factory, "spark-run-7")
    query = (
        spark.readStream.format("connect-kafka")
        .option("url", daemon.url)
        .option("connector", connector)
        .option("topics", topic)
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("claimEpoch", str(epoch))
        .load()
        .writeStream.foreachBatch(Collector())
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()  # batch 0: offsets 0..5
        kafka_broker.produce_raw(topic, [(None, b"v6", 0)])
        query.processAllAvailable()  # planning batch 1 commits batch 0's end
    finally:
        query.stop()
    assert eventually(lambda: group_offset(daemon, connector), lambda offset: offset >= 6) == 6


@pytest.mark.parametrize(
    ("raw", "message"),
    [("abc", "option claimEpoch must be an integer, got 'abc'"), ("-1", "option claimEpoch must be >= 0, got -1")],
)
def test_connect_kafka_refuses_what_no_claim_epoch_can_be(raw: str, message: str) -> None:
    options = {"connector": "c", "topics": "t", "kafka.bootstrap.servers": "127.0.0.1:9", "claimEpoch": raw}
    with pytest.raises(OptionError, match=message):
        ConnectKafkaStreamReader(options)


def test_connect_kafka_takes_no_claim_epoch_by_default() -> None:
    reader = ConnectKafkaStreamReader({"connector": "c", "topics": "t", "kafka.bootstrap.servers": "127.0.0.1:9"})
    assert reader.claim_epoch is None


# -- the listener: claim_epochs for its own sources, CommitTarget(claim_epoch=) for others -----------------


def run_file_query(spark: SparkSession, url: str, connector: str, file: Path, checkpoint: Path) -> Any:
    """A ``connect-file`` query that leaves every commit to the listener, run to its end and stopped."""
    query = (
        spark.readStream.format("connect-file")
        .option("url", url)
        .option("connector", connector)
        .option("file", str(file))
        .option("commitOffsets", "false")
        .load()
        .writeStream.foreachBatch(Collector())
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    query.processAllAvailable()
    query.stop()
    return query


@pytest.mark.slow
@pytest.mark.parametrize("given", ["current", "stale", "none"])
def test_the_listener_publishes_to_a_claimed_connector_only_under_its_current_epoch(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path, given: str
) -> None:
    file = tmp_path / "in.txt"
    connector, (first, current) = claimed(embedded_daemon, file, "spark-run-7", "spark-run-8")
    epochs = {"current": {connector: current}, "stale": {connector: first}, "none": None}[given]
    listener = OffsetCommitListener(spark, url=embedded_daemon.url, claim_epochs=epochs)
    listener.termination_retry_s = 0
    spark.streams.addListener(listener)
    try:
        query = run_file_query(spark, embedded_daemon.url, connector, file, tmp_path / "cp")
        if given == "current":
            assert listener.wait_for_termination(query, 60)
            assert listener.errors == []
            assert stored_position(embedded_daemon.client(), connector, str(file)) == len(LINES)
            return
        with pytest.raises(HandoffError) as refused:
            listener.wait_for_termination(query, 60)
    finally:
        spark.streams.removeListener(listener)
    assert stored_position(embedded_daemon.client(), connector, str(file)) == 0
    message = str(refused.value)
    if given == "stale":
        assert f"gave claim epoch {first} (the listener's claim_epochs={{'{connector}': N}})" in message
        assert f"claimed by 'spark-run-8' with epoch {current}" in message
        # The command the message suggests must not repeat the refused epoch (it would be refused again),
        # nor name the current one, which is the newer claim's (maybe another job's).
        assert (
            f"--connector {connector} --source-index 0 --claim-epoch <epoch of the claim this job holds now>`"
            in message
        )
        assert f"--claim-epoch {first}" not in message
        assert f"--claim-epoch {current}" not in message
    else:
        assert f"claimed by 'spark-run-8' (epoch {current})" in message
        assert (
            f"gave no claim epoch: if this job holds that claim, give its epoch with the listener's "
            f"claim_epochs={{'{connector}': N}}" in message
        )


@pytest.mark.slow
@pytest.mark.parametrize("given", ["current", "stale"])
def test_a_commit_target_carries_its_claim_epoch(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path, given: str
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("x\ny\n")
    client = embedded_daemon.client()
    connector = unique("claimed-text")
    client.alter(connector, {"offsets": [{"partition": {"spark_source": 0}, "offset": {"logOffset": -1}}]}, create=True)
    first, current = (int(client.claim(connector, owner)["epoch"]) for owner in ("spark-run-7", "spark-run-8"))
    target = CommitTarget(0, connector, claim_epoch=current if given == "current" else first)
    committer = ListenerCommitter(spark, url=embedded_daemon.url, targets=[target])
    committer.termination_retry_s = 0
    spark.streams.addListener(committer)
    try:
        query = (
            spark.readStream.format("text")
            .load(str(folder))
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        if given == "current":
            assert committer.wait_for_termination(query, 60)
            assert client.offsets(connector) == [{"partition": {"spark_source": 0}, "offset": {"logOffset": 0}}]
            return
        with pytest.raises(HandoffError) as refused:
            committer.wait_for_termination(query, 60)
    finally:
        spark.streams.removeListener(committer)
    assert client.offsets(connector) == [{"partition": {"spark_source": 0}, "offset": {"logOffset": -1}}]
    message = str(refused.value)
    assert f"gave claim epoch {first} (CommitTarget(0, '{connector}', claim_epoch=N))" in message
    assert f"--connector {connector} --source-index 0 --claim-epoch <epoch of the claim this job holds now>`" in message
    assert f"--claim-epoch {first}" not in message


@pytest.mark.parametrize("epoch", ["1", 1.0, True, -1])
def test_a_commit_target_refuses_what_no_claim_epoch_can_be(epoch: Any) -> None:
    with pytest.raises((TypeError, ValueError), match=f"CommitTarget: claim_epoch must be a claim's epoch .*{epoch!r}"):
        CommitTarget(0, "c", claim_epoch=epoch)


# -- spark-handoff --claim-epoch ------------------------------------------------------------------------------


def handoff(daemon: DaemonProcess, checkpoint: Path, connector: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "spark-handoff", "--checkpoint", str(checkpoint), "--connector", connector, "--url", daemon.url, *extra
    )


@pytest.mark.slow
def test_spark_handoff_commits_to_a_claimed_connector_only_with_the_current_claim_epoch(
    spark: SparkSession, embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    file = tmp_path / "in.txt"
    connector, (first, current) = claimed(embedded_daemon, file, "spark-run-7", "spark-run-8")
    run_file_query(spark, embedded_daemon.url, connector, file, tmp_path / "cp")  # a driver without a listener
    holder = (
        f"hint: its holder 'spark-run-8' writes with --claim-epoch {current}; to end that claim: "
        f"`connect-offsets release {connector} --epoch {current}`"
    )

    without = handoff(embedded_daemon, tmp_path / "cp", connector)
    assert without.returncode == 1
    assert without.stderr.splitlines() == [
        f"error: The offsets of connector {connector} are claimed by 'spark-run-8' (epoch {current}), so only that "
        f"claim's holder may modify them: write with claim_epoch={current}, or release the claim first "
        f"(DELETE /connectors/{connector}/claim?epoch={current}) (HTTP 400)",
        holder,
    ]
    stale = handoff(embedded_daemon, tmp_path / "cp", connector, "--claim-epoch", str(first))
    assert stale.returncode == 1
    assert stale.stderr.splitlines() == [
        f"error: Connector {connector} is claimed by 'spark-run-8' with epoch {current}; the writer with epoch "
        f"{first} has been fenced and nothing was written (HTTP 409)",
        holder,
    ]
    assert stored_position(embedded_daemon.client(), connector, str(file)) == 0

    landed = handoff(embedded_daemon, tmp_path / "cp", connector, "--claim-epoch", str(current))
    assert landed.returncode == 0, landed.stderr
    assert stored_position(embedded_daemon.client(), connector, str(file)) == len(LINES)
