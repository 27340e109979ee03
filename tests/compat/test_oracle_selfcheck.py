"""The Java oracle itself answers what Apache Kafka is known to answer.

Every compatibility test trusts ``JavaOracle``; these checks earn that trust against facts recorded in
docs/protocol.md (§1.3-§1.7, §2, §6) and against a real broker, so a broken harness
(wrong jars, wrong JDK, a typed-value mix-up, a store configured unlike a worker) fails here, loudly,
instead of silently "confirming" our own encoder.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from tests.fixtures.broker import TansuBroker
from tests.oracle import JavaError, JavaException, JavaOracle, OracleError, OracleTimeout, typed

pytestmark = pytest.mark.jvm

T = typed

# §1.7 vectors. Built from the doc's notation: \uXXXX here is the six literal characters Jackson writes.
STRINGS = T.jmap(
    [
        ("s1", "café 日本 \U0001f600"),
        ("s2", "tab\tnl\ncr\rbs\bff\f"),
        ("s3", '\x01\x1f\x7f\u2028/"\\'),
    ]
)
STRINGS_JSON = (
    '{"s1":"café 日本 \\uD83D\\uDE00","s2":"tab\\tnl\\ncr\\rbs\\bff\\f","s3":"\\u0001\\u001F\x7f\u2028/\\"\\\\"}'
).encode()

SCALARS = T.jmap(
    [
        ("d1", T.double(1.0)),
        ("d2", T.double(1e10)),
        ("d3", T.double(1e-5)),
        ("d4", T.double(0.001)),
        ("d5", T.double(1234567.0)),
        ("d6", T.double(1e7)),
        ("d7", T.double(100.5)),
        ("d8", T.double(0.1 + 0.2)),
        ("d9", T.double(-0.0)),
        ("nan", T.double(float("nan"))),
        ("inf", T.double(float("inf"))),
        ("f1", T.float32(1.1)),
        ("i", T.integer(42)),
        ("l", T.long(9007199254740993)),
        ("b", True),
        ("n", None),
        ("bytes", T.binary(bytes([1, 2, 3, 255]))),
    ]
)
SCALARS_JSON = (
    b'{"d1":1.0,"d2":1.0E10,"d3":1.0E-5,"d4":0.001,"d5":1234567.0,"d6":1.0E7,"d7":100.5,'
    b'"d8":0.30000000000000004,"d9":-0.0,"nan":"NaN","inf":"Infinity","f1":1.1,"i":42,'
    b'"l":9007199254740993,"b":true,"n":null,"bytes":"AQID/w=="}'
)

# Doubles whose Double.toString changed in JDK 19 (shortest repr), per §1.3.
JDK_DEPENDENT_DOUBLES = T.jmap([("a", T.double(1e23)), ("b", T.double(3.342741096160404e17))])
JDK17_DOUBLES_JSON = b'{"a":9.999999999999999E22,"b":3.3427410961604038E17}'
JDK19_PLUS_DOUBLES_JSON = b'{"a":1.0E23,"b":3.342741096160404E17}'

JDBC_ENTRIES = [("table", "orders"), ("db", "shop"), ("protocol", "1")]


@pytest.fixture(params=["java_oracle", "java_oracle_modern"])
def oracle(request: pytest.FixtureRequest) -> JavaOracle:
    """The oracle on JDK 17 and on JDK 25: facts that must hold on both are checked on both."""
    oracle = request.getfixturevalue(request.param)
    assert isinstance(oracle, JavaOracle)
    return oracle


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def key_bytes(oracle: JavaOracle, connector: str, partition: Any) -> bytes:
    """The record key OffsetStorageWriter writes: JsonConverter over [connector, partition]."""
    (raw,) = oracle.json_encode([T.jlist([connector, partition])])
    assert raw is not None
    return raw


def read_raw(bootstrap: str, topic: str, done: Callable[[list[Any]], bool], timeout_s: float = 20) -> list[Any]:
    """Consume every partition from the start (assign, no group protocol) until ``done`` says enough."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("selfcheck"), "enable.auto.commit": False, "log_level": 0}
    )
    try:
        n = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(n)])
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while not done(records) and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                records.append(msg)
        return records
    finally:
        consumer.close()


