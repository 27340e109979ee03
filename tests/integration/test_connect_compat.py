"""The daemon and Apache Kafka Connect's own offset storage code share one offsets topic.

Java here is Apache Kafka 4.3.0's ``OffsetStorageWriter`` + ``KafkaOffsetBackingStore`` (writing, as a
worker's tasks do) and a fresh ``KafkaOffsetBackingStore`` + ``OffsetStorageReaderImpl`` (reading, as a
task does at start), run by the Java oracle against the session's real broker. Every expectation is
either the typed value handed to Java or Java's own answer, never the daemon's encoder.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.integration.connect_helpers import (
    JAVA_ONE_RECORD_PER_BATCH,
    canon,
    daemon_offsets,
    eventually,
    expected_after,
    from_java,
    kafka_daemon_args,
    read_topic,
    unique,
)
from tests.oracle import JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


def java_write(
    oracle: JavaOracle, broker: TansuBroker, topic: str, connector: str, entries: list[tuple[Any, Any]], n: int
) -> None:
    oracle.offsets_write(
        broker.bootstrap, topic, connector, entries, partitions=n, extra_config=JAVA_ONE_RECORD_PER_BATCH
    )


def java_read(
    oracle: JavaOracle, broker: TansuBroker, topic: str, connector: str, partitions: list[Any], n: int
) -> tuple[list[Any], list[Any]]:
    return oracle.offsets_read(broker.bootstrap, topic, connector, partitions, num_partitions=n)


# --- (a) the daemon lists exactly what Java wrote ---------------------------------------------------

# Partition maps in the iteration orders connectors really use: LinkedHashMap in non-sorted insertion
# order, HashMap (bucket order), single-key maps; strings Jackson escapes (controls, non-BMP) or writes
# raw (BMP non-ASCII, DEL, U+2028); numbers at the edges of Long and Doubles Java formats as 1.0E10.
JDBC_ORDERS = T.jmap([("table", "orders"), ("db", "shop"), ("protocol", "1")])
JDBC_CUSTOMERS = T.jmap([("table", "customers"), ("db", "shop"), ("protocol", "1")])
JDBC_DROPPED = T.jmap([("table", "dropped"), ("db", "shop"), ("protocol", "1")])
TEXT_MIXED = T.jmap(
    [
        ("zeta", "café 日本 \U0001f600"),
        ("alpha", "tab\tnl\ncr\rbs\bff\f ctl\x01\x1f del\x7f ls\u2028"),
        ("mid", 'quote" backslash\\ slash/'),
    ]
)
TEXT_EMOJI_ONLY = T.jmap([("k", "\U0001f600\U0001f680")])
HASH_T1 = T.jmap([("server", "db1"), ("schema", "public"), ("table", "t1"), ("shard", T.long(3))], impl="hash")
HASH_T2 = T.jmap([("server", "db1"), ("schema", "public"), ("table", "t2"), ("shard", T.long(4))], impl="hash")


def jdbc_offset(pos: int, ts: int, snapshot: bool, ratio: float) -> Any:
    return T.jmap([("ts_ms", T.long(ts)), ("pos", T.long(pos)), ("snapshot", snapshot), ("ratio", T.double(ratio))])


@pytest.mark.slow
def test_a_daemon_started_on_a_java_written_topic_lists_exactly_what_java_wrote(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic, n = kafka_broker.unique_topic("compat-a"), 7
    jdbc, text, hashed = unique("jdbc-src"), unique("text-src"), unique("hash-src")
    writes: dict[str, list[tuple[Any, Any]]] = {
        jdbc: [
            (JDBC_ORDERS, jdbc_offset(LONG_MAX - 1, LONG_MAX, True, 0.1)),
            (JDBC_CUSTOMERS, jdbc_offset(0, LONG_MIN, False, 1.0e10)),
            (JDBC_DROPPED, jdbc_offset(5, 5, False, 1.0)),
        ],
        text: [
            (TEXT_MIXED, T.jmap([("file", "\U0001f600/路径.log"), ("line", T.long(42)), ("frac", T.double(1.0e-5))])),
            (TEXT_EMOJI_ONLY, T.jmap([("n", T.integer(7)), ("ok", True), ("half", T.double(0.5))])),
        ],
        hashed: [
            (HASH_T1, T.jmap([("lsn", T.long(9223372036854775000)), ("txId", T.long(123)), ("d", T.double(123.456))])),
            (HASH_T2, T.jmap([("lsn", T.long(1)), ("last_snapshot_record", True)], impl="hash")),
        ],
    }
    for connector, entries in writes.items():
        java_write(java_oracle, kafka_broker, topic, connector, entries, n)
    # A later flush overwrites one partition and tombstones another, as a running task would.
    later = [(JDBC_ORDERS, jdbc_offset(LONG_MAX, LONG_MAX, False, 0.1)), (JDBC_DROPPED, None)]
    java_write(java_oracle, kafka_broker, topic, jdbc, later, n)
    writes[jdbc] += later

    daemon = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, n))
    client = daemon.client()

    assert client.connectors() == sorted(writes)
    for connector, entries in writes.items():
        assert daemon_offsets(client.offsets(connector)) == expected_after(entries), connector
    # The exact values, spelled out once, so a shared conversion mistake cannot hide.
    by_table = {row["partition"]["table"]: row["offset"] for row in client.offsets(jdbc)}
    assert by_table == {
        "orders": {"ts_ms": LONG_MAX, "pos": LONG_MAX, "snapshot": False, "ratio": 0.1},
        "customers": {"ts_ms": LONG_MIN, "pos": 0, "snapshot": False, "ratio": 1.0e10},
    }
    (emoji_row,) = [row for row in client.offsets(text) if row["partition"] == {"k": "\U0001f600\U0001f680"}]
    assert canon(emoji_row["offset"]) == canon({"n": 7, "ok": True, "half": 0.5})


@pytest.mark.slow
def test_a_daemon_tails_what_java_writes_while_it_runs(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic, n = kafka_broker.unique_topic("compat-a-tail"), 7
    first, second = unique("tail-src"), unique("tail-new")
    initial = [(JDBC_ORDERS, jdbc_offset(1, 1, True, 0.1))]
    java_write(java_oracle, kafka_broker, topic, first, initial, n)
    daemon = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, n))
    client = daemon.client()
    assert daemon_offsets(client.offsets(first)) == expected_after(initial)

    more_first = [(JDBC_ORDERS, jdbc_offset(2, 2, False, 1.0e10)), (JDBC_CUSTOMERS, jdbc_offset(3, 3, True, 0.1))]
    more_second = [(TEXT_MIXED, T.jmap({"line": T.long(LONG_MAX)})), (HASH_T1, T.jmap({"lsn": T.long(7)}))]
    java_write(java_oracle, kafka_broker, topic, first, more_first, n)
    java_write(java_oracle, kafka_broker, topic, second, more_second, n)
    java_write(java_oracle, kafka_broker, topic, first, [(JDBC_CUSTOMERS, None)], n)

    want_first = expected_after([*initial, *more_first, (JDBC_CUSTOMERS, None)])
    seen = eventually(lambda: daemon_offsets(client.offsets(first)), lambda got: got == want_first)
    assert seen == want_first
    assert eventually(client.connectors, lambda names: second in names) == sorted([first, second])
    want_second = expected_after(more_second)
    assert eventually(lambda: daemon_offsets(client.offsets(second)), lambda got: got == want_second) == want_second


# --- (b) what the daemon writes, a fresh Java reader reads ------------------------------------------

ORDER = T.jmap([("table", "orders"), ("db", "shop"), ("protocol", "1")])  # LinkedHashMap, not sorted
DOUBLES = T.jmap([("ratio", T.double(0.1)), ("id", T.long(5)), ("big", T.double(1.0e10))])
HASHED = T.jmap([("server", "db1"), ("schema", "public"), ("table", "t1")], impl="hash")
SINGLE = T.jmap([("filename", "/data/a.txt")])
GONE = T.jmap([("file", "gone.log"), ("dir", "/var")])
KEPT = T.jmap([("zz", "untouched"), ("aa", "x")])
NEW = T.jmap([("shard", "s9"), ("region", "eu-1")])  # the order the PATCH body gives, as the task builds it


@pytest.mark.slow
def test_b_java_reads_the_offsets_the_daemon_altered_and_reset(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic, n = kafka_broker.unique_topic("compat-b"), 7
    altered, reset = unique("alter-src"), unique("reset-src")
    java_write(
        java_oracle,
        kafka_broker,
        topic,
        altered,
        [
            (ORDER, T.jmap({"pos": T.long(10)})),
            (DOUBLES, T.jmap({"pos": T.long(20)})),
            (HASHED, T.jmap({"lsn": T.long(30)})),
            (SINGLE, T.jmap({"position": T.long(40)})),
            (GONE, T.jmap({"x": T.long(1)})),
            (KEPT, T.jmap({"y": T.long(2)})),
        ],
        n,
    )
    to_reset = [ORDER, HASHED, T.jmap([("filename", "/data/b.txt")])]
    java_write(java_oracle, kafka_broker, topic, reset, [(p, T.jmap({"pos": T.long(99)})) for p in to_reset], n)

    daemon = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, n))
    client = daemon.client()
    # Partitions given in key orders other than Java's bytes; values as plain JSON.
    body = {
        "offsets": [
            {
                "partition": {"protocol": "1", "db": "shop", "table": "orders"},
                "offset": {"pos": LONG_MAX, "snapshot": True, "ratio": 0.5},
            },
            {"partition": {"big": 1.0e10, "id": 5, "ratio": 0.1}, "offset": {"pos": 21, "note": "日本 \U0001f600\n"}},
            {"partition": {"schema": "public", "server": "db1", "table": "t1"}, "offset": {"lsn": 31, "flag": False}},
            {"partition": {"filename": "/data/a.txt"}, "offset": {"position": 0}},
            {"partition": {"dir": "/var", "file": "gone.log"}, "offset": None},
            {"partition": {"shard": "s9", "region": "eu-1"}, "offset": {"pos": 1.0e10, "since": LONG_MIN}},
        ]
    }
    assert "altered successfully" in client.alter(altered, body)["message"]
    assert "reset successfully" in client.reset(reset)["message"]

    expected: list[tuple[Any, Any]] = [
        (ORDER, {"pos": LONG_MAX, "snapshot": True, "ratio": 0.5}),
        (DOUBLES, {"pos": 21, "note": "日本 \U0001f600\n"}),
        (HASHED, {"lsn": 31, "flag": False}),
        (SINGLE, {"position": 0}),
        (GONE, None),
        (KEPT, {"y": 2}),
        (NEW, {"pos": 1.0e10, "since": LONG_MIN}),
        # Control: a task that built ORDER in the PATCH body's key order asks for other bytes, which
        # nobody wrote; had the daemon written the body's order, ORDER above would read stale.
        (T.jmap([("protocol", "1"), ("db", "shop"), ("table", "orders")]), None),
    ]
    asked = [p for p, _ in expected]
    offsets, partitions = java_read(java_oracle, kafka_broker, topic, altered, asked, n)
    # Type-exact: 0 stays a Long, 1.0E10 a Double, in the bytes the task itself looks up.
    assert [canon(from_java(o)) for o in offsets] == [canon(o) for _, o in expected]
    assert sorted(canon(from_java(p)) for p in partitions) == sorted(
        canon(from_java(p)) for p, o in expected[:-1] if o is not None
    )
    # The daemon's own view agrees with Java's.
    assert daemon_offsets(client.offsets(altered)) == {
        canon(from_java(p)): canon(o) for p, o in expected[:-1] if o is not None
    }

    offsets, partitions = java_read(java_oracle, kafka_broker, topic, reset, to_reset, n)
    assert offsets == [None, None, None]
    assert partitions == []
    assert client.offsets(reset) == []


# --- (d) every record the daemon writes lands where Java's producer would put it -----------------------


def end_offsets(bootstrap: str, topic: str, n: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("hwm"), "log_level": 0})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(n)}
    finally:
        consumer.close()


@pytest.mark.slow
def test_d_daemon_records_use_javas_partitioner_no_headers_and_true_null_tombstones(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic, n = kafka_broker.unique_topic("compat-d"), 13
    altered, reset = unique("place-alter"), unique("place-reset")
    existing = [T.jmap([("table", f"t{i}"), ("db", "shop")]) for i in range(20)]
    existing += [T.jmap([("filename", f"/in/{i}.txt")]) for i in range(10)]
    java_write(java_oracle, kafka_broker, topic, altered, [(p, T.jmap({"pos": T.long(1)})) for p in existing], n)
    java_write(
        java_oracle,
        kafka_broker,
        topic,
        reset,
        [(T.jmap({"file": f"r{i}"}), T.jmap({"pos": T.long(i)})) for i in range(15)],
        n,
    )
    java_ends = end_offsets(kafka_broker.bootstrap, topic, n)  # exact: Java wrote one record per batch
    assert sum(java_ends.values()) == 45

    daemon = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, n))
    client = daemon.client()
    changes = [{"partition": dict(reversed(list(from_java(p).items()))), "offset": {"pos": 2}} for p in existing]
    changes += [{"partition": {"new": i, "kind": "x"}, "offset": {"pos": 3.5}} for i in range(10)]
    planned = client.alter(altered, {"offsets": changes}, dry_run=True)["records"]
    planned += client.reset(reset, dry_run=True)["records"]
    client.alter(altered, {"offsets": changes})
    client.reset(reset)
    assert len(planned) == 30 + 10 + 15

    records = read_topic(kafka_broker.bootstrap, topic, expect=45 + len(planned))
    java_records = [r for r in records if r.offset < java_ends[r.partition]]
    daemon_records = [r for r in records if r.offset >= java_ends[r.partition]]
    assert len(java_records) == 45
    assert Counter((r.key, r.value) for r in daemon_records) == Counter(
        (p["key"].encode(), None if p["value"] is None else p["value"].encode()) for p in planned
    )

    keys = [r.key for r in daemon_records if r.key is not None]
    assert len(keys) == len(daemon_records), "the daemon never writes a null key"
    java_partitions = java_oracle.partition(keys, n)
    assert [r.partition for r in daemon_records] == java_partitions
    assert len(set(java_partitions)) >= 6, "the keys should spread over the topic, or placement proves little"
    planned_java = java_oracle.partition([p["key"].encode() for p in planned], n)
    assert [p["kafka_partition"] for p in planned] == planned_java

    assert all(not r.headers for r in daemon_records), [r.headers for r in daemon_records if r.headers]
    tombstones = [r for r in daemon_records if r.value is None]
    assert len(tombstones) == 15
    assert all(r.value is not None and r.value != b"" for r in daemon_records if r not in tombstones)
    # Altering an existing partition reuses Java's exact key bytes; new partitions get new keys.
    java_keys = {r.key for r in java_records}
    alter_keys = [r.key for r in daemon_records if r.value is not None]
    assert sum(k in java_keys for k in alter_keys) == 30
    assert sum(k not in java_keys for k in alter_keys) == 10
    assert {r.key for r in tombstones} <= java_keys
