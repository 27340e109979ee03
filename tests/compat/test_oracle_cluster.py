"""The oracle's Connect-cluster operations answer what Apache Kafka is known to do.

``connect_cluster_write`` drives Apache Kafka 4.3.0's own ``KafkaConfigBackingStore`` and
``KafkaStatusBackingStore``, the stores a distributed herder uses; the sink operations run Connect's
REST parsing (Jackson → ``ConnectorOffsets.toMap`` → ``SinkUtils``) and Java's ``Admin``. These checks
pin their output to the facts in docs/protocol.md §4.3, §4.4 and §4.6, read back as raw
bytes from the real broker, so the spec tests built on them cannot silently rest on a broken harness.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.fixtures.broker import TansuBroker
from tests.fixtures.connect_cluster import connector_config, connector_status, remove, stop, target, tasks
from tests.integration.connect_helpers import read_topic, unique
from tests.oracle import JavaError, JavaOracle

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]


def raw(records: list[Any]) -> list[tuple[str, str | None]]:
    return [(r.key.decode(), None if r.value is None else r.value.decode()) for r in records]


@pytest.mark.slow
def test_stopping_a_connector_writes_the_documented_config_records(
    kafka_broker: TansuBroker, java_oracle: JavaOracle
) -> None:
    topic, name = unique("cfg"), unique("conn")
    view = java_oracle.connect_cluster_write(
        kafka_broker.bootstrap,
        topic,
        [
            connector_config(name, {"topics": "t"}, "STARTED"),
            tasks(name, 2),
            # What DistributedHerder.stopConnector writes: empty task configs first, then the state.
            *stop(name),
        ],
    )
    assert view[name] == {
        "contains": True,
        "target_state": "STOPPED",
        "task_count": 0,
        "config": {"topics": "t"},
        "status": None,
        "task_count_record": None,  # no KIP-618 fencing record was written
        "pending_fencing": True,  # task configs were committed with none after them
    }
    assert raw(read_topic(kafka_broker.bootstrap, topic, expect=7)) == [
        (f"target-state-{name}", '{"state":"STARTED","state.v2":"STARTED"}'),
        (f"connector-{name}", '{"properties":{"topics":"t"}}'),
        (f"task-{name}-0", '{"properties":{"task.index":"0"}}'),
        (f"task-{name}-1", '{"properties":{"task.index":"1"}}'),
        (f"commit-{name}", '{"tasks":2}'),
        (f"commit-{name}", '{"tasks":0}'),
        (f"target-state-{name}", '{"state":"PAUSED","state.v2":"STOPPED"}'),
    ]
    # The config topic is created as a worker creates it: one partition.
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": unique("md"), "log_level": 0})
    try:
        assert len(consumer.list_topics(topic, timeout=10).topics[topic].partitions) == 1
    finally:
        consumer.close()


@pytest.mark.slow
def test_paused_state_and_connector_removal(kafka_broker: TansuBroker, java_oracle: JavaOracle) -> None:
    topic, name = unique("cfg"), unique("conn")
    view = java_oracle.connect_cluster_write(
        kafka_broker.bootstrap,
        topic,
        [
            connector_config(name, {"a": "b"}, state=None),
            target(name, "PAUSED"),
            remove(name),
        ],
    )
    assert view[name]["contains"] is False
    assert view[name]["target_state"] is None  # the removal's second tombstone removed it
    assert raw(read_topic(kafka_broker.bootstrap, topic, expect=4)) == [
        (f"connector-{name}", '{"properties":{"a":"b"}}'),  # no target state given: none written
        (f"target-state-{name}", '{"state":"PAUSED","state.v2":"PAUSED"}'),
        (f"connector-{name}", None),
        (f"target-state-{name}", None),
    ]


@pytest.mark.slow
def test_a_connector_status_record_as_the_status_store_writes_it(
    kafka_broker: TansuBroker, java_oracle: JavaOracle
) -> None:
    config_topic, status_topic, name = unique("cfg"), unique("status"), unique("conn")
    java_oracle.connect_cluster_write(
        kafka_broker.bootstrap,
        config_topic,
        [
            connector_config(name, {"a": "b"}, "STARTED"),
            connector_status(name, "RUNNING", generation=7, worker_id="w1:8083"),
        ],
        status_topic=status_topic,
    )
    back = java_oracle.connect_cluster_read(kafka_broker.bootstrap, config_topic, [name], status_topic=status_topic)
    assert back[name]["status"] == {"state": "RUNNING", "trace": None, "worker_id": "w1:8083", "generation": 7}
    # Kafka 4.3.0 adds "version" to §4.4's four fields; "trace":null is written explicitly.
    assert raw(read_topic(kafka_broker.bootstrap, status_topic, expect=1)) == [
        (
            f"status-connector-{name}",
            '{"state":"RUNNING","trace":null,"worker_id":"w1:8083","generation":7,"version":null}',
        ),
    ]


def test_sink_offsets_are_parsed_as_sinkutils_documents(java_oracle: JavaOracle) -> None:
    def body(partition: Any, offset: Any) -> str:
        return json.dumps({"offsets": [{"partition": partition, "offset": offset}]})

    answers = java_oracle.sink_parse_offsets(
        [
            body({"kafka_topic": "t", "kafka_partition": 3}, {"kafka_offset": 1000}),
            body({"kafka_topic": "t", "kafka_partition": "3"}, {"kafka_offset": "1000"}),  # strings accepted
            body({"kafka_topic": "t", "kafka_partition": 3}, None),  # null = delete that partition's offset
            body({"kafka_topic": "t", "kafka_partition": 3.0}, {"kafka_offset": 1}),
            body({"kafka_topic": "t"}, {"kafka_offset": 1}),
        ]
    )
    assert answers[:3] == [[["t", 3, 1000]], [["t", 3, 1000]], [["t", 3, None]]]
    assert isinstance(answers[3], JavaError) and isinstance(answers[4], JavaError)
    assert answers[3].java_class == "org.apache.kafka.connect.runtime.rest.errors.BadRequestException"
    assert answers[3].message == (
        "Failed to parse the following Kafka partition value in the provided offsets: '3.0'. "
        "Partition values for sink connectors need to be integers."
    )
    assert answers[4].message == (
        "The partition for a sink connector offset must contain the keys 'kafka_topic' and 'kafka_partition'"
    )


def test_sink_get_serializes_kafka_partition_before_kafka_topic(java_oracle: JavaOracle) -> None:
    shape = java_oracle.sink_offsets_shape([("orders", 2, 41)])
    assert (
        shape == '{"offsets":[{"partition":{"kafka_partition":2,"kafka_topic":"orders"},"offset":{"kafka_offset":41}}]}'
    )


def test_java_admin_on_a_consumer_group_against_the_test_broker(
    kafka_broker: TansuBroker, java_oracle: JavaOracle
) -> None:
    topic, group = unique("data"), unique("connect-sink")
    kafka_broker.create_topic(topic, 2)
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": group, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 9)], asynchronous=False)
    finally:
        consumer.close()
    assert java_oracle.admin_group_offsets(kafka_broker.bootstrap, group, "list") == {
        "offsets": [[topic, 0, 4], [topic, 1, 9]]
    }
    # Tansu 0.6 has no OffsetDelete (KIP-496): Java's Admin fails on it exactly as librdkafka does,
    # so on this broker a sink PATCH with "offset": null fails in Connect too.
    deleted = java_oracle.admin_group_offsets(kafka_broker.bootstrap, group, "delete_offsets", partitions=[[topic, 0]])
    assert deleted["error"].java_class == "org.apache.kafka.common.errors.UnsupportedVersionException"
    assert java_oracle.admin_group_offsets(kafka_broker.bootstrap, group, "delete_group") == {"ok": True}
    assert java_oracle.admin_group_offsets(kafka_broker.bootstrap, group, "list") == {"offsets": []}
