"""A record larger than the consumer's ``receive.message.max.bytes``: Java reads it, and the daemon says
why it cannot instead of staying unready in silence.

librdkafka refuses a fetch response over ``receive.message.max.bytes`` (``Invalid response size …:
increase receive.message.max.bytes``) and fetches it again for ever; Java's consumer has no such cap.
A 114 MB value under librdkafka's 100 MB default left the daemon unready with ``/readyz`` saying only
that it was reading the log (QA D6). The daemon now defaults to librdkafka's maximum, and when a user's
lower setting meets such a record, ``/readyz`` and ``/status`` name the partition, the offset and the
setting. Here the limit is lowered to 1 MB with ``--kafka-config`` so that a 2 MB record takes the same
path as the QA's 114 MB one under the old default.
"""

from __future__ import annotations

import httpx
import pytest

from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.integration.connect_helpers import eventually, kafka_daemon_args, status, unique
from tests.oracle import JavaOracle

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]

LARGE_VALUE_BYTES = 2_000_000
LOWERED_LIMITS = [
    "--kafka-config",
    "receive.message.max.bytes=1000000",
    # librdkafka wants receive.message.max.bytes >= fetch.max.bytes + 512 and fetch.max.bytes >= message.max.bytes
    "--kafka-config",
    "fetch.max.bytes=500000",
    "--kafka-config",
    "message.max.bytes=400000",
]


@pytest.mark.slow
def test_a_record_over_receive_message_max_bytes_is_named_by_readyz_and_status_with_the_setting(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic = kafka_broker.unique_topic("large-records")
    kafka_broker.create_topic(topic, 1)
    small, large = unique("small"), unique("large")
    large_value = b'{"pos":"' + b"x" * LARGE_VALUE_BYTES + b'"}'
    kafka_broker.produce_raw(
        topic,
        [
            (f'["{small}",{{"before":1}}]'.encode(), b'{"pos":1}', 0),
            (f'["{large}",{{"f":1}}]'.encode(), large_value, 0),
            (f'["{small}",{{"after":1}}]'.encode(), b'{"pos":2}', 0),
        ],
        {"message.max.bytes": 3 * LARGE_VALUE_BYTES},
    )
    java = java_oracle.connect_listing(kafka_broker.bootstrap, topic, [small, large], num_partitions=1)
    assert java[large]["offsets"] == [['{"f":1}', large_value.decode()]], "Java's consumer reads it"
    assert len(java[small]["offsets"]) == 2

    lowered = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, 1), *LOWERED_LIMITS, wait_ready=False)

    def readyz() -> httpx.Response:
        return httpx.get(lowered.url + "/readyz", timeout=10)

    refused = eventually(readyz, lambda r: "receive.message.max.bytes" in r.json().get("message", ""))
    assert refused.status_code == 503
    message = refused.json()["message"]
    assert message.startswith("Not ready: ") and "partition 0 at offset" in message
    assert "refuses a fetch response of" in message and "more than receive.message.max.bytes (1,000,000)" in message
    assert "Set --kafka-config receive.message.max.bytes to more than" in message
    # /status tells the same (admin: the daemon runs without authentication on loopback).
    body = status(lowered.url)
    assert body["ready"] is False and "receive.message.max.bytes (1,000,000)" in body["unreachable"]

    # With the daemon's own default, the same topic is read as Java reads it.
    default = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, 1))
    assert status(default.url)["ready"] is True
    rows = default.client().offsets(large)
    assert rows == [{"partition": {"f": 1}, "offset": {"pos": "x" * LARGE_VALUE_BYTES}}]
    assert len(default.client().offsets(small)) == 2
