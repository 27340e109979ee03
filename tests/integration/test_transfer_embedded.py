"""Transfer semantics on the embedded log and files: selection, pruning, replacement, progress, locations.

No broker or JVM is needed for these rules; the Java-checked byte compatibility is in
test_formats_standalone.py, test_formats_cdc.py and test_transfer_migrate.py.
"""

from __future__ import annotations

import io
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.formats import kip875, standalone
from emulator.formats.model import FormatError, RawRecord
from emulator.transfer import (
    CdcLocation,
    EmbeddedLocation,
    KafkaLocation,
    Kip875Location,
    LocationError,
    Progress,
    SnapshotLocation,
    StandaloneLocation,
    TransferError,
    TransferOptions,
    parse_location,
    transfer,
)


def rec(connector: str, p: int, value: bytes | None) -> RawRecord:
    return RawRecord(f'["{connector}",{{"p":{p}}}]'.encode(), value)


def quiet() -> Progress:
    return Progress(enabled=False)


def seed(tmp_path: Path, records: list[RawRecord], name: str = "seed.offsets") -> StandaloneLocation:
    path = tmp_path / name
    standalone.write_file(path, records)
    return StandaloneLocation(path)


def test_locations_parse_by_scheme_and_by_extension(tmp_path: Path) -> None:
    assert isinstance(parse_location("kafka://h1:9092,h2:9092/connect-offsets"), KafkaLocation)
    embedded = parse_location(f"embedded:{tmp_path}/x/my-log.sqlite3")
    assert isinstance(embedded, EmbeddedLocation) and embedded.name == "my-log"
    assert isinstance(parse_location("b.avro"), SnapshotLocation)
    assert isinstance(parse_location("s.jsonl"), CdcLocation)
    assert isinstance(parse_location("o.json"), Kip875Location)
    assert isinstance(parse_location("connect.offsets"), StandaloneLocation)
    assert isinstance(parse_location("kip875:any-name.txt"), Kip875Location)
    for bad in ("kafka://host:9092", "kafka://host/a/b", "notes.txt", "snapshot:", "embedded:"):
        with pytest.raises(LocationError):
            parse_location(bad)


def test_connector_filter_live_only_and_malformed_choices(tmp_path: Path) -> None:
    source = seed(tmp_path, [rec("a", 1, b"{}"), rec("a", 2, None), rec("b", 1, b"{}"), RawRecord(b"junk", b"x")])
    target = EmbeddedLocation(tmp_path / "data", "connect-offsets")
    with pytest.raises(TransferError, match="1 record\\(s\\) have keys Connect ignores"):
        transfer(source, target, TransferOptions(), quiet())
    assert not (tmp_path / "data").exists(), "refused before anything was created"

    report = transfer(source, target, TransferOptions(connectors=frozenset({"a"}), live_only=True), quiet())
    assert (report.read, report.selected, report.written) == (4, 1, 1)
    report = transfer(source, target, TransferOptions(malformed="skip"), quiet())
    assert report.diff["summary"] == {"added": 1, "changed": 0, "removed": 0, "unchanged": 2}
    assert any("left out" in n for n in report.notes)
    report = transfer(source, target, TransferOptions(malformed="keep"), quiet())
    assert report.diff["connectors"]["(keys Connect ignores)"]["added"] == 1


def test_prune_deletes_what_the_source_lacks_for_its_connectors_only(tmp_path: Path) -> None:
    target = EmbeddedLocation(tmp_path / "data", "connect-offsets")
    first = seed(tmp_path, [rec("a", 1, b'{"o":1}'), rec("a", 2, b'{"o":2}'), rec("b", 1, b'{"o":1}')], "first.offsets")
    transfer(first, target, TransferOptions(), quiet())
    second = seed(tmp_path, [rec("a", 1, b'{"o":9}')], "second.offsets")

    plain = transfer(second, target, TransferOptions(dry_run=True), quiet())
    assert plain.diff["summary"] == {"added": 0, "changed": 1, "removed": 0, "unchanged": 0}
    pruned = transfer(second, target, TransferOptions(prune=True), quiet())
    assert pruned.diff["connectors"] == {"a": {"added": 0, "changed": 1, "removed": 1, "unchanged": 0}}
    back = transfer(target, StandaloneLocation(tmp_path / "after.offsets"), TransferOptions(), quiet())
    assert back.selected == 2
    assert {r.key: r.value for r in standalone.load_file(tmp_path / "after.offsets").records} == {
        rec("a", 1, None).key: b'{"o":9}',
        rec("b", 1, None).key: b'{"o":1}',
    }


def test_write_all_rewrites_unchanged_records(tmp_path: Path) -> None:
    source = seed(tmp_path, [rec("a", 1, b'{"o":1}')])
    target = EmbeddedLocation(tmp_path / "data", "connect-offsets")
    assert transfer(source, target, TransferOptions(), quiet()).written == 1
    assert transfer(source, target, TransferOptions(), quiet()).written == 0
    assert transfer(source, target, TransferOptions(write_all=True), quiet()).written == 1


