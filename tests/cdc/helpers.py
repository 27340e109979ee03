"""The CDC tests' vocabulary: one connector's names, Debezium's properties, the Connect-side run,
and reading changes back as (operation, row id)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tests.cdc.postgres import PostgresServer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

WORKER = Path(__file__).with_name("connect_worker.py")
OFFSETS_PARTITIONS = 5
T = TypeVar("T")
Change = tuple[str, int]
"""(Debezium's ``op``, the row's ``id``): ``("r", 1)`` snapshot read, ``("c", 4)`` insert, ``("u", 1)`` update."""


@dataclass(frozen=True)
class Capture:
    """One connector's unique names: table, slot, publication, logical server name, connector name."""

    table: str
    slot: str
    publication: str
    server: str
    connector: str

    @classmethod
    def unique(cls) -> Capture:
        tag = uuid.uuid4().hex[:10]
        return cls(f"t_{tag}", f"slot_{tag}", f"pub_{tag}", f"srv{tag}", f"pg-{tag}")

    def create(self, pg: PostgresServer, rows: Sequence[int] = ()) -> None:
        pg.sql(f"CREATE TABLE public.{self.table} (id int PRIMARY KEY, name text)")
        if rows:
            self.insert(pg, rows)

    def insert(self, pg: PostgresServer, rows: Sequence[int], *, transaction: bool = False) -> None:
        statements = [f"INSERT INTO public.{self.table} VALUES ({i}, 'row {i}')" for i in rows]
        if transaction:
            statements = ["BEGIN", *statements, "COMMIT"]
        pg.sql(*statements)

    def props(self, pg: PostgresServer) -> dict[str, str]:
        """The connector's configuration, the same for Connect and for Spark (``debezium.*``)."""
        return {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            **pg.connector_config(),
            "plugin.name": "pgoutput",
            "slot.name": self.slot,
            "publication.name": self.publication,
            "publication.autocreate.mode": "filtered",
            "table.include.list": f"public.{self.table}",
            "topic.prefix": self.server,
        }


def change_of(value: str | None) -> Change | None:
    """(op, id) of a change event's JSON text; ``None`` for a tombstone."""
    if value is None:
        return None
    event = json.loads(value)
    if set(event) == {"schema", "payload"}:
        event = event["payload"]
    image = event.get("after") or event.get("before") or {}
    return str(event["op"]), int(image["id"])


def ids(changes: Sequence[Change]) -> list[int]:
    return [i for _, i in changes]


def run_connect(
    capture: Capture,
    pg: PostgresServer,
    store: dict[str, str],
    expect: int,
    work: Path,
    *,
    settle_s: float = 1.0,
    during: Callable[[], None] | None = None,
) -> list[Change]:
    """Debezium's engine as a Connect worker (``connect_worker.py``) until ``expect`` changes, then a
    graceful stop; ``store`` names its offset store. ``during`` runs once the worker process is up."""
    work.mkdir(parents=True, exist_ok=True)
    args_path, out_path = work / f"connect-{uuid.uuid4().hex[:6]}.json", work / "out.json"
    props = {
        "name": capture.connector,
        **capture.props(pg),
        "offset.flush.interval.ms": "0",
        **store,
    }
    args_path.write_text(json.dumps({"props": props, "expect": expect, "settle_s": settle_s, "timeout_s": 90}))
    out_path.unlink(missing_ok=True)
    with (work / "connect.log").open("ab") as log:
        proc = subprocess.Popen([sys.executable, str(WORKER), str(args_path), str(out_path)], stdout=log, stderr=log)
    try:
        if during is not None:
            during()
        proc.wait(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
    result = json.loads(out_path.read_text())
    assert result["outcome"].get("error") is None, f"the Connect-side engine failed: {result['outcome']}"
    assert result["task_stopped"], "the Connect-side task never reported its final offset commit"
    pg.wait_slot_released(capture.slot)
    return [c for c in (change_of(value) for _, value, _ in result["records"]) if c is not None]


def kafka_store(bootstrap: str, topic: str) -> dict[str, str]:
    """A distributed worker's offset store: ``KafkaOffsetBackingStore`` on ``topic``."""
    return {
        "offset.storage": "org.apache.kafka.connect.storage.KafkaOffsetBackingStore",
        "offset.storage.topic": topic,
        "offset.storage.partitions": str(OFFSETS_PARTITIONS),
        "offset.storage.replication.factor": "1",
        "bootstrap.servers": bootstrap,
    }


def file_store(path: Path) -> dict[str, str]:
    """A standalone worker's offset store: ``FileOffsetBackingStore`` on ``path``."""
    return {
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(path),
    }


class ChangeCollector:
    """A ``foreachBatch`` sink keeping every batch's rows in the driver, in order."""

    def __init__(self, fail_on_batch: int | None = None) -> None:
        self.batches: list[tuple[int, list[dict[str, Any]]]] = []
        self.fail_on_batch = fail_on_batch
        self._lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = [row.asDict() for row in frame.orderBy("seq").collect()]
        with self._lock:
            self.batches.append((batch_id, rows))
        if batch_id == self.fail_on_batch:
            raise RuntimeError(f"the sink fails in batch {batch_id}, after writing its rows (a crash)")

    @property
    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return [row for _, rows in self.batches for row in rows]

    @property
    def changes(self) -> list[Change]:
        return [c for c in (change_of(row["value"]) for row in self.rows) if c is not None]


def start_query(
    spark: SparkSession,
    url: str,
    capture: Capture,
    pg: PostgresServer,
    checkpoint: Path,
    sink: ChangeCollector,
    *,
    max_records: int | None = None,
    options: dict[str, str] | None = None,
) -> Any:
    reader = spark.readStream.format("connect-debezium").option("url", url).option("connector", capture.connector)
    for key, value in capture.props(pg).items():
        reader = reader.option(f"debezium.{key}", value)
    if max_records is not None:
        reader = reader.option("maxRecordsPerTrigger", str(max_records))
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def wait_for_changes(query: Any, sink: ChangeCollector, count: int, timeout_s: float = 90.0) -> None:
    """Until the sink holds ``count`` changes; fails at once with the query's error if it stopped."""
    deadline = time.monotonic() + timeout_s
    while len(sink.changes) < count:
        if not query.isActive:
            raise AssertionError(f"the query stopped after {len(sink.changes)} changes: {query.exception()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(sink.changes)} of {count} changes after {timeout_s:.0f} s: {sink.changes}")
        time.sleep(0.2)


def eventually(probe: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    value = probe()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.2)
        value = probe()
    return value
