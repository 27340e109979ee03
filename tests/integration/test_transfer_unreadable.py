"""Imports and migrations refuse values Connect cannot read back, on every destination, and write nothing.

Issue 14: a standalone file written by Apache Kafka's ``FileOffsetBackingStore`` with one byte flipped
inside an offset value imported with exit 0 ("wrote 2 change(s)") into an embedded log, a daemon and
a fresh directory, although Java's ``JsonConverter`` cannot parse that value: the partition then read as
``"offset": null``, and the import overwrote an operator's change to the other partition. Here every
such source (that file, a snapshot and a topic holding a corrupted value, values that are not offset
maps, a value beyond Jackson's limits) is refused, naming the record, the byte (for files) and why,
with each destination's bytes unchanged; ``--malformed skip`` writes the rest and ``keep`` counts what
it wrote. That each such value is unreadable is Java's verdict (``offset_check``), not ours.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.formats import snapshot, standalone
from emulator.formats.model import RawRecord
from emulator.transfer import (
    DaemonLocation,
    EmbeddedLocation,
    KafkaLocation,
    Location,
    SnapshotLocation,
    StandaloneLocation,
    TransferError,
    TransferOptions,
    transfer,
)
from emulator.transfer.progress import Progress
from tests.fixtures.broker import TansuBroker
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonProcess
from tests.integration.connect_helpers import from_java, read_topic, unique
from tests.oracle import JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.jvm, pytest.mark.kafka]

PARTITION_A = T.jmap({"filename": "/data/a.txt"})
PARTITION_B = T.jmap({"filename": "/data/b.txt"})


def quiet() -> Progress:
    return Progress(enabled=False)


@dataclass
class JavaFiles:
    """Java's file, the same file with one byte flipped in partition a's value, and where that value sits."""

    connector: str
    good: Path
    flipped: Path
    value_at: int
    key_a: bytes
    key_b: bytes

    def records(self, path: Path) -> dict[bytes, bytes | None]:
        return {r.key: r.value for r in standalone.load_file(path).records}


@pytest.fixture(scope="module")
def java_files(java_oracle: JavaOracle, tmp_path_factory: pytest.TempPathFactory) -> JavaFiles:
    directory = tmp_path_factory.mktemp("java-file")
    connector = unique("file-src")
    good = directory / "connect.offsets"
    entries = [(PARTITION_A, T.jmap({"position": T.long(151)})), (PARTITION_B, T.jmap({"position": T.long(42)}))]
    java_oracle.file_offsets_write(str(good), connector, entries)
    data = good.read_bytes()
    value_at = data.index(b'{"position":151}')
    flipped = directory / "flipped.offsets"
    flipped.write_bytes(data[: value_at + 12] + b"x" + data[value_at + 13 :])  # {"position":x51}
    # Java itself: the file loads, and a task gets no offset for partition a (CRITICAL in Connect's log).
    offsets, _ = java_oracle.file_offsets_read(str(flipped), connector, [PARTITION_A, PARTITION_B])
    assert offsets[0] is None and from_java(offsets[1]) == {"position": 42}
    key_a, key_b = java_oracle.json_encode([T.jlist([connector, PARTITION_A]), T.jlist([connector, PARTITION_B])])
    assert key_a is not None and key_b is not None
    return JavaFiles(connector, good, flipped, value_at, key_a, key_b)


# --- destinations, with what "unchanged" means for each ----------------------------------------


@dataclass
class Destination:
    name: str
    location: Location
    state: Callable[[], Any]
    """Everything the destination holds that a transfer could change, as bytes (or byte-exact data)."""


def embedded_destination(directory: Path) -> Destination:
    def state() -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(directory.iterdir())} if directory.exists() else {}

    return Destination("embedded", EmbeddedLocation(directory, "connect-offsets"), state)


def daemon_destination(daemon: DaemonProcess, connectors: list[str]) -> Destination:
    def state() -> Any:
        answer = httpx.get(daemon.url + "/offsets/records", params={"connector": connectors}, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()["records"]

    return Destination("daemon", DaemonLocation(daemon.url), state)


def kafka_destination(broker: TansuBroker, topic: str) -> Destination:
    def state() -> list[tuple[int, int, bytes | None, bytes | None]]:
        records = read_topic(broker.bootstrap, topic, expect=1, timeout_s=20, settle_s=1.0)
        return [(r.partition, r.offset, r.key, r.value) for r in records]

    return Destination("kafka", KafkaLocation(broker.bootstrap, topic), state)


def operator_change(files: JavaFiles, tmp_path: Path) -> Path:
    """A standalone file holding an operator's later change to partition b: position 99."""
    path = tmp_path / f"operator-{unique('x')}.offsets"
    standalone.write_file(path, [RawRecord(files.key_b, b'{"position":99}')])
    return path


