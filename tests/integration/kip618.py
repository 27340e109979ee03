"""Connect clusters whose source connectors keep offsets in topics of their own, or in transactions
(KIP-618), written and read by Apache Kafka's own classes, with a daemon following them.

Java's side is the oracle's ``ConnectorOffsetBackingStore`` built exactly as ``Worker`` builds it
(``connector_store_read``/``connector_store_write``), an exactly-once task's transactional offset
commit (``task_offsets_transaction``) and the config topic written by ``KafkaConfigBackingStore``.
The daemon is a real ``serve`` process on the same topics.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.fixtures.broker import TansuBroker
from tests.fixtures.connect_cluster import ConnectTopics, config, connect_cluster_args, stop
from tests.fixtures.daemon import DaemonProcess, free_port
from tests.oracle import JavaOracle, typed

PARTITIONS = 3
"""Partitions of every offsets topic here (the worker's ``offset.storage.partitions``, which Connect
also uses when it creates a connector's own topic)."""

WORKER_ONE_RECORD_PER_BATCH = {"batch.size": "0"}
"""Java's worker store producer sends one record per batch: Tansu under-reports end offsets after
multi-record batches (docs/testing.md), and a reader that trusts end offsets could stop early."""
TASK_ONE_RECORD_PER_BATCH = {"producer.override.batch.size": "0"}
"""The same for a connector's own producers, set as Connect's per-connector overrides."""


def partition(**fields: Any) -> Any:
    """A source partition as Connect deserializes one (a ``HashMap``: its bytes are what REST writes use)."""
    return typed.from_python(fields, "hash")


def offset(**fields: Any) -> Any:
    return typed.from_python(fields, "hash")


def plain(rows: list[list[Any]]) -> list[dict[str, Any]]:
    """Java's ``[[partition, offset], ...]`` as the daemon's GET shape, sorted."""
    return ordered({"partition": typed.to_python(p), "offset": typed.to_python(o)} for p, o in rows)


def ordered(rows: Any) -> list[dict[str, Any]]:
    """Rows in one order whatever order they came in (Connect's listing is a HashSet's)."""
    return sorted(rows, key=lambda row: json.dumps(row["partition"], sort_keys=True))


def broker_filters_aborted(bootstrap: str) -> bool:
    """Probe: does this broker keep aborted transactions from ``read_committed`` consumers?

    A record is produced in a transaction, flushed (so it reaches the broker) and aborted; a committed
    record follows. A ``read_committed`` consumer then reads the partition to the committed record. A
    broker that filters (Apache Kafka) never delivers the aborted one; Tansu 0.6 does (its fetch
    responses carry no aborted transactions).
    """
    topic = f"abort-probe-{uuid.uuid4().hex[:12]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn", "linger.ms": 0})
    producer.init_transactions(15)
    for value, commit in ((b"aborted", False), (b"committed", True)):
        producer.begin_transaction()
        producer.produce(topic, key=b"k", value=value, partition=0)
        producer.flush(15)
        if commit:
            producer.commit_transaction(15)
        else:
            producer.abort_transaction(15)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": topic,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while b"committed" not in seen:
            if time.monotonic() > deadline:
                raise AssertionError(f"the abort probe did not read its committed record within 20 s: {seen}")
            message = consumer.poll(0.5)
            if message is not None and message.error() is None and message.value() is not None:
                seen.append(message.value())  # type: ignore[arg-type]
    finally:
        consumer.close()
    return b"aborted" not in seen