# --- JsonConverter bytes ------------------------------------------------------------------------


@pytest.mark.slow
def test_jackson_string_escaping_matches_the_documented_vector(oracle: JavaOracle) -> None:
    assert oracle.json_encode([STRINGS]) == [STRINGS_JSON]


def test_scalar_types_serialize_as_documented(oracle: JavaOracle) -> None:
    assert oracle.json_encode([SCALARS]) == [SCALARS_JSON]


def test_double_formatting_depends_on_the_jdk(java_oracle: JavaOracle, java_oracle_modern: JavaOracle) -> None:
    assert java_oracle.java_version.startswith("17.")
    assert java_oracle_modern.java_version.startswith("25.")
    assert java_oracle.json_encode([JDK_DEPENDENT_DOUBLES]) == [JDK17_DOUBLES_JSON]
    assert java_oracle_modern.json_encode([JDK_DEPENDENT_DOUBLES]) == [JDK19_PLUS_DOUBLES_JSON]


def test_offset_key_and_value_bytes_match_the_documented_vectors(oracle: JavaOracle) -> None:
    key = key_bytes(oracle, "local-file-source", T.jmap({"filename": "/tmp/test.txt"}))
    assert key.hex() == (
        "5b226c6f63616c2d66696c652d736f75726365222c7b2266696c656e616d65223a222f746d702f746573742e747874227d5d"
    )
    value = bytes.fromhex("7b22706f736974696f6e223a313233347d")
    assert oracle.json_encode([T.jmap({"position": T.long(1234)})]) == [value]


def test_a_null_value_encodes_to_null_bytes_a_tombstone(oracle: JavaOracle) -> None:
    assert oracle.json_encode([None]) == [None]


def test_integer_width_does_not_show_in_the_bytes(oracle: JavaOracle) -> None:
    values = [T.jmap({"p": t}) for t in (T.byte(7), T.short(7), T.integer(7), T.long(7))]
    assert oracle.json_encode(values) == [b'{"p":7}'] * 4


def test_unsupported_values_are_rejected_by_java_not_by_the_harness(java_oracle: JavaOracle) -> None:
    # A map with a non-String key is legal for JsonConverter (it becomes an array of pairs) ...
    assert java_oracle.json_encode([T.jmap([(T.long(1), "x")])]) == [b'[[1,"x"]]']
    # ... and an unknown typed tag is the harness refusing, reported as such.
    with pytest.raises(JavaException) as info:
        java_oracle.json_encode([{"no-such-tag": 1}])
    assert info.value.error.java_class == "python:RequestError"


def test_lone_surrogates_are_escaped_uppercase(java_oracle: JavaOracle) -> None:
    # Observed (not in the doc): a String holding half a surrogate pair is written as an escape too.
    assert java_oracle.json_encode([T.jmap({"a": "x\ud800y"})]) == [b'{"a":"x\\uD800y"}']


def test_python_values_travel_with_connects_default_types(java_oracle: JavaOracle) -> None:
    value = {"a": 1, "b": [1.5, None, True], "c": b"\x01", "d": "s"}
    (raw,) = java_oracle.json_encode([T.from_python(value)])
    assert raw == b'{"a":1,"b":[1.5,null,true],"c":"AQ==","d":"s"}'
    (back,) = java_oracle.json_decode([raw])
    # bytes come back as their base64 text: schemaless JSON has no binary type.
    assert T.to_python(back) == {"a": 1, "b": [1.5, None, True], "c": "AQ==", "d": "s"}


# --- map iteration order (§1.4) -------------------------------------------------------------------


def test_map_key_order_follows_the_java_map_implementation(
    java_oracle: JavaOracle, java_oracle_modern: JavaOracle
) -> None:
    linked = b'{"table":"orders","db":"shop","protocol":"1"}'
    hashed = b'{"protocol":"1","table":"orders","db":"shop"}'
    for o in (java_oracle, java_oracle_modern):
        assert o.json_encode(
            [T.jmap(JDBC_ENTRIES, "linked"), T.jmap(JDBC_ENTRIES, "hash"), T.jmap(JDBC_ENTRIES, "tree")]
        ) == [linked, hashed, b'{"db":"shop","protocol":"1","table":"orders"}']
    # new HashMap<>(other): presizing changed in JDK 19, and with it the order.
    assert java_oracle.json_encode([T.jmap(JDBC_ENTRIES, "hash_copy")]) == [hashed]
    assert java_oracle_modern.json_encode([T.jmap(JDBC_ENTRIES, "hash_copy")]) == [linked]


