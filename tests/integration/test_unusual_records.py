"""Unusual records in an offsets topic: what the daemon's GET, ``?as_of=``, PATCH, DELETE and KIP-875
export make of them, each case decided by Apache Kafka's own classes reading the same topic on Tansu.

Java's side: ``connector_store_read`` is Connect's GET (``Worker.sourceConnectorOffsets``:
``connectorPartitions``, then ``OffsetStorageReaderImpl.offsets``) plus a task's lookup of its own key
bytes; ``offset_check`` is the reader's rule for one value (``JsonConverter``, then
``OffsetUtils.validateFormat``); ``json_reencode`` is the converter's write-then-read round trip that
Connect's PATCH puts every partition and offset through (``Worker.normalizeSourceConnectorOffsets``).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.client.history import HistoryClient
from emulator.codec.murmur2 import partition_for
from tests.fixtures.broker import TansuBroker
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.integration.connect_helpers import (
    canon,
    eventually,
    from_java,
    kafka_daemon_args,
    read_topic,
    status,
    unique,
)
from tests.oracle import JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]

PARTITIONS = 5


def keyed(connector: str, text: str) -> bytes:
    """A key exactly as given (``C`` stands for the connector's name)."""
    return text.replace("C", connector).encode()


def topic_with(broker: TansuBroker, records: list[tuple[bytes, bytes | None]]) -> str:
    """A new compacted offsets topic holding ``records`` as given, placed by murmur2 as Java places them."""
    topic = broker.unique_topic("unusual")
    broker.create_topic(topic, PARTITIONS, {"cleanup.policy": "compact"})
    if records:
        broker.produce_raw(topic, [(k, v, partition_for(k, PARTITIONS)) for k, v in records])
    return topic


def daemon_on(factory: DaemonFactory, broker: TansuBroker, topic: str, applied: int) -> DaemonProcess:
    daemon = factory(*kafka_daemon_args(broker.bootstrap, topic, PARTITIONS))
    eventually(lambda: status(daemon.url)["view"], lambda v: v["records_applied"] >= applied)
    return daemon


def daemon_get(daemon: DaemonProcess, connector: str) -> dict[str, str]:
    """The daemon's GET as ``{canon(partition): canon(offset)}``."""
    response = httpx.get(f"{daemon.url}/connectors/{connector}/offsets", timeout=10)
    assert response.status_code == 200, response.text
    return {canon(row["partition"]): canon(row["offset"]) for row in response.json()["offsets"]}


def java_get(
    oracle: JavaOracle, broker: TansuBroker, topic: str, connector: str, asks: list[dict[str, Any]] | None = None
) -> tuple[dict[str, str], list[Any]]:
    """Connect's GET as ``{canon(partition): canon(offset)}``, and what a task whose connector builds
    each of ``asks`` as a ``HashMap`` reads (the value's bytes parsed, ``None`` when it reads none)."""
    typed_asks = [T.from_python(partition, "hash") for partition in asks or []]
    read = oracle.connector_store_read(
        broker.bootstrap, topic, connector, partitions=typed_asks, num_partitions=PARTITIONS
    )
    listing = {canon(from_java(p)): canon(from_java(o)) for p, o in read["offsets"]}
    reads = [None if look["value"] is None else json.loads(from_java(look["value"])) for look in read["lookups"]]
    return listing, reads


def patch(daemon: DaemonProcess, connector: str, body: str, **params: str) -> dict[str, Any]:
    response = httpx.patch(
        f"{daemon.url}/connectors/{connector}/offsets",
        content=body,
        headers={"content-type": "application/json"},
        params=params,
        timeout=30,
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def export_kip875(daemon: DaemonProcess, path: Path) -> tuple[Any, str]:
    """``connect-offsets export --to kip875:PATH`` from the daemon: the file's document and stderr."""
    done = run_cli("export", "--url", daemon.url, "--to", f"kip875:{path}")
    assert done.returncode == 0, done.stderr
    return json.loads(path.read_bytes()), done.stderr


def mark() -> int:
    """A time strictly between what was archived before and what is written after."""
    time.sleep(0.05)
    at = time.time_ns() // 1_000_000
    time.sleep(0.05)
    return at


# --- PATCH and DELETE of a partition held only under keys no converter writes --------------------------

# (connector prefix, key as some other producer wrote it, the partition as Connect reads it back)
FOREIGN_KEYS = [
    ("ws", '["C", {"a": 1}]', {"a": 1}),
    ("lz", '["C",{"a":007}]', {"a": 7}),
    ("esc", '["C",{"\\u0061":"x"}]', {"a": "x"}),
    ("dup", '["C",{"a":1,"a":2}]', {"a": 2}),
    ("big", '["C",{"a":18446744073709551617}]', {"a": 1}),
    ("trail", '["C",{"a":1}] x', {"a": 1}),
]


@pytest.mark.slow  # a fresh Java store per connector, twice
def test_a_patch_of_a_partition_held_only_under_foreign_keys_reaches_connects_get_and_its_tasks(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """Connect lists such a partition with ``null`` and no task reads it; Connect's PATCH writes the key
    its GET looks up, so after it both read the new offset. The daemon's PATCH writes every live key of
    the partition (they stay consistent) and, as none of them is one a task reads, Connect's key too."""
    names = {prefix: unique(prefix) for prefix, _, _ in FOREIGN_KEYS}
    records = [(keyed(names[prefix], key), b'{"pos":1}') for prefix, key, _ in FOREIGN_KEYS]
    topic = topic_with(kafka_broker, records)
    daemon = daemon_on(daemon_factory, kafka_broker, topic, len(records))

    for prefix, key, partition in FOREIGN_KEYS:
        c = names[prefix]
        assert daemon_get(daemon, c) == {canon(partition): canon(None)}, "listed with null, as Connect lists it"
        body = json.dumps({"offsets": [{"partition": partition, "offset": {"pos": 100}}]})
        planned = patch(daemon, c, body, dry_run="true")["records"]
        connects_key = json.dumps([c, partition], separators=(",", ":"))
        assert sorted((r["key"], r["existing_key"]) for r in planned) == sorted(
            [(keyed(c, key).decode(), True), (connects_key, False)]
        )
        patch(daemon, c, body)

    for prefix, _, partition in FOREIGN_KEYS:
        c = names[prefix]
        connect_get, task_reads = java_get(java_oracle, kafka_broker, topic, c, [partition])
        assert connect_get == {canon(partition): canon({"pos": 100})}, prefix
        assert task_reads == [{"pos": 100}], prefix
        assert daemon_get(daemon, c) == connect_get, prefix

    # A reset tombstones every key the partition has (the foreign one and Connect's): Connect's listing
    # drops the partition, and a task reads nothing.
    ws = names["ws"]
    response = httpx.delete(f"{daemon.url}/connectors/{ws}/offsets", timeout=30)
    assert response.status_code == 200, response.text
    assert java_get(java_oracle, kafka_broker, topic, ws, [{"a": 1}]) == ({}, [None])
    assert daemon_get(daemon, ws) == {}


def test_a_reset_of_a_partition_held_only_under_a_foreign_key_leaves_connect_nothing_to_list(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """Connect's DELETE writes a tombstone under its own key, which drops the partition from its listing
    (the set removes it by ``Map.equals``); the daemon's tombstones the foreign key itself, with the same
    result for Connect's GET, and the bytes no longer hold the old offset for anyone."""
    c = unique("fdel")
    topic = topic_with(kafka_broker, [(keyed(c, '["C", {"a": 1}]'), b'{"pos":1}')])
    daemon = daemon_on(daemon_factory, kafka_broker, topic, 1)
    assert java_get(java_oracle, kafka_broker, topic, c)[0] == {canon({"a": 1}): canon(None)}

    response = httpx.delete(f"{daemon.url}/connectors/{c}/offsets", timeout=30)
    assert response.status_code == 200, response.text
    assert java_get(java_oracle, kafka_broker, topic, c)[0] == {} == daemon_get(daemon, c)


# --- a new partition holding -0.0 ------------------------------------------------------------------------


def test_a_patch_creating_a_partition_with_negative_zero_writes_the_bytes_connects_patch_writes(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """Connect's REST parses ``-0.0`` as a double -0.0 and normalizes each map through its converter
    (write, then read back: ``0.0``), so its PATCH writes ``["c",{"a":0.0}]`` -> ``{"pos":0.0}``. A key
    with ``-0.0`` in it is one Connect's GET never finds (it looks up what it reads back)."""
    c = unique("nz")
    topic = topic_with(kafka_broker, [])
    daemon = daemon_on(daemon_factory, kafka_broker, topic, 0)
    connect_key, connect_value = java_oracle.json_reencode([keyed(c, '["C",{"a":-0.0}]'), b'{"pos":-0.0}'])
    assert (connect_key, connect_value) == (keyed(c, '["C",{"a":0.0}]'), b'{"pos":0.0}')

    patch(daemon, c, '{"offsets":[{"partition":{"a":-0.0},"offset":{"pos":-0.0}}]}', create="true")

    written = read_topic(kafka_broker.bootstrap, topic, expect=1)
    assert [(r.key, r.value) for r in written] == [(connect_key, connect_value)]
    connect_get, _ = java_get(java_oracle, kafka_broker, topic, c)
    assert connect_get == {canon({"a": 0.0}): canon({"pos": 0.0})}
    assert daemon_get(daemon, c) == connect_get


# --- partitions holding nested maps or lists ---------------------------------------------------------------


def test_partitions_holding_a_nested_map_or_list_are_left_out_of_get_as_of_and_export_as_connects_get_leaves_them(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """``OffsetStorageReaderImpl.offsets`` runs ``validateFormat`` on each listed partition and leaves out
    (logging CRITICAL) one holding a map or a list: no task and no GET gets its offset. The daemon's GET
    leaves it out too (it served ``{"pos":9}`` and ``{"pos":10}``), counts and logs it; ``?as_of=`` answers
    the same, and a KIP-875 export leaves it out (docs/protocol.md §8)."""
    c = unique("nest")
    records = [
        (keyed(c, '["C",{"a":{"b":1}}]'), b'{"pos":9}'),
        (keyed(c, '["C",{"a":[1]}]'), b'{"pos":10}'),
        (keyed(c, '["C",{"ok":1}]'), b'{"pos":11}'),
    ]
    topic = topic_with(kafka_broker, records)
    daemon = daemon_on(daemon_factory, kafka_broker, topic, len(records))

    connect_get, _ = java_get(java_oracle, kafka_broker, topic, c)
    assert connect_get == {canon({"ok": 1}): canon({"pos": 11})}

    expected = connect_get
    assert daemon_get(daemon, c) == expected
    with HistoryClient(daemon.url) as history:
        as_of = history.offsets_as_of(c, as_of="now")
    assert {canon(row["partition"]): canon(row["offset"]) for row in as_of} == expected
    assert status(daemon.url)["view"]["unparseable_values"] == 2
    assert "CRITICAL: Failed to serialize partition key" in daemon.log_path.read_text()

    document, notes = export_kip875(daemon, tmp_path / "nest.json")
    assert document == {c: {"offsets": [{"partition": {"ok": 1}, "offset": {"pos": 11}}]}}
    assert "2 record(s) whose partition is not a flat map of primitive values" in notes


# --- ?as_of= applies the live GET's rule ------------------------------------------------------------------

UNREADABLE_VALUES = [b"5", b'"str"', b"true", b"[]", b'{"pos":null,"x":[]}']


def test_as_of_shows_null_for_a_value_connect_cannot_read_as_the_live_get_did_then(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """A partition's value goes ``{"pos":1}``, then something Connect's reader refuses, then
    ``{"pos":2}``: asked for the middle time, ``?as_of=`` answers what the live GET answered then."""
    names = [unique("rb") for _ in UNREADABLE_VALUES]
    key = '["C",{"a":"1"}]'
    topic = topic_with(kafka_broker, [(keyed(c, key), b'{"pos":1}') for c in names])
    daemon = daemon_on(daemon_factory, kafka_broker, topic, len(names))
    assert [answer["readable"] for answer in java_oracle.offset_check(UNREADABLE_VALUES)] == [False] * len(names)

    kafka_broker.produce_raw(
        topic,
        [
            (keyed(c, key), v, partition_for(keyed(c, key), PARTITIONS))
            for c, v in zip(names, UNREADABLE_VALUES, strict=True)
        ],
    )
    shown_then = {canon({"a": "1"}): canon(None)}
    for c in names:
        assert eventually(lambda c=c: daemon_get(daemon, c), lambda rows: rows == shown_then) == shown_then  # type: ignore[misc]
    then = mark()
    kafka_broker.produce_raw(
        topic, [(keyed(c, key), b'{"pos":2}', partition_for(keyed(c, key), PARTITIONS)) for c in names]
    )
    for c in names:
        eventually(lambda c=c: daemon_get(daemon, c), lambda rows: rows == {canon({"a": "1"}): canon({"pos": 2})})  # type: ignore[misc]

    with HistoryClient(daemon.url) as history:
        for c, value in zip(names, UNREADABLE_VALUES, strict=True):
            past = {canon(r["partition"]): canon(r["offset"]) for r in history.offsets_as_of(c, as_of=then)}
            assert past == shown_then, value


# --- KIP-875 export agrees with GET --------------------------------------------------------------------------


def test_a_kip875_export_holds_no_offset_for_a_partition_get_shows_as_null(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """A partition held only under a key no converter writes shows ``null`` in Connect's GET and the
    daemon's; the file holds no offset for it either (importing or PATCHing the file would make every
    task read one for the first time), and a note counts what was left out."""
    fx = unique("fx")
    records = [(keyed(fx, '["C", {"a": 1}]'), b'{"pos":1}'), (keyed(fx, '["C",{"a":2}]'), b'{"pos":2}')]
    topic = topic_with(kafka_broker, records)
    daemon = daemon_on(daemon_factory, kafka_broker, topic, len(records))
    shown = {canon({"a": 1}): canon(None), canon({"a": 2}): canon({"pos": 2})}
    assert java_get(java_oracle, kafka_broker, topic, fx)[0] == shown == daemon_get(daemon, fx)

    document, notes = export_kip875(daemon, tmp_path / "fx.json")
    assert document == {fx: {"offsets": [{"partition": {"a": 2}, "offset": {"pos": 2}}]}}
    assert "1 record(s) under keys in bytes no converter writes" in notes


def test_a_number_beyond_a_double_does_not_abort_a_kip875_export(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """Java reads ``1e400`` as a double Infinity. In a key it makes bytes no converter writes (Connect
    writes the string ``"Infinity"`` back), so GET shows no offset for it and the file holds none. In an
    offset, KIP-875 JSON could carry it only as the string ``"Infinity"``, which a PATCH of the file
    writes as a string where tasks read a double: left out with a note. The rest is exported."""
    inf = unique("infk")
    records = [
        (keyed(inf, '["C",{"a":1e400}]'), b'{"pos":1}'),
        (keyed(inf, '["C",{"a":1}]'), b'{"pos":1e400}'),
        (keyed(inf, '["C",{"a":2}]'), b'{"pos":2}'),
    ]
    topic = topic_with(kafka_broker, records)
    daemon = daemon_on(daemon_factory, kafka_broker, topic, len(records))
    infinite, as_string = java_oracle.offset_check([b'{"pos":1e400}', b'{"pos":"Infinity"}'])
    assert [entry[1]["class"] for entry in infinite["entries"]] == ["java.lang.Double"]
    assert [entry[1]["class"] for entry in as_string["entries"]] == ["java.lang.String"]
    assert java_oracle.json_reencode([b'{"pos":1e400}']) == [b'{"pos":"Infinity"}'], "what a PATCH writes"
    # Connect holds the key's partition as {"a": Infinity} (a double; its REST writes it "Infinity").
    connect_get, _ = java_get(java_oracle, kafka_broker, topic, inf)
    assert connect_get == {
        canon({"a": math.inf}): canon(None),
        canon({"a": 1}): canon({"pos": math.inf}),
        canon({"a": 2}): canon({"pos": 2}),
    }
    assert daemon_get(daemon, inf) == {
        canon({"a": "Infinity"}): canon(None),
        canon({"a": 1}): canon({"pos": "Infinity"}),
        canon({"a": 2}): canon({"pos": 2}),
    }

    document, notes = export_kip875(daemon, tmp_path / "inf.json")
    assert document == {inf: {"offsets": [{"partition": {"a": 2}, "offset": {"pos": 2}}]}}
    assert "1 record(s) under keys in bytes no converter writes" in notes
    assert "1 record(s) whose offset holds a number beyond a double's range" in notes


# --- a connector named "" ---------------------------------------------------------------------------------


def test_a_connector_named_empty_is_listed_and_its_offsets_path_says_why_it_cannot_be_named(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """Another producer's key ``["",{…}]`` makes Connect list a connector named ``""``; no URL path can
    name it (``/connectors//offsets`` has an empty segment, which Connect's REST server does not route
    either). The answer says so in Connect's error shape and where such records can be read."""
    topic = topic_with(kafka_broker, [(b'["",{"a":1}]', b'{"pos":1}')])
    daemon = daemon_on(daemon_factory, kafka_broker, topic, 1)
    assert "" in httpx.get(f"{daemon.url}/connectors", timeout=10).json()

    for method in ("GET", "PATCH", "DELETE"):
        response = httpx.request(method, f"{daemon.url}/connectors//offsets", timeout=10)
        assert response.status_code == 400, (method, response.text)
        body = response.json()
        assert body["error_code"] == 400
        assert "The connector name in the URL is empty" in body["message"]
        assert "GET /offsets/records" in body["message"]
