"""The pytest plugin against Kafka (the session's Tansu broker), as a user's CI runs it: the broker's
address passed to an inner ``pytest`` on its command line or in a variable.

Specification: with ``--connect-offsets-bootstrap-servers`` (or ``CONNECT_OFFSETS_TEST_BOOTSTRAP_SERVERS``)
the kit's daemon reads and writes the named offsets topic on that broker; what ``seed`` writes is
what a real Connect task resumes from. The realistic case: Apache Kafka 4.3.0's
FileStreamSourceConnector (in a JVM, through Debezium's embedded engine with Connect's own
``KafkaOffsetBackingStore``) is seeded to start mid-file, reads the rest, and the test asserts the
offset it committed and the partition's history (the test's seed, then the connector's commits).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.broker import TANSU_TAIL_FETCH_WAIT, TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.testkit.conftest import run_inner

pytestmark = [pytest.mark.kafka, pytest.mark.slow]  # each runs a pytest session of its own, with a daemon

REPO = Path(__file__).resolve().parents[2]

KAFKA_USER_TESTS = """
import json

FILE = {"filename": "/data/in.txt"}


def test_the_daemon_is_on_the_users_broker(connect_offsets, connect_offsets_options):
    status = connect_offsets.client.status()
    assert connect_offsets_options.mode == "kafka"
    assert status["log"] == f"kafka://{connect_offsets_options.bootstrap_servers}/{connect_offsets_options.offsets_topic}"
    assert status["partitions"] == 5  # --connect-offsets-serve-args reached the daemon


def test_seed_assert_and_history(connect_offsets):
    connector = connect_offsets.unique_name("file-src")
    connect_offsets.seed(connector, [(FILE, {"position": 1}), ({"filename": "b"}, {"position": 2})])
    connect_offsets.seed(connector, [(FILE, {"position": 5})])
    connect_offsets.assert_offsets(connector, [({"filename": "b"}, {"position": 2}), (FILE, {"position": 5})])
    connect_offsets.wait_for_offset(connector, FILE, lambda _: len(connect_offsets.history(connector, FILE)) == 2)
    assert [c["offset"] for c in connect_offsets.history(connector, FILE)] == [{"position": 1}, {"position": 5}]


def connect_commits(options, connector, position):
    # What the pipeline under test does: commit straight to the offsets topic, as Connect does.
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": options.bootstrap_servers, "partitioner": "murmur2_random"})
    key = json.dumps([connector, FILE], separators=(",", ":")).encode()
    producer.produce(options.offsets_topic, key=key, value=json.dumps({"position": position}).encode())
    assert producer.flush(30) == 0


def test_a_commit_the_broker_acknowledged_is_seen_at_once_and_undone_by_the_teardown(
    connect_offsets, connect_offsets_options
):
    # The kit read the daemon's view, a moment behind the topic: the assertion met an older position,
    # and a reset right after such a commit left it in the topic for the next test.
    connector = connect_offsets.unique_name("file-src")
    connect_offsets.seed(connector, [(FILE, {"position": 1})])
    for position in range(2, 12):
        connect_commits(connect_offsets_options, connector, position)
        connect_offsets.assert_offsets(connector, [(FILE, {"position": position})])
    connect_commits(connect_offsets_options, connector, 99)
    assert connect_offsets.reset_touched() == []
    connect_offsets.assert_offsets(connector, [])


