"""Sink connectors' offsets are their consumer group's committed offsets, handled as Connect does.

The sink connectors here are registered in a Connect config topic by Apache Kafka's own
``KafkaConfigBackingStore`` (Java oracle); their consumer group ``connect-<name>`` gets its offsets
from a real consumer (``assign`` + ``commit``; Tansu forms a ``subscribe`` group after about half the
member's ``session.timeout.ms``, so the one member here asks for Kafka's smallest, 6 s) and
is checked with ``Consumer.committed``. Messages are Connect 4.3.0's (``Worker``, ``SinkUtils``), and
the request parsing is compared with Connect's own REST parsing run in the JVM.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from emulator.connect_cluster import connector_kind
from emulator.connect_cluster.cluster import READ_TO_END_FAILED
from emulator.model.connectors import not_found_message, not_stopped_message
from emulator.service.results import ALTERED, RESET
from emulator.service.sink_strategy import NO_SINKS_MESSAGE
from emulator.service.sinks import (
    alter_blocked_message,
    alter_failed_message,
    list_before_reset_failed_message,
    modify_failed_message,
    reset_blocked_message,
    reset_failed_message,
    retrieve_failed_message,
)
from tests.fixtures.broker import TansuBroker
from tests.fixtures.connect_cluster import ConnectClusterDaemon, Step, config, stop, tasks
from tests.fixtures.daemon import DaemonProcess, KafkaDaemon
from tests.integration.connect_helpers import unique
from tests.oracle import JavaError
from tests.oracle.classpath import libs_dir

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]

SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: the group has no committed offset there


def sink(name: str, topic: str, state: str | None = "STARTED", **props: str) -> Step:
    return config(name, state, **{"connector.class": SINK_CLASS, "topics": topic, **props})


def commit(broker: TansuBroker, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as a sink task's consumer would, without joining the group (assign, not subscribe)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, p) for p in offsets])
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(broker: TansuBroker, group: str, topic: str, partitions: int = 3) -> dict[int, int | None]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "log_level": 0})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: (None if tp.offset == NO_OFFSET else tp.offset) for tp in found}
    finally:
        consumer.close()


def entry(topic: str, partition: Any, offset: Any) -> dict[str, Any]:
    return {
        "partition": {"kafka_topic": topic, "kafka_partition": partition},
        "offset": None if offset is None else {"kafka_offset": offset},
    }


def stopped_sink(cluster: ConnectClusterDaemon, **props: str) -> tuple[str, str]:
    """A registered, stopped sink connector and its 3-partition input topic."""
    name, topic = unique("sink"), unique("orders")
    cluster.broker.create_topic(topic, 3)
    cluster.write(sink(name, topic, **props), tasks(name, 1), *stop(name))
    return name, topic


# --- GET ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_get_lists_the_groups_committed_offsets_in_connects_sink_shape(cluster: ConnectClusterDaemon) -> None:
    name, topic = unique("sink"), unique("orders")
    cluster.broker.create_topic(topic, 3)
    cluster.write(sink(name, topic), tasks(name, 2))  # GET works in any state, also while running
    commit(cluster.broker, f"connect-{name}", topic, {0: 5, 2: 9})

    response = cluster.get(name)
    assert response.status_code == 200, response.text
    ours = [json.dumps(e, separators=(",", ":")) for e in response.json()["offsets"]]
    java = [
        json.dumps(e, separators=(",", ":"))
        for e in json.loads(cluster.oracle.sink_offsets_shape([(topic, 0, 5), (topic, 2, 9)]))["offsets"]
    ]
    assert sorted(ours) == sorted(java)  # same entries, same key order inside each


@pytest.mark.slow
def test_a_sink_without_committed_offsets_has_none(cluster: ConnectClusterDaemon) -> None:
    name, _ = stopped_sink(cluster)
    assert cluster.get(name).json() == {"offsets": []}


@pytest.mark.slow
def test_consumer_override_group_id_names_the_group(cluster: ConnectClusterDaemon) -> None:
    group = unique("custom-group")
    name, topic = stopped_sink(cluster, **{"consumer.override.group.id": group})
    commit(cluster.broker, group, topic, {1: 3})
    assert cluster.get(name).json() == {"offsets": [entry(topic, 1, 3)]}


# --- PATCH --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_patch_commits_the_given_offsets_as_numbers_or_numeric_strings(cluster: ConnectClusterDaemon) -> None:
    name, topic = stopped_sink(cluster)
    group = f"connect-{name}"
    commit(cluster.broker, group, topic, {2: 7})
    response = cluster.patch(name, [entry(topic, 0, 11), entry(topic, "1", "12")])
    assert (response.status_code, response.json()) == (200, {"message": ALTERED})
    assert committed(cluster.broker, group, topic) == {0: 11, 1: 12, 2: 7}  # PATCH never removes others


@pytest.mark.slow
def test_a_null_offset_asks_the_broker_to_delete_that_partitions_offset(cluster: ConnectClusterDaemon) -> None:
    """Tansu 0.6 has no OffsetDelete (KIP-496): Connect's Admin call fails there, and so does ours, with
    Connect's message; the non-null part of the same request is still committed, as Connect's is."""
    name, topic = stopped_sink(cluster)
    group = f"connect-{name}"
    commit(cluster.broker, group, topic, {0: 4, 1: 8})
    java = cluster.oracle.admin_group_offsets(
        cluster.broker.bootstrap, group, "delete_offsets", partitions=[[topic, 0]]
    )
    assert isinstance(java.get("error"), JavaError), java  # Java's Admin cannot delete on this broker either

    response = cluster.patch(name, [entry(topic, 0, None), entry(topic, 1, 20)])
    assert response.status_code == 500
    # Connect's words, then the cause Connect leaves in its log (ours).
    assert response.json()["message"].startswith(alter_failed_message(name) + ": ")
    assert "OffsetDelete API (KIP-496) not supported by broker" in response.json()["message"]
    assert committed(cluster.broker, group, topic) == {0: 4, 1: 20, 2: None}


@pytest.mark.slow
def test_a_negative_offset_fails_inside_the_worker_as_in_connect(cluster: ConnectClusterDaemon) -> None:
    name, topic = stopped_sink(cluster)
    java = cluster.oracle.admin_group_offsets(
        cluster.broker.bootstrap, f"connect-{name}", "alter", offsets=[[topic, 0, -1]]
    )
    assert java["error"].java_class == "java.lang.IllegalArgumentException"  # new OffsetAndMetadata(-1)
    response = cluster.patch(name, [entry(topic, 0, -1)])
    assert (response.status_code, response.json()["message"]) == (500, modify_failed_message(name))
    dry = cluster.http.patch(
        f"/connectors/{name}/offsets", params={"dry_run": "true"}, json={"offsets": [entry(topic, 0, -1)]}
    )
    assert (dry.status_code, dry.json()["message"]) == (500, modify_failed_message(name)), "a dry run predicts it"


BODIES = [
    [entry("t", 0, 1), entry("t", "1", "22"), entry("u", "+2", 9_000_000_000)],
    [entry("t", 0, None)],
    [entry("t", "٣", 1)],  # Integer.parseInt takes any Unicode decimal digits
    [entry("t", 1.0, 1)],
    [entry("t", True, 1)],
    [entry("t", "1 ", 1)],
    [entry("t", "", 1)],
    [entry("t", 99_999_999_999, 1)],
    [entry("t", 0, 1.5)],
    [entry("t", 0, "12e3")],
    [entry("t", 0, 2**63)],
    [entry(None, 0, 1)],  # type: ignore[arg-type]
    [entry("t", None, 1)],
    [{"partition": {"kafka_topic": "t"}, "offset": {"kafka_offset": 1}}],
    [{"partition": {"kafka_partition": 0}, "offset": {"kafka_offset": 1}}],
    [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"offset": 1}}],
    [{"partition": {"kafka_topic": {"a": [1, 2.5, None]}, "kafka_partition": 0}, "offset": {"kafka_offset": 3}}],
    [{"partition": {"kafka_topic": 5, "kafka_partition": 0, "extra": 1}, "offset": {"kafka_offset": 3, "x": 1}}],
]


@pytest.mark.slow
def test_request_parsing_matches_connects_rest_layer_and_sinkutils(cluster: ConnectClusterDaemon) -> None:
    """Same accepted values (dry run plan = Java's parse), same 400 messages, body by body."""
    name, _ = stopped_sink(cluster)
    bodies = [json.dumps({"offsets": offsets}) for offsets in BODIES]
    for body, java in zip(bodies, cluster.oracle.sink_parse_offsets(bodies), strict=True):
        response = cluster.http.patch(
            f"/connectors/{name}/offsets",
            params={"dry_run": "true"},
            content=body,
            headers={"content-type": "application/json"},  # as Connect's clients send it (415 otherwise)
        )
        if isinstance(java, JavaError):
            assert java.java_class.endswith("BadRequestException"), java
            assert (response.status_code, response.json()["message"]) == (400, java.message), body
        else:
            assert response.status_code == 200, (body, response.text)
            planned = sorted(
                [r["kafka_topic"], r["kafka_partition"], r["kafka_offset"]] for r in response.json()["records"]
            )
            assert planned == java, body


@pytest.mark.slow
def test_a_sink_that_is_not_stopped_is_refused(cluster: ConnectClusterDaemon) -> None:
    name, topic = unique("sink"), unique("orders")
    cluster.broker.create_topic(topic, 3)
    cluster.write(sink(name, topic), tasks(name, 1))
    commit(cluster.broker, f"connect-{name}", topic, {0: 1})
    for response in (cluster.patch(name, [entry(topic, 0, 50)]), cluster.delete(name)):
        assert (response.status_code, response.json()["message"]) == (400, not_stopped_message(name))
    assert committed(cluster.broker, f"connect-{name}", topic)[0] == 1


@pytest.mark.slow
def test_an_active_group_member_blocks_alter_with_connects_zombie_message(cluster: ConnectClusterDaemon) -> None:
    """A sink task that has not let go (a zombie) is still a member; the broker refuses the admin commit."""
    name, topic = stopped_sink(cluster)
    member = Consumer(
        {
            "bootstrap.servers": cluster.broker.bootstrap,
            "group.id": f"connect-{name}",
            "session.timeout.ms": 6000,  # Tansu assigns after ~half of it (23 s at the default 45 s)
            "log_level": 0,
        }
    )
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment(), "the consumer never joined the group"
        response = cluster.patch(name, [entry(topic, 0, 3)])
        assert (response.status_code, response.json()["message"]) == (500, alter_blocked_message(name))
    finally:
        member.close()


# --- DELETE -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_delete_removes_the_group_and_is_idempotent(cluster: ConnectClusterDaemon) -> None:
    name, topic = stopped_sink(cluster)
    group = f"connect-{name}"
    commit(cluster.broker, group, topic, {0: 3, 1: 4})
    for _ in range(2):
        response = cluster.delete(name)
        assert (response.status_code, response.json()) == (200, {"message": RESET})
        assert committed(cluster.broker, group, topic) == {0: None, 1: None, 2: None}
    assert cluster.get(name).json() == {"offsets": []}


@pytest.mark.slow
def test_dry_runs_show_the_plan_and_change_nothing(cluster: ConnectClusterDaemon) -> None:
    name, topic = stopped_sink(cluster)
    group = f"connect-{name}"
    commit(cluster.broker, group, topic, {0: 3})
    patched = cluster.http.patch(
        f"/connectors/{name}/offsets", params={"dry_run": "true"}, json={"offsets": [entry(topic, 1, 9)]}
    ).json()
    assert patched["records"] == [
        {"consumer_group": group, "action": "commit", "kafka_topic": topic, "kafka_partition": 1, "kafka_offset": 9}
    ]
    deleted = cluster.http.delete(f"/connectors/{name}/offsets", params={"dry_run": "true"}).json()
    assert [r["action"] for r in deleted["records"]] == ["delete_group", "delete_offset"]
    assert committed(cluster.broker, group, topic) == {0: 3, 1: None, 2: None}


@pytest.mark.slow
def test_kind_given_in_the_request_must_agree_with_the_cluster(cluster: ConnectClusterDaemon) -> None:
    name, _ = stopped_sink(cluster)
    response = cluster.http.get(f"/connectors/{name}/offsets", params={"kind": "source"})
    assert response.status_code == 400
    assert "is a sink connector according to the Connect cluster's config topic" in response.json()["message"]


# --- without a Connect cluster: ?kind=sink (ours) ------------------------------------------------------


def test_kind_sink_reads_and_modifies_a_group_without_a_config_topic(
    kafka_daemon: KafkaDaemon, kafka_broker: TansuBroker
) -> None:
    name, topic = unique("spark-sink"), unique("events")
    kafka_broker.create_topic(topic, 3)
    group = f"connect-{name}"
    commit(kafka_broker, group, topic, {0: 2})
    url = f"{kafka_daemon.url}/connectors/{name}/offsets"
    with httpx.Client(timeout=60) as http:
        assert http.get(url).status_code == 404  # as a source it has no offsets
        assert http.get(url, params={"kind": "sink"}).json() == {"offsets": [entry(topic, 0, 2)]}
        patched = http.patch(url, params={"kind": "sink"}, json={"offsets": [entry(topic, 1, 6)]})
        assert (patched.status_code, patched.json()) == (200, {"message": ALTERED})
        assert committed(kafka_broker, group, topic) == {0: 2, 1: 6, 2: None}
        for _ in range(2):
            assert http.delete(url, params={"kind": "sink"}).json() == {"message": RESET}
        assert committed(kafka_broker, group, topic) == {0: None, 1: None, 2: None}
        bad = http.get(url, params={"kind": "sinks"})
        assert (bad.status_code, bad.json()["message"]) == (400, "kind must be 'source' or 'sink', got 'sinks'")


def test_a_commit_the_broker_refuses_says_why_after_connects_words(kafka_daemon: KafkaDaemon) -> None:
    """Connect answers only "Failed to alter consumer group offsets for connector X" and leaves the
    cause in the worker's log; the daemon keeps those words and adds the broker's reason."""
    name, missing = unique("sink-no-topic"), unique("no-such-topic")
    url = f"{kafka_daemon.url}/connectors/{name}/offsets"
    with httpx.Client(timeout=60) as http:
        refused = http.patch(url, params={"kind": "sink"}, json={"offsets": [entry(missing, 0, 5)]})
    assert refused.status_code == 500
    message = refused.json()["message"]
    assert message.startswith(alter_failed_message(name) + ": "), message
    assert f"{missing}[0]: Broker: Unknown topic or partition (UNKNOWN_TOPIC_OR_PART)" in message, message


def test_the_embedded_log_has_no_consumer_groups(embedded_daemon: DaemonProcess) -> None:
    response = httpx.get(f"{embedded_daemon.url}/connectors/{unique('x')}/offsets", params={"kind": "sink"})
    assert (response.status_code, response.json()["message"]) == (400, NO_SINKS_MESSAGE)


# --- the kind heuristic --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config_props", "kind"),
    [
        ({"connector.class": SINK_CLASS, "topics": "a"}, "sink"),
        ({"connector.class": "FileStreamSink", "topics.regex": "a.*"}, "sink"),
        ({"connector.class": "com.acme.Exporter", "topics": "a"}, "sink"),  # no name hint: Connect's sink rule
        ({"connector.class": "io.debezium.connector.postgresql.PostgresConnector"}, "source"),
        # MirrorMaker 2's source connector has a "topics" setting of its own.
        ({"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", "topics": ".*"}, "source"),
        ({"connector.class": "MirrorCheckpointConnector", "topics": ".*"}, "source"),
        ({"connector.class": "com.acme.JdbcSourceConnector", "topics": "x"}, "source"),
        ({"connector.class": "com.acme.Exporter", "topics": ""}, "source"),
    ],
)
def test_sink_or_source_is_read_from_the_config(config_props: dict[str, str], kind: str) -> None:
    assert connector_kind(config_props) == kind