def test_a_standalone_destination_is_merged_and_a_document_is_replaced(tmp_path: Path) -> None:
    store = tmp_path / "store.offsets"
    standalone.write_file(store, [rec("other", 1, b"keep"), rec("a", 1, b"old")])
    transfer(seed(tmp_path, [rec("a", 1, b'{"n":1}')]), StandaloneLocation(store), TransferOptions(), quiet())
    assert {r.key: r.value for r in standalone.load_file(store).records} == {
        rec("other", 1, None).key: b"keep",
        rec("a", 1, None).key: b'{"n":1}',
    }

    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps({"old": {"offsets": [{"partition": {"p": 1}, "offset": {"n": 0}}]}}))
    report = transfer(
        seed(tmp_path, [rec("a", 1, b'{"n":1}')], "x.offsets"), Kip875Location(doc), TransferOptions(), quiet()
    )
    assert report.diff["summary"] == {"added": 1, "changed": 0, "removed": 1, "unchanged": 0}
    assert [r.key for r in kip875.loads_file(doc.read_bytes()).records] == [rec("a", 1, None).key]


@pytest.mark.slow
def test_long_transfers_report_progress_on_stderr(tmp_path: Path) -> None:
    records = [rec("bulk", i, b'{"o":1}') for i in range(12_000)]
    stream = io.StringIO()
    target = EmbeddedLocation(tmp_path / "data", "connect-offsets")
    report = transfer(seed(tmp_path, records), target, TransferOptions(), Progress(stream=stream, every_s=0.0))
    assert report.written == 12_000
    lines = stream.getvalue().splitlines()
    assert "writing embedded:" in lines[-1] and lines[-1].endswith("12000/12000 records"), lines
    stream = io.StringIO()
    transfer(target, SnapshotLocation(tmp_path / "b.avro"), TransferOptions(), Progress(stream=stream, every_s=0.0))
    assert any(line.startswith("read embedded:") and "12000/12000" in line for line in stream.getvalue().splitlines())


def test_a_missing_source_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LocationError, match="does not exist"):
        transfer(
            EmbeddedLocation(tmp_path / "none", "connect-offsets"),
            SnapshotLocation(tmp_path / "b.avro"),
            TransferOptions(),
            quiet(),
        )
    with pytest.raises(LocationError, match="no such file"):
        transfer(
            StandaloneLocation(tmp_path / "none.offsets"),
            SnapshotLocation(tmp_path / "b.avro"),
            TransferOptions(),
            quiet(),
        )
    assert not (tmp_path / "none").exists() and not (tmp_path / "b.avro").exists()


def test_envelope_keys_are_refused_by_default_and_unwrapped_on_request(tmp_path: Path) -> None:
    envelope = b'{"schema":null,"payload":["engine",{"server":"mysql_binlog_source"}]}'
    source = seed(tmp_path, [RawRecord(envelope, b'{"pos":154}')])
    target = EmbeddedLocation(tmp_path / "data", "connect-offsets")
    with pytest.raises(TransferError, match="keys Connect ignores"):
        transfer(source, target, TransferOptions(), quiet())
    report = transfer(source, target, TransferOptions(unwrap_envelopes=True), quiet())
    assert report.written == 1
    assert any("1 byte-exact payloads" in n for n in report.notes)
    out = tmp_path / "out.offsets"
    transfer(target, StandaloneLocation(out), TransferOptions(), quiet())
    assert standalone.load_file(out).records == [
        RawRecord(b'["engine",{"server":"mysql_binlog_source"}]', b'{"pos":154}')
    ]


def test_an_export_replaces_a_damaged_document_but_never_merges_into_a_damaged_store(tmp_path: Path) -> None:
    source = seed(tmp_path, [rec("a", 1, b"{}")])
    broken_doc = tmp_path / "broken.avro"
    broken_doc.write_bytes(b"Obj\x01garbage")
    report = transfer(source, SnapshotLocation(broken_doc), TransferOptions(), quiet())
    assert report.written == 1 and any("is unreadable and is replaced" in n for n in report.notes)
    broken_store = tmp_path / "broken.offsets"
    broken_store.write_bytes(b"\xac\xed\x00\x05\x73")
    with pytest.raises(FormatError, match="truncated"):
        transfer(source, StandaloneLocation(broken_store), TransferOptions(), quiet())
    assert broken_store.read_bytes() == b"\xac\xed\x00\x05\x73"


def limited_file_size() -> None:
    """Run in the child before it starts: files it writes may not grow past 64 KiB (the exports
    below are ~300 KB), so the kernel refuses the write with ``EFBIG``."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


@pytest.mark.slow
def test_a_file_the_disk_refuses_is_a_one_line_error_and_the_old_file_stays(tmp_path: Path) -> None:
    """The kernel refuses the write (the CLI runs under a file-size limit, as on a disk with no
    space left): one ``error:`` line naming the file and why, exit code 2, no traceback, and the
    previous file untouched (it was a traceback from ``atomic_write``)."""
    source = seed(tmp_path, [rec(f"c{i % 7}", i, b'{"pad":"' + b"x" * 900 + b'"}') for i in range(300)])
    for destination in ("kip875:out.json", "standalone:out.offsets", "cdc:out.jsonl"):
        path = tmp_path / destination.split(":", 1)[1]
        if destination.startswith("standalone:"):  # a standalone file is merged into, so it must be one
            standalone.write_file(path, [rec("old", 0, b'{"position":1}')])
        else:
            path.write_bytes(b"old and small\n")
        old = path.read_bytes()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "emulator.cli",
                "export",
                "--from",
                f"standalone:{source.path}",
                "--to",
                f"{destination.split(':')[0]}:{path}",
                "--yes",
                "--quiet",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=limited_file_size,
            cwd=tmp_path,
        )
        assert done.returncode == 2, done.stderr
        assert (
            done.stderr
            == f"error: {destination.split(':')[0]}:{path}: cannot write: File too large; nothing was written\n"
        )
        assert path.read_bytes() == old
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == [], "a temporary file was left"