@dataclass
class Kip618Cluster:
    """A Connect cluster's topics (Java's stores), its worker offsets topic, and a daemon on them."""

    broker: TansuBroker
    oracle: JavaOracle
    topics: ConnectTopics
    worker_topic: str
    group_id: str
    exactly_once: bool
    daemon: DaemonProcess
    http: httpx.Client
    own_topics: dict[str, str | None] = field(default_factory=dict)
    """Each connector's ``offsets.storage.topic`` as ``source`` wrote it."""

    def store_options(self, own_topic: str | None, **more: Any) -> dict[str, Any]:
        return {
            "connector_topic": own_topic,
            "exactly_once": self.exactly_once,
            "group_id": self.group_id,
            "num_partitions": PARTITIONS,
            "worker_config": WORKER_ONE_RECORD_PER_BATCH,
            **more,
        }

    # -- the cluster, as a herder writes it -------------------------------------------------------
    def source(self, name: str, own_topic: str | None = None, *, fencing: int | None = None, **props: str) -> str:
        """A stopped FileStream source connector (``offsets.storage.topic`` = ``own_topic``), optionally
        with a ``tasks-fencing-<name>`` record of ``fencing`` tasks."""
        settings = dict(props)
        if own_topic is not None:
            settings["offsets.storage.topic"] = own_topic
        steps: list[dict[str, Any]] = [config(name, **settings), *stop(name)]
        if fencing is not None:
            steps.append({"op": "put_task_count_record", "connector": name, "count": fencing})
        self.oracle.connect_cluster_write(self.broker.bootstrap, self.topics.config, steps)
        self.own_topics[name] = own_topic
        return name

    def java_view(self, name: str) -> dict[str, Any]:
        """Java's fresh ``ConnectorOffsetBackingStore`` for ``name`` as its config stands."""
        return self.oracle.connector_store_read(
            self.broker.bootstrap, self.worker_topic, name, **self.store_options(self.own_topics.get(name))
        )

    def java_write(self, name: str, own_topic: str | None, entries: list[tuple[Any, Any]]) -> None:
        """Connect's REST alter, through Java's combined store (both topics)."""
        self.oracle.connector_store_write(
            self.broker.bootstrap,
            self.worker_topic,
            name,
            entries,
            **self.store_options(own_topic, connector_config=TASK_ONE_RECORD_PER_BATCH),
        )

    def java_topic_write(self, topic: str, name: str, entries: list[tuple[Any, Any]]) -> None:
        """Offsets written to one topic only, by a plain ``KafkaOffsetBackingStore`` on it."""
        self.oracle.offsets_write(
            self.broker.bootstrap, topic, name, entries, PARTITIONS, extra_config=WORKER_ONE_RECORD_PER_BATCH
        )

    def task_commit(
        self, name: str, own_topic: str | None, entries: list[tuple[Any, Any]], outcome: str, **more: Any
    ) -> dict[str, Any]:
        """An exactly-once task's offset commit in its transaction: ``commit``, ``abort`` or ``hold``."""
        connector_config = {**TASK_ONE_RECORD_PER_BATCH, **more.pop("connector_config", {})}
        return self.oracle.task_offsets_transaction(
            self.broker.bootstrap,
            self.worker_topic,
            name,
            entries,
            outcome=outcome,
            **self.store_options(own_topic, connector_config=connector_config),
            **more,
        )

    # -- the daemon ---------------------------------------------------------------------------------
    def get(self, name: str, store: str | None = None) -> list[dict[str, Any]]:
        """The daemon's GET after reading every topic to its end (``fresh``), sorted."""
        params = {"fresh": "true"} | ({} if store is None else {"store": store})
        response = self.http.get(f"/connectors/{name}/offsets", params=params)
        assert response.status_code == 200, response.text
        return ordered(response.json()["offsets"])

    def wait_get(self, name: str, deadline_s: float = 30.0) -> httpx.Response:
        """GET until the connector's own topic is open and read (503 before), within the deadline."""
        deadline = time.monotonic() + deadline_s
        while True:
            response = self.http.get(f"/connectors/{name}/offsets", params={"fresh": "true"})
            if response.status_code != 503 or time.monotonic() > deadline:
                return response
            time.sleep(0.2)


@contextlib.contextmanager
def kip618_cluster(
    broker: TansuBroker,
    oracle: JavaOracle,
    workdir: Path,
    *,
    exactly_once: bool,
    prefix: str,
    extra_args: Mapping[str, str] | None = None,
) -> Iterator[Kip618Cluster]:
    """Fresh cluster topics (by Java's stores), a worker offsets topic and a ready daemon following them."""
    topics = ConnectTopics.created_by_java(broker, oracle, prefix)
    worker_topic = TansuBroker.unique_topic(f"{prefix}-offsets")
    group_id = TansuBroker.unique_topic(f"{prefix}-group")
    args = [
        *connect_cluster_args(broker.bootstrap, worker_topic, topics.config, topics.status, PARTITIONS),
        "--data-dir",
        str(workdir / "data"),
    ]
    if exactly_once:
        args += ["--exactly-once-source", "enabled", "--connect-group-id", group_id]
    for flag, value in (extra_args or {}).items():
        args += [flag, value]
    daemon = DaemonProcess(args, free_port(), workdir / "daemon.log").start()
    try:
        with httpx.Client(base_url=daemon.url, timeout=60) as http:
            yield Kip618Cluster(broker, oracle, topics, worker_topic, group_id, exactly_once, daemon, http)
    finally:
        daemon.stop()
