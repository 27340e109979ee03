"""Connect's standalone offsets file, both ways, against Apache Kafka 4.3.0's FileOffsetBackingStore.

Java writes a file (several connectors, a tombstone kept as a null value) that we import byte-exact
into the embedded log and into a topic, where a fresh ``KafkaOffsetBackingStore`` reads the right
offsets for the original partition maps; a file we export is loaded by ``FileOffsetBackingStore``,
and a FileStream connector resumes from exactly the exported position; damaged files import nothing.
Every expectation is Java's own answer or bytes Java's ``JsonConverter`` produced.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from emulator.formats import standalone
from emulator.formats.model import RawRecord
from tests.fixtures.broker import TansuBroker
from tests.fixtures.cli import run_cli
from tests.integration.connect_helpers import canon, from_java, read_topic, unique
from tests.oracle import JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.jvm]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--quiet", timeout_s=180)


class JavaFile:
    """A standalone file written by FileOffsetBackingStore, and the typed writes that made it."""

    def __init__(self, path: Path, writes: dict[str, list[tuple[Any, Any]]]) -> None:
        self.path = path
        self.writes = writes

    def expected_records(self, oracle: JavaOracle) -> dict[bytes, bytes | None]:
        """Key → value bytes as Java's JsonConverter encodes them (last write per partition wins)."""
        out: dict[bytes, bytes | None] = {}
        for connector, entries in self.writes.items():
            keys = oracle.json_encode([T.jlist([connector, partition]) for partition, _ in entries])
            values = oracle.json_encode([offset for _, offset in entries])
            for key, value in zip(keys, values, strict=True):
                assert key is not None
                out[key] = value
        return out


@pytest.fixture(scope="module")
def java_file(java_oracle: JavaOracle, tmp_path_factory: pytest.TempPathFactory) -> JavaFile:
    path = tmp_path_factory.mktemp("standalone") / "connect.offsets"
    writes: dict[str, list[tuple[Any, Any]]] = {
        unique("file-src"): [
            (T.jmap({"filename": "/data/a.txt"}), T.jmap({"position": T.long(151)})),
            (T.jmap({"filename": "/data/b.txt"}), T.jmap({"position": T.long(7)})),
        ],
        unique("jdbc-src"): [
            (
                T.jmap([("table", "orders"), ("db", "shop"), ("protocol", "1")]),
                T.jmap([("ts_ms", T.long(1_700_000_000_123)), ("inc", T.long(42)), ("ratio", T.double(1e10))]),
            ),
        ],
        unique("dbz-src"): [
            (
                T.jmap({"server": "café \U0001f600 tab\t"}),
                T.jmap([("file", "mysql-bin.000004"), ("pos", T.long(3261)), ("snapshot", True)]),
            ),
        ],
    }
    for connector, entries in writes.items():
        java_oracle.file_offsets_write(str(path), connector, entries)
    # A tombstone: Connect keeps the key with a null value in the map (and in the file).
    file_src = next(iter(writes))
    tombstone = (T.jmap({"filename": "/data/b.txt"}), None)
    java_oracle.file_offsets_write(str(path), file_src, [tombstone])
    writes[file_src].append(tombstone)
    return JavaFile(path, writes)


def test_a_java_written_file_reads_as_exactly_the_bytes_java_encoded(
    java_file: JavaFile, java_oracle: JavaOracle
) -> None:
    loaded = standalone.load_file(java_file.path)
    expected = java_file.expected_records(java_oracle)
    assert {r.key: r.value for r in loaded.records} == expected
    assert len(loaded.records) == len(expected) == 4
    assert sum(r.value is None for r in loaded.records) == 1, "the tombstone is kept as a null value"


def test_re_writing_a_one_entry_java_file_gives_identical_bytes(java_oracle: JavaOracle, tmp_path: Path) -> None:
    path = tmp_path / "one.offsets"
    java_oracle.file_offsets_write(str(path), "one", [(T.jmap({"filename": "/x"}), T.jmap({"position": T.long(9)}))])
    assert standalone.dumps(standalone.load_file(path).records) == path.read_bytes()