def test_the_two_orders_of_one_partition_land_in_the_documented_partitions(java_oracle: JavaOracle) -> None:
    linked = key_bytes(java_oracle, "jdbc", T.jmap(JDBC_ENTRIES, "linked"))
    hashed = key_bytes(java_oracle, "jdbc", T.jmap(JDBC_ENTRIES, "hash"))
    assert linked == b'["jdbc",{"table":"orders","db":"shop","protocol":"1"}]'
    assert java_oracle.partition([linked, hashed], 25) == [19, 8]


def test_decoding_builds_a_hashmap_whatever_order_the_bytes_had(java_oracle: JavaOracle) -> None:
    (decoded,) = java_oracle.json_decode([b'{"table":"orders","db":"shop","protocol":"1"}'])
    assert not isinstance(decoded, JavaError)
    assert decoded["impl"] == "hash"
    assert list(T.to_python(decoded)) == ["protocol", "table", "db"]


# --- JsonConverter parsing (§1.6) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b' { "a" : 1 } ', {"a": 1}),  # whitespace accepted
        (b'{"a":1} trailing', {"a": 1}),  # trailing garbage after the first value ignored
        (b'{"a":1,"a":2}', {"a": 2}),  # duplicate key: last wins
        (b"007", 7),  # leading zeros allowed
        (b"", None),  # empty input is null
        (None, None),  # null bytes are null
        (b'{"i":1,"f":2.5}', {"i": 1, "f": 2.5}),
        # Observed (not in the doc): out-of-range integers are not rejected; BigInteger.longValue()
        # keeps the low 64 bits, and a too-large double becomes Infinity.
        (b"18446744073709551617", 1),
        (b"1e400", float("inf")),
    ],
)
def test_json_decoding_is_lenient_as_documented(java_oracle: JavaOracle, raw: bytes | None, expected: Any) -> None:
    (decoded,) = java_oracle.json_decode([raw])
    assert T.to_python(decoded) == expected


def test_json_decoding_types_integers_as_long_and_fractions_as_double(java_oracle: JavaOracle) -> None:
    (decoded,) = java_oracle.json_decode([b'{"i":1,"f":2.5}'])
    assert not isinstance(decoded, JavaError)
    assert dict(decoded["map"]) == {"i": {"long": "1"}, "f": {"double": (2.5).hex()}}


def test_non_json_fails_with_javas_exception(java_oracle: JavaOracle) -> None:
    (err,) = java_oracle.json_decode([b"not json"])
    assert isinstance(err, JavaError)
    assert err.java_class == "org.apache.kafka.connect.errors.DataException"
    assert "JsonParseException" in str(err)


def test_java_errors_mentioning_a_lone_surrogate_still_arrive_whole(java_oracle: JavaOracle) -> None:
    # CESU-8 bytes outside a string: Jackson names the char U+D800 in its message, which JPype
    # cannot hand to Python directly; the harness must still report Java's exception chain.
    (err,) = java_oracle.json_decode([b"{\xed\xa0\x80:1}"])
    assert isinstance(err, JavaError)
    assert [e.java_class for e in err.chain()] == [
        "org.apache.kafka.connect.errors.DataException",
        "org.apache.kafka.common.errors.SerializationException",
        "com.fasterxml.jackson.core.JsonParseException",
    ]
    assert "Unexpected character ('\ud800'" in str(err.chain()[-1].message)


# --- murmur2 and the partition (§0.6) ------------------------------------------------------------------


def test_murmur2_matches_the_published_vectors(java_oracle: JavaOracle) -> None:
    kafka, amqp, gib = java_oracle.murmur2([b"kafka", b"amqp", b"giberish123456789"])
    assert (kafka, amqp, gib & 0x7FFFFFFF) == (-798503068, 767747138, 257239820)


