"""Byte-different keys of one partition: the value GET shows is Connect's, whatever order they arrive in.

Other producers write the same logical partition as other bytes (spaces, ``1e0``, another key order),
and such keys often land in other Kafka partitions (murmur2 of other bytes), so two readers can apply
them in either order. The daemon used to show the value of the key it applied last; now it shows
what Connect's GET shows (the value under the bytes Connect writes back for the partition), and,
where Connect shows null only because the connector's map iterates in another order than a
``HashMap``, the value such a task reads. Both are decided here by Apache Kafka's own
``KafkaOffsetBackingStore`` + ``OffsetStorageReaderImpl`` reading the same topic on Tansu.
"""

from __future__ import annotations

import pytest

from emulator.client.history import HistoryClient
from emulator.codec.murmur2 import partition_for
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.integration.connect_helpers import (
    canon,
    daemon_offsets,
    eventually,
    from_java,
    kafka_daemon_args,
    status,
    unique,
)
from tests.oracle import JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]


def keyed(connector: str, text: str) -> bytes:
    """A key exactly as given (``C`` stands for the connector's name)."""
    return text.replace("C", connector).encode()


@pytest.mark.slow  # two daemons and two fresh Java stores on one topic
def test_get_shows_connects_value_for_aliased_keys_in_any_arrival_order(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic, n = kafka_broker.unique_topic("aliases"), 5
    kafka_broker.create_topic(topic, n, {"cleanup.policy": "compact"})
    c = unique("al")
    records = [
        # p: Connect's bytes first, then a spaced copy (newer); Connect reads the first.
        ('["C",{"p":"own"}]', '{"k":1}'),
        ('["C", {"p": "own"}]', '{"k":2}'),
        # q: the spaced copy is older; Connect still reads its own bytes.
        ('["C", {"q": 1}]', '{"k":3}'),
        ('["C",{"q":1}]', '{"k":4}'),
        # r: only bytes no converter writes: Connect lists it with null.
        ('["C", {"r": 1}]', '{"k":5}'),
        ('["C",{"d":1e0}]', '{"k":6}'),
        # Two fields: HashMap order (a, b) and a LinkedHashMap's (b, a, newer): Connect reads (a, b).
        ('["C",{"a":2,"b":1}]', '{"k":7}'),
        ('["C",{"b":1,"a":2}]', '{"k":8}'),
        # Only a LinkedHashMap's order: Connect's GET shows null, a task building (y, x) reads 9.
        ('["C",{"y":1,"x":2}]', '{"k":9}'),
    ]
    tailing = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, n))
    raw = [(keyed(c, k), v.encode()) for k, v in records]
    kafka_broker.produce_raw(topic, [(k, v, partition_for(k, n)) for k, v in raw])
    restored = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, n))
    assert len({partition_for(k, n) for k, _ in raw}) > 1, "the aliases must sit in several Kafka partitions"

    # Connect's GET: each partition of connectorPartitions (HashMaps read from the topic) looked up
    # through OffsetStorageReaderImpl; and a task whose connector builds (y, x) as a LinkedHashMap.
    fields = [[("p", "own")], [("q", T.long(1))], [("r", T.long(1))], [("d", T.double(1.0))]]
    fields += [[("a", T.long(2)), ("b", T.long(1))], [("y", T.long(1)), ("x", T.long(2))]]
    as_connect_holds = [T.jmap(f, "hash") for f in fields]
    linked_yx = T.jmap([("y", T.long(1)), ("x", T.long(2))])
    java_offsets, listed = java_oracle.offsets_read(
        kafka_broker.bootstrap, topic, c, [*as_connect_holds, linked_yx], num_partitions=n
    )
    assert sorted(canon(from_java(p)) for p in listed) == sorted(canon(from_java(p)) for p in as_connect_holds)
    connect_get = {
        canon(from_java(p)): canon(from_java(o)) for p, o in zip(as_connect_holds, java_offsets, strict=False)
    }
    task_reads_yx = from_java(java_offsets[-1])
    assert task_reads_yx == {"k": 9}
    assert connect_get[canon({"x": 2, "y": 1})] == canon(None)  # Connect's own GET misses it

    expected = dict(connect_get) | {canon({"x": 2, "y": 1}): canon(task_reads_yx)}
    assert expected == {
        canon({"p": "own"}): canon({"k": 1}),
        canon({"q": 1}): canon({"k": 4}),
        canon({"r": 1}): canon(None),
        canon({"d": 1.0}): canon(None),
        canon({"a": 2, "b": 1}): canon({"k": 7}),
        canon({"x": 2, "y": 1}): canon({"k": 9}),
    }, "Java's answers, as this test states them"
    for daemon in (tailing, restored):
        eventually(lambda d=daemon: status(d.url)["view"], lambda v: v["records_applied"] >= len(records))  # type: ignore[misc]
        assert daemon_offsets(daemon.client().offsets(c)) == expected
        with HistoryClient(daemon.url) as history:
            assert daemon_offsets(history.offsets_as_of(c, as_of="now")) == expected