def test_import_into_the_embedded_log_is_byte_exact(
    java_file: JavaFile, java_oracle: JavaOracle, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    result = cli(
        "import", "--from", f"standalone:{java_file.path}", "--to", f"embedded:{data_dir}", "--partitions", "5"
    )
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(data_dir / "connect-offsets.sqlite3") as db:
        rows = db.execute("SELECT partition, key, value FROM records ORDER BY partition, offset").fetchall()
    expected = java_file.expected_records(java_oracle)
    live = {k: v for k, v in expected.items() if v is not None}
    assert {bytes(k): bytes(v) for _, k, v in rows} == live, "tombstones of absent keys change nothing: not written"
    assert len(rows) == len(live)
    keys = [bytes(k) for _, k, _ in rows]
    assert [p for p, _, _ in rows] == java_oracle.partition(keys, 5), "placed as Java's producer would"


@pytest.mark.slow
@pytest.mark.kafka
def test_import_into_a_topic_is_read_back_by_kafka_offset_backing_store(
    java_file: JavaFile, java_oracle: JavaOracle, kafka_broker: TansuBroker
) -> None:
    topic = kafka_broker.unique_topic("standalone-import")
    result = cli(
        "import",
        "--from",
        f"standalone:{java_file.path}",
        "--to",
        f"kafka://{kafka_broker.bootstrap}/{topic}",
        "--partitions",
        "5",
        # Tansu under-reports end offsets after multi-record batches (docs/testing.md, "The test broker: Tansu"); one
        # record per batch keeps Java's read-to-end exact. Real Kafka needs nothing of the kind.
        "--kafka-config",
        "batch.num.messages=1",
    )
    assert result.returncode == 0, result.stderr
    live = {k: v for k, v in java_file.expected_records(java_oracle).items() if v is not None}
    records = read_topic(kafka_broker.bootstrap, topic, expect=len(live))
    assert {r.key: r.value for r in records} == live
    assert [r.partition for r in records] == java_oracle.partition([r.key for r in records if r.key], 5)
    for connector, entries in java_file.writes.items():
        partitions = [p for p, _ in entries]
        found, _ = java_oracle.offsets_read(kafka_broker.bootstrap, topic, connector, partitions, num_partitions=5)
        state: dict[str, Any] = {}
        for partition, offset in entries:
            state[canon(from_java(partition))] = None if offset is None else canon(from_java(offset))
        assert [None if f is None else canon(from_java(f)) for f in found] == [
            state[canon(from_java(p))] for p in partitions
        ], connector


@pytest.mark.slow
def test_a_file_we_export_is_loaded_by_file_offset_backing_store(java_oracle: JavaOracle, tmp_path: Path) -> None:
    connector = unique("export-src")
    partitions = [
        T.jmap([("table", "orders"), ("db", "shop")]),
        T.jmap({"filename": "/tmp/ünïcödé \U0001f680.txt"}),
        T.jmap({"gone": "yes"}),
    ]
    offsets = [T.jmap([("ts", T.long(5)), ("id", T.long(-1))]), T.jmap({"position": T.long(2**40)}), None]
    keys = java_oracle.json_encode([T.jlist([connector, p]) for p in partitions])
    values = java_oracle.json_encode(offsets)
    data_dir = tmp_path / "data"
    source = tmp_path / "seed.offsets"
    standalone.write_file(source, [RawRecord(k, v) for k, v in zip(keys, values, strict=True) if k is not None])
    assert cli("import", "--from", f"standalone:{source}", "--to", f"embedded:{data_dir}").returncode == 0
    out = tmp_path / "exported.offsets"
    exported = cli("export", "--from", f"embedded:{data_dir}", "--to", f"standalone:{out}")
    assert exported.returncode == 0, exported.stderr

    found, listed = java_oracle.file_offsets_read(str(out), connector, partitions)
    assert [None if f is None else canon(from_java(f)) for f in found] == [
        canon(from_java(offsets[0])),
        canon(from_java(offsets[1])),
        None,
    ]
    assert sorted(canon(from_java(p)) for p in listed) == sorted(canon(from_java(p)) for p in partitions[:2])


@pytest.mark.slow
def test_a_filestream_connector_resumes_from_an_exported_file(java_oracle: JavaOracle, tmp_path: Path) -> None:
    connector = unique("fs-resume")
    # ASCII: FileStreamSourceTask counts emitted chars but skips bytes on resume (equal only for ASCII).
    lines = [f"line {i}" for i in range(10)]
    source_file = tmp_path / "input.txt"
    source_file.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    position = sum(len(line) + 1 for line in lines[:6])
    (key,) = java_oracle.json_encode([T.jlist([connector, T.jmap({"filename": str(source_file)})])])
    (value,) = java_oracle.json_encode([T.jmap({"position": T.long(position)})])
    assert key is not None and value is not None
    seed = tmp_path / "seed.offsets"
    standalone.write_file(seed, [RawRecord(key, value)])
    data_dir = tmp_path / "data"
    assert cli("import", "--from", f"standalone:{seed}", "--to", f"embedded:{data_dir}").returncode == 0
    exported = tmp_path / "connect.offsets"
    assert cli("export", "--from", f"embedded:{data_dir}", "--to", f"standalone:{exported}").returncode == 0

    emitted = java_oracle.filestream_run(
        "127.0.0.1:1",  # never contacted: the offsets live in the file
        "unused",
        connector,
        str(source_file),
        expect_lines=4,
        timeout_s=60,
        extra_config={
            "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
            "offset.storage.file.filename": str(exported),
        },
    )
    assert emitted == lines[6:], "exactly the lines after the exported position"
    # And the task committed its new position into our file, in the format we read.
    after = {r.key: r.value for r in standalone.load_file(exported).records}
    total = sum(len(line) + 1 for line in lines)
    assert after[key] == f'{{"position":{total}}}'.encode()


@pytest.mark.slow
@pytest.mark.parametrize("cut_fraction", [0.0, 0.05, 0.3, 0.5, 0.9, 0.999])
def test_a_truncated_java_file_imports_nothing(java_file: JavaFile, tmp_path: Path, cut_fraction: float) -> None:
    data = java_file.path.read_bytes()
    cut = tmp_path / "cut.offsets"
    cut.write_bytes(data[: int(len(data) * cut_fraction)])
    data_dir = tmp_path / "data"
    existing = tmp_path / "existing.offsets"
    standalone.write_file(existing, [RawRecord(b'["keep",{"p":1}]', b'{"o":1}')])
    assert cli("import", "--from", f"standalone:{existing}", "--to", f"embedded:{data_dir}").returncode == 0
    before = _rows(data_dir)

    result = cli("import", "--from", f"standalone:{cut}", "--to", f"embedded:{data_dir}")
    assert result.returncode == 2
    assert "byte offset" in result.stderr and "nothing was written" in result.stderr
    assert "truncated" in result.stderr or "empty" in result.stderr
    assert _rows(data_dir) == before, "the target is unchanged"


@pytest.mark.parametrize(
    ("offset_from_end", "replacement", "message"),
    [
        (None, b"\x00\x11java.util.TreeMap", "Expected HashMap but found java.util.TreeMap"),
        (1, b"\x74", "found TC_STRING"),
    ],
)
def test_a_corrupt_java_file_imports_nothing(
    java_file: JavaFile, tmp_path: Path, offset_from_end: int | None, replacement: bytes, message: str
) -> None:
    data = java_file.path.read_bytes()
    if offset_from_end is None:
        damaged = data.replace(b"\x00\x11java.util.HashMap", replacement, 1)
    else:
        damaged = data[: len(data) - offset_from_end] + replacement
    path = tmp_path / "corrupt.offsets"
    path.write_bytes(damaged)
    data_dir = tmp_path / "data"
    result = cli("import", "--from", f"standalone:{path}", "--to", f"embedded:{data_dir}")
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and "byte offset" in result.stderr
    assert not (data_dir / "connect-offsets.sqlite3").exists(), "nothing was created, nothing imported"


def _rows(data_dir: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(data_dir / "connect-offsets.sqlite3") as db:
        return db.execute("SELECT partition, offset, key, value FROM records ORDER BY partition, offset").fetchall()