def test_partition_is_positive_murmur2_modulo_the_count(java_oracle: JavaOracle) -> None:
    keys = [b'["local-file-source",{"filename":"/tmp/test.txt"}]', b'["inventory-connector",{"server":"dbserver1"}]']
    assert java_oracle.partition(keys, 25) == [21, 11]
    assert [(h & 0x7FFFFFFF) % 25 for h in java_oracle.murmur2(keys)] == [21, 11]


# --- KafkaOffsetBackingStore against Tansu (§2) ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.kafka
def test_offsets_written_by_java_read_back_and_sit_in_the_murmur2_partition(
    java_oracle: JavaOracle, kafka_broker: TansuBroker
) -> None:
    topic, connector, n = unique("oracle-offsets"), unique("conn"), 5
    file_part = T.jmap({"filename": "/data/in.txt"})
    jdbc_part = T.jmap(JDBC_ENTRIES, "linked")
    file_off = T.jmap({"position": T.long(151)})
    jdbc_off = T.jmap([("ts", T.long(1530168941)), ("ratio", T.double(0.5))])
    java_oracle.offsets_write(
        kafka_broker.bootstrap, topic, connector, [(file_part, file_off), (jdbc_part, jdbc_off)], partitions=n
    )

    offsets, listed = java_oracle.offsets_read(
        kafka_broker.bootstrap,
        topic,
        connector,
        [file_part, jdbc_part, T.jmap(JDBC_ENTRIES, "hash"), T.jmap({"filename": "/other"})],
    )
    # Lookups are by exact key bytes: the HashMap order of the same entries is a different key.
    assert [T.to_python(o) for o in offsets] == [{"position": 151}, {"ts": 1530168941, "ratio": 0.5}, None, None]
    # connectorPartitions holds what Connect deserialized: HashMaps, whatever order was written.
    assert {p["impl"] for p in listed} == {"hash"}
    assert sorted(list(T.to_python(p).items()) for p in listed) == [
        [("filename", "/data/in.txt")],
        [("protocol", "1"), ("table", "orders"), ("db", "shop")],
    ]

    # The raw records: exact key/value bytes, in the partition Java's producer computes, no headers.
    want = {
        key_bytes(java_oracle, connector, file_part): b'{"position":151}',
        key_bytes(java_oracle, connector, jdbc_part): b'{"ts":1530168941,"ratio":0.5}',
    }
    records = read_raw(kafka_broker.bootstrap, topic, lambda rs: {r.key() for r in rs} >= set(want))
    assert {r.key(): r.value() for r in records} == want
    murmur = dict(zip(want, java_oracle.murmur2(list(want)), strict=True))
    for r in records:
        assert r.partition() == (murmur[r.key()] & 0x7FFFFFFF) % n
        assert r.partition() == java_oracle.partition([r.key()], n)[0]
        assert not r.headers()


@pytest.mark.slow
@pytest.mark.kafka
def test_a_null_offset_is_a_tombstone_that_removes_the_partition(
    java_oracle: JavaOracle, kafka_broker: TansuBroker
) -> None:
    topic, connector = unique("oracle-tombstone"), unique("conn")
    part = T.jmap({"server": "db1"})
    java_oracle.offsets_write(
        kafka_broker.bootstrap, topic, connector, [(part, T.jmap({"pos": T.long(3)}))], partitions=3
    )
    java_oracle.offsets_write(kafka_broker.bootstrap, topic, connector, [(part, None)], partitions=3)
    assert java_oracle.offsets_read(kafka_broker.bootstrap, topic, connector, [part]) == ([None], [])
    key = key_bytes(java_oracle, connector, part)
    records = read_raw(kafka_broker.bootstrap, topic, lambda rs: len(rs) >= 2)
    assert [(r.key(), r.value()) for r in records] == [(key, b'{"pos":3}'), (key, None)]