@pytest.fixture
def destinations(
    java_files: JavaFiles, tmp_path: Path, embedded_daemon: DaemonProcess, kafka_broker: TansuBroker
) -> list[Destination]:
    """The three kinds of store, each holding Java's good offsets and then the operator's change."""
    found = [
        embedded_destination(tmp_path / "embedded"),
        daemon_destination(embedded_daemon, [java_files.connector]),
        kafka_destination(kafka_broker, kafka_broker.unique_topic("unreadable")),
    ]
    change = operator_change(java_files, tmp_path)
    for destination in found:
        options = TransferOptions(partitions=3)
        transfer(StandaloneLocation(java_files.good), destination.location, options, quiet())
        transfer(StandaloneLocation(change), destination.location, options, quiet())
    return found


def refused_everywhere(sources: Sequence[tuple[Location, list[str]]], destinations: list[Destination]) -> None:
    """Each transfer (and its dry run) is refused naming its words, and every destination is as it was."""
    before = [d.state() for d in destinations]
    for source, words in sources:
        for destination in destinations:
            for dry_run in (True, False):
                with pytest.raises(TransferError) as raised:
                    transfer(source, destination.location, TransferOptions(dry_run=dry_run), quiet())
                for word in [*words, "Nothing was written"]:
                    assert word in str(raised.value), f"{destination.name}: {raised.value}"
    for destination, state in zip(destinations, before, strict=True):
        assert destination.state() == state, f"{destination.name} changed"


def connect_reads(java_oracle: JavaOracle, value: bytes) -> bool:
    (answer,) = java_oracle.offset_check([value])
    readable: bool = answer["readable"]
    return readable


# --- the cases --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_java_file_with_a_flipped_value_byte_is_refused_on_every_destination(
    java_files: JavaFiles, destinations: list[Destination]
) -> None:
    at = java_files.value_at
    words = [
        "1 record(s) of standalone:",
        f"value at byte offset {at} of the file",
        "Unexpected character (code 120)",
        f"(at byte 12 of the value, byte offset {at + 12} of the file)",
    ]
    refused_everywhere([(StandaloneLocation(java_files.flipped), words)], destinations)


@pytest.mark.slow
def test_skip_writes_the_rest_and_the_unreadable_partition_keeps_its_value(
    java_files: JavaFiles, destinations: list[Destination]
) -> None:
    for destination in destinations:
        report = transfer(
            StandaloneLocation(java_files.flipped),
            destination.location,
            TransferOptions(malformed="skip", connectors=frozenset({java_files.connector})),
            quiet(),
        )
        assert report.written == 1, destination.name
        assert any("with values Connect cannot read back left out" in n for n in report.notes)
        held = {
            r.key: r.value
            for r in destination.location.read(_ctx(java_files.connector)).records
            if r.key in (java_files.key_a, java_files.key_b)
        }
        assert held == {java_files.key_a: b'{"position":151}', java_files.key_b: b'{"position":42}'}, destination.name


def _ctx(connector: str) -> Any:
    from emulator.transfer.options import TransferContext

    return TransferContext(TransferOptions(connectors=frozenset({connector})), quiet())


@pytest.mark.slow
def test_a_snapshot_and_a_topic_with_a_corrupted_value_are_refused(
    java_files: JavaFiles,
    destinations: list[Destination],
    kafka_broker: TansuBroker,
    java_oracle: JavaOracle,
    tmp_path: Path,
) -> None:
    corrupted = b'{"position":4\x002}'
    assert not connect_reads(java_oracle, corrupted)
    backup = tmp_path / "backup.avro"
    records = [
        RawRecord(java_files.key_a, b'{"position":151}', 0, 3, 1),
        RawRecord(java_files.key_b, corrupted, 2, 8, 2),
    ]
    backup.write_bytes(snapshot.dumps(records, source="a damaged topic"))

    topic = kafka_broker.unique_topic("corrupted-source")
    kafka_broker.create_topic(topic, 3, {"cleanup.policy": "compact"})
    written = kafka_broker.produce_raw(
        topic, [(java_files.key_a, b'{"position":151}', 0), (java_files.key_b, corrupted, 1)]
    )
    partition, offset = written[1]
    refused_everywhere(
        [
            (SnapshotLocation(backup), ["record 2 of 2", "Kafka partition 2 offset 8"]),
            (
                KafkaLocation(kafka_broker.bootstrap, topic),
                [f"Kafka partition {partition} offset {offset}", "not JSON"],
            ),
        ],
        destinations,
    )


NOT_OFFSETS = [b"[1]", b'"x"', b"42", b'{"position":{"line":3}}', b'{"position":' + b"9" * 1001 + b"}"]


