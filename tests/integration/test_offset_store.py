"""The OffsetBackingStore-shaped adapter over the daemon, checked against Apache Kafka's own store.

Java writes and reads through KafkaOffsetBackingStore on the same topic the daemon materializes; the
adapter must see Java's bytes exactly (byte-exact lookups, as Connect's), and Java must see the
adapter's writes. Seeding follows Flink CDC's state restore.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, NamedTuple

import pytest

from emulator.client.backing_store import DaemonOffsetBackingStore
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.integration.connect_helpers import JAVA_ONE_RECORD_PER_BATCH
from tests.oracle import JavaOracle, typed

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]


def linked(*pairs: tuple[str, Any]) -> Any:
    return typed.jmap(list(pairs), "linked")


class StoreSetup(NamedTuple):
    """A daemon on its own 5-partition offsets topic, and the broker Java writes that topic on."""

    broker: TansuBroker
    topic: str
    daemon: DaemonProcess


@pytest.fixture
def setup(kafka_broker: TansuBroker, daemon_factory: DaemonFactory) -> StoreSetup:
    topic = f"store-{uuid.uuid4().hex[:8]}"
    daemon = daemon_factory(
        "--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "5"
    )
    return StoreSetup(kafka_broker, topic, daemon)


def started(daemon: DaemonProcess, config: dict[str, str] | None = None) -> DaemonOffsetBackingStore:
    store = DaemonOffsetBackingStore()
    store.configure({"offset.storage.url": daemon.url, **(config or {})})
    store.start()
    return store


@pytest.mark.slow
def test_get_returns_javas_values_for_javas_exact_key_bytes(setup: StoreSetup, java_oracle: JavaOracle) -> None:
    broker, topic, daemon = setup
    connector = f"jdbc-{uuid.uuid4().hex[:6]}"
    partition = linked(("table", "orders"), ("db", "shop"))
    java_oracle.offsets_write(
        broker.bootstrap,
        topic,
        connector,
        [(partition, linked(("id", typed.long(42))))],
        partitions=5,
        extra_config=JAVA_ONE_RECORD_PER_BATCH,
    )
    [java_key] = java_oracle.json_encode([typed.jlist([connector, partition])])
    [hashmap_order_key] = java_oracle.json_encode(
        [typed.jlist([connector, typed.jmap([("db", "shop"), ("table", "orders")], "linked")])]
    )
    store = started(daemon)
    try:
        deadline = time.monotonic() + 10
        while store.get([java_key]).result(10)[java_key] is None and time.monotonic() < deadline:
            time.sleep(0.1)  # the daemon tails what Java wrote after it started
        got = store.get([java_key, hashmap_order_key]).result(10)
        assert got == {java_key: b'{"id":42}', hashmap_order_key: None}, "lookups are by exact bytes, as Connect's"
        assert store.connector_partitions(connector) == [{"table": "orders", "db": "shop"}]
    finally:
        store.stop()


@pytest.mark.slow
def test_java_reads_what_set_wrote_and_deleted(setup: StoreSetup, java_oracle: JavaOracle) -> None:
    broker, topic, daemon = setup
    connector = f"file-{uuid.uuid4().hex[:6]}"
    keep, drop = linked(("filename", "/a.txt")), linked(("filename", "/b.txt"))
    key_keep, key_drop = java_oracle.json_encode([typed.jlist([connector, keep]), typed.jlist([connector, drop])])
    store = started(daemon)
    done = threading.Event()
    errors: list[BaseException | None] = []
    try:
        store.set({key_keep: b'{"position":10}', key_drop: b'{"position":20}'}).result(30)
        store.set({key_drop: None}, lambda err, _: (errors.append(err), done.set())).result(30)
        assert done.wait(5) and errors == [None], "the callback ran once, without error"
        offsets, partitions = java_oracle.offsets_read(
            broker.bootstrap, topic, connector, [keep, drop], num_partitions=5
        )
        assert [typed.to_python(o) if o is not None else None for o in offsets] == [{"position": 10}, None]
        assert [typed.to_python(p) for p in partitions] == [{"filename": "/a.txt"}]
    finally:
        store.stop()


@pytest.mark.slow
def test_configure_seeds_a_flink_cdc_state_as_flinks_store_does(setup: StoreSetup, java_oracle: JavaOracle) -> None:
    broker, topic, daemon = setup
    engine = f"engine-{uuid.uuid4().hex[:6]}"
    state = (
        '{"sourcePartition":{"server":"mysql_binlog_source"},'
        '"sourceOffset":{"file":"mysql-bin.000003","pos":154,"row":1,"event":2,"server_id":223344}}'
    )
    store = started(daemon, {"name": engine, "offset.storage.flink.state.value": state})
    store.stop()
    offsets, _ = java_oracle.offsets_read(
        broker.bootstrap, topic, engine, [linked(("server", "mysql_binlog_source"))], num_partitions=5
    )
    assert typed.to_python(offsets[0]) == {
        "file": "mysql-bin.000003",
        "pos": 154,
        "row": 1,
        "event": 2,
        "server_id": 223344,
    }


def test_unstarted_store_says_so() -> None:
    with pytest.raises(RuntimeError, match="call start"):
        DaemonOffsetBackingStore().get([b"x"])
