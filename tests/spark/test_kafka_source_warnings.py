"""``connect-kafka`` starting from a consumer group whose offset is past a partition's end.

Built as Spark builds the reader, from its options, and asked for its initial offset by the test
(the driver's call). Connect's sink consumer would get OffsetOutOfRange and reset to the earliest
offset (auto.offset.reset=earliest, Connect's default for sink consumers); before the fix the query
waited for offset 100 forever without a word.
"""

from __future__ import annotations

import logging

import pytest

from emulator.spark.kafka_source import ConnectKafkaStreamReader
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.spark.helpers import unique

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.mark.slow
def test_a_group_offset_past_the_end_starts_from_the_earliest_with_a_warning(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory, caplog: pytest.LogCaptureFixture
) -> None:
    topic, name = kafka_broker.unique_topic("ahead"), unique("ahead-sink")
    kafka_broker.create_topic(topic, 2)
    kafka_broker.produce_raw(topic, [(None, f"v{n}".encode(), p) for n in range(6) for p in range(2)])
    daemon = daemon_factory(
        "--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", kafka_broker.unique_topic("offsets")
    )
    body = {
        "offsets": [
            {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 100}},
            {"partition": {"kafka_topic": topic, "kafka_partition": 1}, "offset": {"kafka_offset": 4}},
        ]
    }
    daemon.client().alter(name, body, create=True, kind="sink")
    reader = ConnectKafkaStreamReader(
        {"url": daemon.url, "connector": name, "topics": topic, "kafka.bootstrap.servers": kafka_broker.bootstrap}
    )

    with caplog.at_level(logging.WARNING, logger="emulator.spark.kafka_source"):
        start = reader.initialOffset()

    assert start == {topic: {"0": 0, "1": 4}}
    (warning,) = [r.getMessage() for r in caplog.records]
    assert f"consumer group connect-{name}'s offset 100 for {topic}[0] is past the partition's end 6" in warning
    assert "starting that partition from its earliest offset 0" in warning