@pytest.mark.slow
def test_values_that_are_not_offsets_or_beyond_the_limits_are_refused(
    java_files: JavaFiles, destinations: list[Destination], java_oracle: JavaOracle, tmp_path: Path
) -> None:
    assert not any(a["readable"] for a in java_oracle.offset_check(NOT_OFFSETS)), "Java reads none of them"
    sources: list[tuple[Location, list[str]]] = []
    for index, value in enumerate(NOT_OFFSETS):
        path = tmp_path / f"not-offset-{index}.offsets"
        standalone.write_file(
            path, [RawRecord(java_files.key_b, b'{"position":43}'), RawRecord(java_files.key_a, value)]
        )
        sources.append((StandaloneLocation(path), ["record 2 of 2", "value at byte offset"]))
    refused_everywhere(sources, destinations)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout_s=120)


@pytest.mark.slow
def test_the_cli_refuses_and_keep_says_how_many_unreadable_values_it_wrote(
    java_files: JavaFiles, tmp_path: Path
) -> None:
    target = f"embedded:{tmp_path / 'data'}"
    refused = cli("import", "--from", f"standalone:{java_files.flipped}", "--to", target, "--quiet")
    assert refused.returncode == 2, refused
    assert "have values Connect cannot read back" in refused.stderr and not (tmp_path / "data").exists()
    dry = cli(
        "import", "--from", f"standalone:{java_files.flipped}", "--to", target, "--malformed", "keep", "--dry-run"
    )
    assert dry.returncode == 0 and "1 value(s) Connect cannot read back would be written as-is" in dry.stderr
    kept = cli("import", "--from", f"standalone:{java_files.flipped}", "--to", target, "--malformed", "keep")
    assert kept.returncode == 0, kept
    assert "note: 1 value(s) Connect cannot read back were written as-is (--malformed keep)" in kept.stderr


def test_the_daemon_refuses_on_its_own_and_counts_what_allow_malformed_wrote(
    java_files: JavaFiles, embedded_daemon: DaemonProcess, java_oracle: JavaOracle
) -> None:
    """A client that does not check (curl, an older CLI) meets the same rule at the daemon."""
    connector = unique("raw-src")
    key = f'["{connector}",{{"p":1}}]'.encode()
    bad = java_files.flipped.read_bytes()[java_files.value_at : java_files.value_at + 16]
    assert bad == b'{"position":x51}' and not connect_reads(java_oracle, bad)

    def post(value: bytes, **params: str) -> httpx.Response:
        body = {"records": [{"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}]}
        return httpx.post(embedded_daemon.url + "/offsets/records", json=body, params=params, timeout=30)

    assert post(b'{"position":1}').status_code == 200
    for params in ({}, {"dry_run": "true"}):
        refused = post(bad, **params)
        assert refused.status_code == 400, refused.text
        message = refused.json()["message"]
        assert "1 record value(s) Connect cannot read back (first: records[0], key" in message
        assert "Unexpected character (code 120)" in message and "(at byte 12 of the value)" in message
    offsets = httpx.get(f"{embedded_daemon.url}/connectors/{connector}/offsets", timeout=30).json()
    assert offsets == {"offsets": [{"partition": {"p": 1}, "offset": {"position": 1}}]}, "the good offset stays"
    kept = post(bad, allow_malformed="true")
    assert kept.status_code == 200 and kept.json()["unreadable_values"] == 1
    assert "1 value(s) Connect cannot read back were written as-is" in kept.json()["message"]


def test_embedded_and_daemon_sources_name_the_records_log_coordinates(
    embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog

    connector = unique("log-src")
    key = f'["{connector}",{{"p":1}}]'.encode()
    log = EmbeddedOffsetLog(tmp_path / "data", partitions=3)
    log.open()
    try:
        ((partition, offset),) = [(p.partition, p.offset) for p in log.append([(key, b'"x"')])]
    finally:
        log.close()
    out = StandaloneLocation(tmp_path / "out.offsets")
    with pytest.raises(TransferError, match=rf"Kafka partition {partition} offset {offset}: not an offset"):
        transfer(EmbeddedLocation(tmp_path / "data", "connect-offsets"), out, TransferOptions(), quiet())

    body = {"records": [{"key": base64.b64encode(key).decode(), "value": base64.b64encode(b"42").decode()}]}
    kept = httpx.post(f"{embedded_daemon.url}/offsets/records", json=body, params={"allow_malformed": "true"})
    assert kept.status_code == 200, kept.text
    options = TransferOptions(connectors=frozenset({connector}))
    with pytest.raises(TransferError, match="Offsets must be specified as a Map"):
        transfer(DaemonLocation(embedded_daemon.url), out, options, quiet())
    assert not out.path.exists()