def test_a_sink_named_by_the_kit_then_seeded_is_reset_as_a_sink(connect_offsets, connect_offsets_options):
    # unique_name() recorded no kind and seed(kind="sink") kept it: the source offsets were reset.
    from confluent_kafka.admin import AdminClient, NewTopic

    connector, topic = connect_offsets.unique_name("sink"), connect_offsets.unique_name("sink-in")
    admin = AdminClient({"bootstrap.servers": connect_offsets_options.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(30)  # the sink's input topic
    group = [({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": 5})]
    connect_offsets.seed(connector, group, kind="sink")
    connect_offsets.assert_offsets(connector, group, kind="sink")
    assert connect_offsets.reset_touched() == []
    connect_offsets.assert_offsets(connector, [], kind="sink")
"""


@pytest.mark.parametrize("how", ["option", "variable"])
def test_the_kit_runs_on_the_users_broker(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kafka_broker: TansuBroker, how: str
) -> None:
    inner.makepyfile(test_on_kafka=KAFKA_USER_TESTS)
    topic = kafka_broker.unique_topic("kit-offsets")
    args = [
        f"--connect-offsets-offsets-topic={topic}",
        f"--connect-offsets-serve-args=--offsets-partitions 5 --tail-fetch-wait {TANSU_TAIL_FETCH_WAIT}",
    ]
    if how == "option":
        args.append(f"--connect-offsets-bootstrap-servers={kafka_broker.bootstrap}")
    else:
        monkeypatch.setenv("CONNECT_OFFSETS_TEST_BOOTSTRAP_SERVERS", kafka_broker.bootstrap)

    result = run_inner(inner, *args)

    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([f"connect-offsets: a daemon on {kafka_broker.bootstrap}, offsets topic {topic}"])


FILESTREAM_USER_TEST = """
from tests.oracle import JavaOracle  # stands in for "start my Connect pipeline"

LINES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


def test_the_connector_resumes_where_the_test_seeded_it(connect_offsets, connect_offsets_options, tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("".join(line + "\\n" for line in LINES))
    partition = {"filename": str(source)}
    connector = connect_offsets.unique_name("file-src")
    after_three_lines = len("".join(line + "\\n" for line in LINES[:3]).encode())

    connect_offsets.seed(connector, [(partition, {"position": after_three_lines})])

    oracle = JavaOracle()
    try:
        emitted = oracle.filestream_run(
            connect_offsets_options.bootstrap_servers,
            connect_offsets_options.offsets_topic,
            connector,
            str(source),
            partitions=5,
            expect_lines=len(LINES) - 3,
            timeout_s=60,
        )
    finally:
        oracle.close()

    assert emitted == LINES[3:]  # the task resumed at the seeded offset, not at the start of the file
    end = source.stat().st_size
    assert connect_offsets.wait_for_offset(connector, partition, {"position": end}, timeout=30) == {"position": end}
    connect_offsets.assert_offsets(connector, [(partition, {"position": end})])

    def archived(_offset):  # the archive follows the log's reader: wait until it holds the last commit
        changes = connect_offsets.history(connector, partition)
        return bool(changes) and changes[-1]["offset"] == {"position": end}

    connect_offsets.wait_for_offset(connector, partition, archived, timeout=10)
    changes = connect_offsets.history(connector, partition)
    assert (changes[0]["origin"], changes[0]["offset"]) == ("daemon", {"position": after_three_lines})
    assert changes[-1]["origin"] == "external" and changes[-1]["offset"] == {"position": end}
"""


@pytest.mark.jvm
def test_a_real_filestream_connector_resumes_from_the_seeded_offset_and_its_commit_is_asserted(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kafka_broker: TansuBroker
) -> None:
    inner.makepyfile(test_filestream=FILESTREAM_USER_TEST)
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the sample imports the project's JVM harness
    topic = kafka_broker.unique_topic("kit-filestream")

    result = run_inner(
        inner,
        f"--connect-offsets-bootstrap-servers={kafka_broker.bootstrap}",
        f"--connect-offsets-offsets-topic={topic}",
        f"--connect-offsets-serve-args=--offsets-partitions 5 --tail-fetch-wait {TANSU_TAIL_FETCH_WAIT}",
    )

    result.assert_outcomes(passed=1)


CLUSTER_USER_TESTS = """
import pytest

FILE = {"filename": "/data/in.txt"}


def test_seeded_before_connect_knows_it(connect_offsets):
    connector = connect_offsets.unique_name("early-src")
    connect_offsets.seed(connector, [(FILE, {"position": 7})])
    assert list(connect_offsets.client.records([connector]).values()) == [b'{"position":7}']
    with pytest.raises(AssertionError) as failed:  # Connect lists only connectors in its config topic
        connect_offsets.assert_offsets(connector, [(FILE, {"position": 7})])
    assert "answered 404" in str(failed.value) and "config topic" in str(failed.value)
"""


def test_a_connector_seeded_before_connect_knows_it_is_deleted_after_the_test(
    inner: pytest.Pytester, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """With a Connect cluster, Connect's DELETE answers 404 for a connector its config topic lacks;
    the kit's reset still removes what the test seeded, by its keys (it stayed in the shared topic)."""
    offsets_topic, config_topic = kafka_broker.unique_topic("kit-offsets"), kafka_broker.unique_topic("kit-configs")
    kafka_broker.create_topic(config_topic, 1, {"cleanup.policy": "compact"})
    inner.makepyfile(test_cluster=CLUSTER_USER_TESTS)

    result = run_inner(
        inner,
        f"--connect-offsets-bootstrap-servers={kafka_broker.bootstrap}",
        f"--connect-offsets-offsets-topic={offsets_topic}",
        f"--connect-offsets-config-topic={config_topic}",
        f"--connect-offsets-serve-args=--offsets-partitions 5 --tail-fetch-wait {TANSU_TAIL_FETCH_WAIT}",
    )

    result.assert_outcomes(passed=1)
    after = daemon_factory(
        "--bootstrap-servers",
        kafka_broker.bootstrap,
        "--offsets-topic",
        offsets_topic,
        "--tail-fetch-wait",
        TANSU_TAIL_FETCH_WAIT,
    )
    assert after.client().records() == {}, "the test's seed was left in the offsets topic"
