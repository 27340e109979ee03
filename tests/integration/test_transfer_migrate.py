"""``connect-offsets migrate`` between two real offsets topics, and snapshots, checked against Java.

The source topic is written by Apache Kafka's ``OffsetStorageWriter`` + ``KafkaOffsetBackingStore``; the
destination has another partition count, so every record must be re-placed where Java's producer
would put it (``BuiltInPartitioner.partitionForKey``), with its bytes unchanged, and a fresh Java store
must read the same offsets from both topics. Dry runs must write nothing (not even create the topic).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from emulator.formats import snapshot
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from tests.fixtures.broker import TansuBroker
from tests.fixtures.cli import run_cli
from tests.integration.connect_helpers import JAVA_ONE_RECORD_PER_BATCH, canon, from_java, read_topic, unique
from tests.oracle import JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]

ONE_PER_BATCH = ["--kafka-config", "batch.num.messages=1"]
"""Tansu under-reports end offsets after multi-record batches (docs/testing.md, "The test broker: Tansu")."""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--quiet", timeout_s=180)


def topic_exists(broker: TansuBroker, topic: str) -> bool:
    metadata = broker.admin().list_topics(timeout=10)
    return topic in metadata.topics


def java_reads(
    oracle: JavaOracle, broker: TansuBroker, topic: str, n: int, writes: dict[str, list[Any]]
) -> dict[str, Any]:
    """What a fresh KafkaOffsetBackingStore reads for every partition ever written, per connector."""
    out = {}
    for connector, entries in writes.items():
        found, _ = oracle.offsets_read(broker.bootstrap, topic, connector, [p for p, _ in entries], num_partitions=n)
        out[connector] = [None if f is None else canon(from_java(f)) for f in found]
    return out


def written_state(writes: dict[str, list[Any]]) -> dict[str, Any]:
    """The offsets those writes leave per partition (last write wins, None deletes), in write order."""
    out = {}
    for connector, entries in writes.items():
        state: dict[str, Any] = {}
        for partition, offset in entries:
            state[canon(from_java(partition))] = None if offset is None else canon(from_java(offset))
        out[connector] = [state[canon(from_java(p))] for p, _ in entries]
    return out


@pytest.mark.slow
def test_migrate_re_places_java_written_records_for_the_new_partition_count(
    java_oracle: JavaOracle, kafka_broker: TansuBroker
) -> None:
    source, target = kafka_broker.unique_topic("migrate-src"), kafka_broker.unique_topic("migrate-dst")
    writes: dict[str, list[tuple[Any, Any]]] = {
        unique("jdbc"): [
            (T.jmap([("table", f"t{i}"), ("db", "shop")]), T.jmap([("ts", T.long(1000 + i)), ("id", T.long(i))]))
            for i in range(6)
        ],
        unique("files"): [
            (T.jmap({"filename": f"/in/{i}.txt"}), T.jmap({"position": T.long(i * 10)})) for i in range(4)
        ],
        unique("dbz"): [(T.jmap({"server": "db1"}), T.jmap([("lsn", T.long(2**50)), ("ratio", T.double(0.1))]))],
    }
    for connector, entries in writes.items():
        java_oracle.offsets_write(
            kafka_broker.bootstrap, source, connector, entries, partitions=5, extra_config=JAVA_ONE_RECORD_PER_BATCH
        )
    src_url, dst_url = f"kafka://{kafka_broker.bootstrap}/{source}", f"kafka://{kafka_broker.bootstrap}/{target}"
    source_records = read_topic(kafka_broker.bootstrap, source, expect=11)
    assert len(source_records) == 11

    dry = cli("migrate", "--from", src_url, "--to", dst_url, "--partitions", "3", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["dry_run"] is True and report["written"] == 0
    assert report["diff"]["summary"] == {"added": 11, "changed": 0, "removed": 0, "unchanged": 0}
    assert not topic_exists(kafka_broker, target), "a dry run creates nothing"

    done = cli("migrate", "--from", src_url, "--to", dst_url, "--partitions", "3", *ONE_PER_BATCH)
    assert done.returncode == 0, done.stderr
    migrated = read_topic(kafka_broker.bootstrap, target, expect=11)
    assert sorted((r.key, r.value) for r in migrated) == sorted((r.key, r.value) for r in source_records)
    keys = [r.key for r in migrated if r.key is not None]
    assert [r.partition for r in migrated] == java_oracle.partition(keys, 3), "Java's placement for 3 partitions"
    assert any(r.partition != s.partition for r in migrated for s in source_records if s.key == r.key)
    assert java_reads(java_oracle, kafka_broker, target, 3, writes) == written_state(writes)

    again = cli("migrate", "--from", src_url, "--to", dst_url, "--json")
    assert json.loads(again.stdout)["written"] == 0, "a second migration changes nothing"

    # Connect moves on in the source: one offset advances, one partition is deleted.
    jdbc, files = list(writes)[:2]
    later = {
        jdbc: [(writes[jdbc][0][0], T.jmap([("ts", T.long(5000)), ("id", T.long(0))]))],
        files: [(writes[files][0][0], None)],
    }
    for connector, entries in later.items():
        java_oracle.offsets_write(
            kafka_broker.bootstrap, source, connector, entries, partitions=5, extra_config=JAVA_ONE_RECORD_PER_BATCH
        )
        writes[connector] += entries
    # The tombstone is not in the source's live state; --prune carries the deletion over.
    plan = cli("migrate", "--from", src_url, "--to", dst_url, "--prune", "--dry-run", *ONE_PER_BATCH)
    assert plan.returncode == 0, plan.stderr
    assert f"connector {jdbc}: 0 added, 1 changed, 0 removed, 5 unchanged" in plan.stdout
    assert '{"ts":1000,"id":0} -> {"ts":5000,"id":0}' in plan.stdout
    assert f"connector {files}: 0 added, 0 changed, 1 removed, 3 unchanged" in plan.stdout
    assert len(read_topic(kafka_broker.bootstrap, target, expect=11)) == 11, "the dry run wrote nothing"

    assert cli("migrate", "--from", src_url, "--to", dst_url, "--prune", "--yes", *ONE_PER_BATCH).returncode == 0
    final = written_state(writes)
    assert final[files][0] is None and final[jdbc][0] == canon({"ts": 5000, "id": 0})
    assert java_reads(java_oracle, kafka_broker, target, 3, writes) == final


@pytest.mark.slow
def test_snapshot_round_trip_embedded_to_topic_is_byte_exact(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    log = EmbeddedOffsetLog(data_dir, partitions=4, synchronous="NORMAL")
    log.open()
    connector = unique("snap")
    entries: list[tuple[bytes, bytes | None]] = [
        (f'["{connector}",{{"p":{i}}}]'.encode(), f'{{"o":{i}}}'.encode()) for i in range(30)
    ]
    entries += [
        (f'["{connector}", {{"b":1, "a":2}}]'.encode(), b'{"o": 1.0E10}'),  # not canonical: kept as-is
        (f'["{connector}",{{"p":3}}]'.encode(), None),  # deletes p=3
        (f'["{connector}",{{"p":4}}]'.encode(), b'{"o":44}'),  # p=4 updated
        (b"\x00not a connect key\xff", b"opaque"),
        (f'["{connector}",{{"p":5}}]'.encode(), b""),  # an empty value is a live entry, not a tombstone
    ]
    log.append(entries)
    log.close()
    with sqlite3.connect(data_dir / "connect-offsets.sqlite3") as db:
        rows = db.execute("SELECT key, value, partition, offset FROM records ORDER BY partition, offset").fetchall()
    latest: dict[bytes, tuple[bytes | None, int, int]] = {}
    for key, value, partition, offset in rows:
        latest[bytes(key)] = (None if value is None else bytes(value), partition, offset)
    live = {k: v for k, v in latest.items() if v[0] is not None}
    assert len(live) == 31

    backup = tmp_path / "backup.avro"
    plain = cli("export", "--from", f"embedded:{data_dir}", "--to", f"snapshot:{backup}")
    assert plain.returncode == 2 and "keys Connect ignores" in plain.stderr and not backup.exists()
    exported = cli("export", "--from", f"embedded:{data_dir}", "--to", f"snapshot:{backup}", "--malformed", "keep")
    assert exported.returncode == 0, exported.stderr
    loaded, info = snapshot.load_file(backup)
    assert info.source is not None and info.source.endswith("connect-offsets.sqlite3")
    assert {r.key: (r.value, r.kafka_partition, r.log_offset) for r in loaded.records} == live

    topic = kafka_broker.unique_topic("snapshot-restore")
    restored = cli(
        "import", "--from", f"snapshot:{backup}", "--to", f"kafka://{kafka_broker.bootstrap}/{topic}",
        "--partitions", "7", "--malformed", "keep", *ONE_PER_BATCH,
    )  # fmt: skip
    assert restored.returncode == 0, restored.stderr
    records = read_topic(kafka_broker.bootstrap, topic, expect=len(live))
    assert {r.key: r.value for r in records} == {k: v[0] for k, v in live.items()}, "byte-exact"
    assert [r.partition for r in records] == java_oracle.partition([r.key for r in records if r.key], 7)
    assert all(not r.headers for r in records), "no headers, as Connect writes"
