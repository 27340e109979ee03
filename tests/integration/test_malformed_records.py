"""Malformed records in a shared offsets topic: skipped and counted as Connect skips them, never fatal.

Hand-written records (kcat without ``-Z``, scripts, old converters) sit in real offsets topics between
the records Connect writes. Apache Kafka 4.3.0's ``KafkaOffsetBackingStore`` keeps every record's bytes
but leaves keys it cannot parse out of ``connectorPartitions`` (``OffsetUtils.processPartitionKey``),
keeps an empty value as a live entry whose offset reads as null, and leaves an unparseable value out of
a reader's answer with a CRITICAL log. Here the daemon reads the same topic and is compared with Java:
which keys count as malformed is decided by Java's own ``JsonConverter``, and what a task would read
by a fresh Java ``KafkaOffsetBackingStore`` + ``OffsetStorageReaderImpl``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.integration.connect_helpers import (
    JAVA_ONE_RECORD_PER_BATCH,
    canon,
    daemon_offsets,
    eventually,
    from_java,
    kafka_daemon_args,
    status,
    unique,
)
from tests.oracle import JavaError, JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]


def key_problem(raw: bytes | None, decoded: Any) -> str | None:
    """Which ``processPartitionKey`` branch Java takes for a key, from Java's own decoding of it.

    Named as the daemon's ``/status`` names them; ``None`` for a key Connect accepts.
    """
    if raw is None:
        return "null-key"
    if isinstance(decoded, JavaError):
        return "not-json"
    if not (isinstance(decoded, dict) and "list" in decoded):
        return "not-a-list"
    items = decoded["list"]
    if len(items) != 2:
        return "wrong-size"
    if not isinstance(items[0], str):
        return "name-not-string"
    if items[1] is None:
        return "partition-null"  # KAFKA-16392: ignored without a WARN
    if not (isinstance(items[1], dict) and "map" in items[1]):
        return "partition-not-map"
    return None


def key(connector: str, partition: dict[str, Any]) -> bytes:
    """Compact JSON as Connect writes it; the partitions used here are ASCII single-key maps."""
    return json.dumps([connector, partition], separators=(",", ":")).encode()


@pytest.mark.slow
def test_e_malformed_records_are_skipped_counted_and_agree_with_java(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic, n = kafka_broker.unique_topic("malformed"), 5
    valid, other = unique("valid-src"), unique("other-src")
    p_orders = T.jmap([("table", "orders"), ("db", "shop")])
    p_lines = T.jmap([("filename", "/in/a.txt")])
    p_other = T.jmap([("server", "db1")])
    empty_partition, bad_value_partition = {"file": "empty"}, {"file": "bad-value"}
    # JSON that parses but fails OffsetUtils.validateFormat: Java leaves it out as it does a non-JSON value.
    list_value_partition, nested_value_partition = {"file": "list-value"}, {"file": "nested-value"}

    def java_write(connector: str, entries: list[tuple[Any, Any]]) -> None:
        java_oracle.offsets_write(
            kafka_broker.bootstrap, topic, connector, entries, partitions=n, extra_config=JAVA_ONE_RECORD_PER_BATCH
        )

    def produce(records: list[tuple[bytes | None, bytes | None]]) -> None:
        kafka_broker.produce_raw(topic, [(k, v, i % n) for i, (k, v) in enumerate(records)])

    # Malformed keys; some reuse the valid connector's name, none of which may add a partition to it.
    before_daemon: list[tuple[bytes | None, bytes | None]] = [
        (b"not json {", b'{"pos":1}'),
        (b'{"connector":"ghost","partition":{"a":1}}', b'{"pos":1}'),  # a JSON object, not a list
        (f'["{valid}"]'.encode(), b'{"pos":1}'),  # one element
        (f'["{valid}",{{"file":"x"}},3]'.encode(), b'{"pos":1}'),  # three elements
        (b'[1,{"file":"x"}]', b'{"pos":1}'),  # name not a string
        (key(valid, empty_partition), b""),  # a valid key with an empty value (kcat without -Z)
    ]
    while_running: list[tuple[bytes | None, bytes | None]] = [
        (f'["{valid}","x"]'.encode(), b'{"pos":1}'),  # partition not a map
        (f'["{valid}",null]'.encode(), b'{"pos":1}'),  # partition null
        (b"\x80\x81\xfe garbage \x00\x01", b"\xff\x00\x13 garbage"),  # binary key and value
        (None, b'{"pos":1}'),  # null key
        (key(valid, bad_value_partition), b"\xffnot json at all"),  # a valid key with a non-JSON value
        (key(valid, list_value_partition), b"[1,2]"),  # JSON, not a map
        (key(valid, nested_value_partition), b'{"pos":{"lsn":1}}'),  # a map, not flat
    ]
    malformed_keys = [k for k, _ in before_daemon + while_running]
    decoded = java_oracle.json_decode(malformed_keys)
    kinds = [key_problem(raw, d) for raw, d in zip(malformed_keys, decoded, strict=True)]
    expected_skips = Counter(kind for kind in kinds if kind is not None)
    # Java's view of these keys, so the test covers every branch and the two valid keys stay valid.
    assert expected_skips == {
        "not-json": 2,
        "not-a-list": 1,
        "wrong-size": 2,
        "name-not-string": 1,
        "partition-not-map": 1,
        "partition-null": 1,
        "null-key": 1,
    }
    assert kinds[5] is None and kinds[-1] is None

    # Valid Java records interleaved with the malformed ones, half of them read on startup, half tailed.
    java_write(valid, [(p_orders, T.jmap({"pos": T.long(1)})), (p_lines, T.jmap({"position": T.long(10)}))])
    produce(before_daemon[:3])
    java_write(other, [(p_other, T.jmap({"lsn": T.long(7)}))])
    produce(before_daemon[3:])
    daemon = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, n))
    produce(while_running[:2])
    java_write(valid, [(p_orders, T.jmap({"pos": T.long(2)}))])
    produce(while_running[2:])
    total_records = 4 + len(before_daemon) + len(while_running)

    seen = eventually(lambda: status(daemon.url)["view"], lambda v: v["records_applied"] >= total_records)
    assert seen["records_applied"] == total_records
    assert seen["skipped_keys"] == dict(expected_skips)
    assert seen["skipped_keys_total"] == sum(expected_skips.values())
    assert seen["empty_values_applied"] == 1
    assert httpx.get(daemon.url + "/readyz", timeout=10).status_code == 200

    client = daemon.client()
    assert client.connectors() == sorted([valid, other])
    rows = client.offsets(valid)  # the first read of this connector meets the three unreadable values
    assert status(daemon.url)["view"]["unparseable_values"] == 3
    client.offsets(valid)
    assert status(daemon.url)["view"]["unparseable_values"] == 3, "counted once per record, not once per read"
    assert daemon_offsets(rows) == {
        canon(from_java(p_orders)): canon({"pos": 2}),
        canon(from_java(p_lines)): canon({"position": 10}),
        canon(empty_partition): canon(None),
        canon(bad_value_partition): canon(None),
        canon(list_value_partition): canon(None),
        canon(nested_value_partition): canon(None),
    }
    assert daemon_offsets(client.offsets(other)) == {canon(from_java(p_other)): canon({"lsn": 7})}

    # What a task would read, and what Connect lists, from Java's store on the same topic.
    unreadable = [bad_value_partition, list_value_partition, nested_value_partition]
    asked = [p_orders, p_lines, T.jmap(empty_partition), *(T.jmap(p) for p in unreadable)]
    java_offsets, java_partitions = java_oracle.offsets_read(
        kafka_broker.bootstrap, topic, valid, asked, num_partitions=n
    )
    assert java_offsets[2:] == [None] * 4  # b"" reads as null; a value validateFormat refuses is left out (CRITICAL)
    assert daemon_offsets(rows) == {
        canon(from_java(p)): canon(from_java(o)) for p, o in zip(asked, java_offsets, strict=True)
    }
    # Connect keeps both as live partitions, exactly the set the daemon lists.
    assert sorted(canon(from_java(p)) for p in java_partitions) == sorted(canon(row["partition"]) for row in rows)

    log_text = daemon.log_path.read_text(errors="replace")
    assert "Ignoring offset partition key with unknown serialization. Expected json." in log_text
    assert "CRITICAL: Failed to deserialize offset data" in log_text
    assert daemon.proc.poll() is None, "the daemon must still be running"