# --- a real connector in Debezium's embedded engine ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.kafka
def test_filestream_source_emits_the_lines_and_commits_its_byte_position(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, tmp_path: Path
) -> None:
    lines = ["alpha", "beta", "gamma", "delta", "epsilon"]
    src = tmp_path / "input.txt"
    src.write_text("".join(f"{line}\n" for line in lines), encoding="ascii")
    topic, connector = unique("oracle-filestream"), unique("file-src")

    emitted = java_oracle.filestream_run(kafka_broker.bootstrap, topic, connector, str(src), expect_lines=5)

    assert emitted == lines
    size = src.stat().st_size  # ASCII: FileStreamSourceTask counts chars, equal to bytes here
    key = f'["{connector}",{{"filename":"{src}"}}]'.encode()
    value = f'{{"position":{size}}}'.encode()
    records = read_raw(kafka_broker.bootstrap, topic, lambda rs: any((r.key(), r.value()) == (key, value) for r in rs))
    assert {(r.key(), r.value()) for r in records} <= {(key, value), *((key, r.value()) for r in records)}
    assert {r.key() for r in records} == {key}
    assert records[-1].value() == value
    assert {r.partition() for r in records} == {java_oracle.partition([key], 25)[0]}
    # And Java's own view after a read to the end agrees.
    offsets, _ = java_oracle.offsets_read(kafka_broker.bootstrap, topic, connector, [T.jmap({"filename": str(src)})])
    assert [T.to_python(o) for o in offsets] == [{"position": size}]


# --- FileOffsetBackingStore (§6) --------------------------------------------------------------------


def test_standalone_file_store_round_trips_through_javas_serialized_hashmap(
    java_oracle: JavaOracle, tmp_path: Path
) -> None:
    path = str(tmp_path / "connect.offsets")
    part = T.jmap({"filename": "/data/in.txt"})
    java_oracle.file_offsets_write(path, "file-src", [(part, T.jmap({"position": T.long(151)}))])
    data = Path(path).read_bytes()
    assert data.startswith(bytes.fromhex("aced0005737200116a6176612e7574696c2e486173684d6170"))  # HashMap
    assert b'["file-src",{"filename":"/data/in.txt"}]' in data and b'{"position":151}' in data
    offsets, listed = java_oracle.file_offsets_read(path, "file-src", [part])
    assert [T.to_python(o) for o in offsets] == [{"position": 151}]
    assert [T.to_python(p) for p in listed] == [{"filename": "/data/in.txt"}]


def test_the_offset_writer_rejects_nested_values_as_connect_does(java_oracle: JavaOracle, tmp_path: Path) -> None:
    nested = T.jmap({"inner": T.jmap({"x": T.long(1)})})
    with pytest.raises(JavaException) as info:
        java_oracle.file_offsets_write(str(tmp_path / "o.offsets"), "c", [(T.jmap({"p": "1"}), nested)])
    assert info.value.error.java_class == "org.apache.kafka.connect.errors.DataException"
    assert "Offsets may only contain primitive types as values" in str(info.value.error.message)


# --- the harness fails loudly and recovers ---------------------------------------------------------------


@pytest.mark.slow
def test_a_hung_or_crashed_jvm_is_a_clear_error_and_the_next_request_gets_a_fresh_jvm() -> None:
    with JavaOracle() as o:
        # A Java call past its server-side bound: answered as an error, then that JVM is replaced.
        with pytest.raises(JavaException, match=r"did not finish within 0\.5s"):
            o.request("debug_sleep", {"seconds": 60, "bound_s": 0.5})
        assert o.murmur2([b"kafka"]) == [-798503068]
        # No answer at all before the client's deadline: the JVM is killed, the log tail is quoted.
        with pytest.raises(OracleTimeout, match=r"no answer from the JVM within 1\.5s") as timeout:
            o.request("debug_sleep", {"seconds": 60, "bound_s": 120}, timeout_s=1.5)
        assert "last" in str(timeout.value) and "JVM log" in str(timeout.value)
        assert o.murmur2([b"amqp"]) == [767747138]
        # The JVM dies without answering.
        with pytest.raises(OracleError, match=r"exited \(rc=7\) without answering"):
            o.request("debug_exit", {"code": 7})
        assert o.murmur2([b"kafka"]) == [-798503068]
        assert len(o.starts) == 4
