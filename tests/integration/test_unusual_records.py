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


# --- partitions holding nested maps or lists ---------------------------------------------------------------


def test_partitions_holding_a_nested_map_or_list_get_no_offset_from_get_as_of_or_export(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """``OffsetStorageReaderImpl.offsets`` runs ``validateFormat`` on each listed partition and leaves out
    (logging CRITICAL) one holding a map or a list: no task and no GET gets its offset. The daemon keeps
    the partition visible with ``"offset": null``, as it shows values Connect cannot read (docs/protocol.md
    §8), counts and logs it; ``?as_of=`` answers the same, and a KIP-875 export leaves it out."""
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

    expected = {canon({"a": {"b": 1}}): canon(None), canon({"a": [1]}): canon(None)} | connect_get
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