# --- every message is Connect 4.3.0's own string ---------------------------------------------------------


def class_strings(jar: Path, class_name: str) -> set[str]:
    """String constants of a compiled class as ``javap -v`` prints them, ``\\'`` unescaped.

    Connect builds its messages with string concatenation, so a constant holds the template with
    ``\\u0001`` (printed as those six characters) where each value goes.
    """
    javap = shutil.which("javap")
    if javap is None:
        pytest.skip("javap (part of the system JDK) is not on PATH; cannot read Connect's class constants")
    out = subprocess.run([javap, "-v", "-cp", str(jar), class_name], capture_output=True, text=True, check=True)
    return {
        line.split("// ", 1)[1].replace("\\'", "'")
        for line in out.stdout.splitlines()
        if "= String" in line and "// " in line
    }


@pytest.mark.slow
def test_messages_are_connect_4_3_0s_own_strings() -> None:
    jar = next(libs_dir().glob("connect-runtime-4.3.0.jar"))
    slot = "\\u0001"  # javap's rendering of a concatenation recipe's argument slot
    worker = class_strings(jar, "org.apache.kafka.connect.runtime.Worker")
    for message in (
        alter_blocked_message,
        reset_blocked_message,
        alter_failed_message,
        reset_failed_message,
        modify_failed_message,
        retrieve_failed_message,
        list_before_reset_failed_message,
    ):
        assert message(slot) in worker, message.__name__
    framework = (
        f"The Connect framework-managed offsets for this connector have been {slot} successfully. However, if this "
        f"connector manages offsets externally, they will need to be manually {slot} in the system that the "
        "connector uses."
    )
    assert framework in worker
    assert framework.replace(slot, "altered") == ALTERED and framework.replace(slot, "reset") == RESET
    herder = class_strings(jar, "org.apache.kafka.connect.runtime.distributed.DistributedHerder")
    assert {not_stopped_message(slot), not_found_message(slot), READ_TO_END_FAILED} <= herder
