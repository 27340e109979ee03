"""History on a real Kafka topic shared with Apache Kafka Connect's own offset writer (Java).

Java's ``OffsetStorageWriter`` writes through ``KafkaOffsetBackingStore`` as a worker's task does;
the daemon must archive those records as ``external`` and its own PATCH as ``daemon``, and a
rollback must reach the bytes a fresh Java ``OffsetStorageReaderImpl`` reads.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from emulator.client.history import HistoryClient
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.integration.connect_helpers import (
    JAVA_ONE_RECORD_PER_BATCH,
    canon,
    eventually,
    from_java,
    kafka_daemon_args,
    unique,
)
from tests.oracle import JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]

ORDERS = T.jmap([("table", "orders"), ("db", "shop")])  # LinkedHashMap: not sorted, not HashMap order
FILE_B = T.jmap([("file", "/data/b.txt")])


def mark() -> int:
    time.sleep(0.05)
    t = time.time_ns() // 1_000_000
    time.sleep(0.05)
    return t


@pytest.mark.slow
def test_java_writes_are_external_patches_are_daemon_and_a_rollback_reaches_java(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    topic, n = kafka_broker.unique_topic("history"), 5
    name = unique("hist-src")

    def java_write(entries: list[tuple[Any, Any]]) -> None:
        java_oracle.offsets_write(
            kafka_broker.bootstrap, topic, name, entries, partitions=n, extra_config=JAVA_ONE_RECORD_PER_BATCH
        )

    java_write([(ORDERS, T.jmap({"pos": T.long(1)})), (FILE_B, T.jmap({"pos": T.long(10)}))])
    t1 = mark()
    args = [*kafka_daemon_args(kafka_broker.bootstrap, topic, n), "--data-dir", str(tmp_path / "data")]
    daemon = daemon_factory(*args)
    client = HistoryClient(daemon.url)
    try:
        client.alter(
            name,
            {
                "offsets": [
                    {"partition": {"db": "shop", "table": "orders"}, "offset": {"pos": 2}},
                    {"partition": {"file": "/data/b.txt"}, "offset": None},
                ]
            },
        )
        mark()
        java_write([(ORDERS, T.jmap({"pos": T.long(3)}))])  # a task commits while the daemon runs
        eventually(lambda: client.offsets(name), lambda rows: {"pos": 3} in [r["offset"] for r in rows])

        changes = client.history(name)["changes"]
        seen = [(c["origin"], c["operation"], c["partition"], c["offset"]) for c in changes]
        orders = {"table": "orders", "db": "shop"}
        b = {"file": "/data/b.txt"}
        assert seen[0] == ("external", None, orders, {"pos": 3})
        assert sorted(map(json.dumps, seen[1:3])) == sorted(
            map(json.dumps, [("daemon", "PATCH", orders, {"pos": 2}), ("daemon", "PATCH", b, None)])
        )
        assert sorted(map(json.dumps, seen[3:])) == sorted(
            map(json.dumps, [("external", None, orders, {"pos": 1}), ("external", None, b, {"pos": 10})])
        )
        assert len(changes) == 5
        # The daemon wrote under Java's exact key bytes (LinkedHashMap order), not the PATCH body's order.
        assert {c["key"] for c in changes if c["partition"] == orders} == {
            json.dumps([name, orders], separators=(",", ":"))
        }

        assert sorted(map(canon, client.offsets_as_of(name, t1))) == sorted(
            map(canon, [{"partition": orders, "offset": {"pos": 1}}, {"partition": b, "offset": {"pos": 10}}])
        )
        dry = client.rollback(name, t1, dry_run=True)
        assert sorted((c["action"], canon(c["target_offset"])) for c in dry["changes"]) == [
            ("change", canon({"pos": 1})),
            ("restore", canon({"pos": 10})),
        ]
        assert {"pos": 3} in [r["offset"] for r in client.offsets(name)], "the dry run wrote nothing"

        client.rollback(name, t1)
        offsets, _ = java_oracle.offsets_read(kafka_broker.bootstrap, topic, name, [ORDERS, FILE_B], num_partitions=n)
        assert [canon(from_java(o)) for o in offsets] == [canon({"pos": 1}), canon({"pos": 10})]
        assert {(c["origin"], c["operation"]) for c in client.history(name)["changes"][:2]} == {("daemon", "rollback")}
    finally:
        client.close()

    daemon.stop()
    restarted = daemon_factory(*args)
    with HistoryClient(restarted.url) as again:
        assert len(again.history(name)["changes"]) == 7, "a restart re-reads the topic but archives nothing twice"
