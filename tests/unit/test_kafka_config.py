"""Every Kafka client of the daemon is configured by one builder: the user's librdkafka settings pass
through, and the settings our correctness depends on win over them, with a warning naming both."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Consumer

from emulator.logs.kafka.config import (
    DEFAULT_CLIENT_ID,
    LIBRDKAFKA_LOG,
    RECEIVE_MESSAGE_MAX_BYTES,
    KafkaClientConfig,
)
from emulator.model.errors import LogConfigError

USER = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "client.id": "mine"}


def test_user_settings_pass_through_to_every_role_with_the_shared_basics() -> None:
    clients = KafkaClientConfig("broker:9092", USER, "the offsets log")
    for role in ("producer", "consumer", "admin"):
        config = clients.build(role)
        assert {k: config[k] for k in USER} == USER
        assert config["bootstrap.servers"] == "broker:9092"
        assert config["logger"] is LIBRDKAFKA_LOG
        assert config["allow.auto.create.topics"] == "false"  # a metadata lookup never creates a topic
    assert "error_cb" not in clients.build("admin")
    assert KafkaClientConfig("b:1").build("admin")["client.id"] == DEFAULT_CLIENT_ID


def test_each_role_gets_what_it_depends_on() -> None:
    clients = KafkaClientConfig("b:1")
    producer = clients.build("producer")
    assert (producer["acks"], producer["enable.idempotence"], producer["linger.ms"]) == ("all", "true", "0")
    assert producer["partitioner"] == "murmur2_random"
    assert "transactional.id" not in producer
    transactional = clients.build("transactional producer", transactional_id="tx-1")
    assert transactional["transactional.id"] == "tx-1" and transactional["acks"] == "all"
    consumer = clients.build("consumer", fetch_wait_ms="10")
    assert consumer["group.id"] == DEFAULT_CLIENT_ID  # required by librdkafka, never joined: we assign
    assert (consumer["enable.auto.commit"], consumer["auto.offset.reset"]) == ("false", "earliest")
    assert consumer["fetch.wait.max.ms"] == "10"
    assert consumer["isolation.level"] == "read_uncommitted"  # Connect's reader, unless EOS
    assert clients.build("consumer", read_committed=True)["isolation.level"] == "read_committed"


def test_consumers_take_any_response_a_broker_sends_unless_the_user_caps_them() -> None:
    """Java's consumer reads a record of any size the topic holds; librdkafka's 100 MB default cap
    left a 114 MB one unread for ever (QA D6). The cap saves no memory: a response is allocated at
    its own size. A user's setting still wins, and a consumer is built with either."""
    consumer = KafkaClientConfig("b:1").build("consumer")
    assert consumer["receive.message.max.bytes"] == str(RECEIVE_MESSAGE_MAX_BYTES) == "2147483647"
    assert "receive.message.max.bytes" not in KafkaClientConfig("b:1").build("producer")
    capped = KafkaClientConfig(
        "b:1", {"receive.message.max.bytes": "1000000", "fetch.max.bytes": "500000", "message.max.bytes": "400000"}
    )
    assert capped.build("consumer")["receive.message.max.bytes"] == "1000000"
    for clients in (KafkaClientConfig("b:1"), capped):
        clients.create("consumer", Consumer).close()


def test_an_overridden_user_setting_is_named_in_a_warning_and_a_chosen_fetch_wait_is_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    user = {"enable.auto.commit": "true", "isolation.level": "read_uncommitted", "fetch.wait.max.ms": "50"}
    clients = KafkaClientConfig("b:1", user, "Connect's config topic")
    with caplog.at_level(logging.WARNING, logger="emulator.logs.kafka.config"):
        config = clients.build("consumer", read_committed=True, fetch_wait_ms="10")
    assert (config["enable.auto.commit"], config["isolation.level"]) == ("false", "read_committed")
    assert config["fetch.wait.max.ms"] == "50"
    messages = [r.getMessage() for r in caplog.records]
    assert (
        "Ignoring client setting enable.auto.commit=true for Connect's config topic consumer: it requires "
        "enable.auto.commit=false" in messages
    )
    assert any(m.startswith("Ignoring client setting isolation.level=read_uncommitted") for m in messages)
    assert len(messages) == 2  # settings that agree (case-insensitively) are not reported


def test_a_refused_setting_is_a_configuration_error_naming_the_flag_then_the_client() -> None:
    clients = KafkaClientConfig("b:1", {"no.such.setting": "1"}, "the offsets log")
    with pytest.raises(
        LogConfigError,
        match=r"^Invalid Kafka client configuration \(the --kafka-config KEY=VALUE settings\): .*No such configuration "
        r"property: \"no\.such\.setting\".* \(refused when creating the consumer for the offsets log\)$",
    ):
        clients.create("consumer", Consumer)


def test_plain_leaves_out_python_objects_for_a_child_process() -> None:
    plain = KafkaClientConfig("b:1", USER).plain("admin")
    assert "logger" not in plain and plain["bootstrap.servers"] == "b:1"
    assert all(isinstance(v, str) for v in plain.values())
