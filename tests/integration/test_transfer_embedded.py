"""Transfer semantics on the embedded log and files: selection, pruning, replacement, progress, locations.

No broker or JVM is needed for these rules; the Java-checked byte compatibility is in
test_formats_standalone.py, test_formats_cdc.py and test_transfer_migrate.py.
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

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
            # Under the limit a .pyc written to the session's shared cache (PYTHONPYCACHEPREFIX) is cut at
            # 64 KiB without an error (one short write), and every later Python process of the session
            # failed to start ("marshal data too short"): this one writes none.
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        assert done.returncode == 2, done.stderr
        assert (
            done.stderr
            == f"error: {destination.split(':')[0]}:{path}: cannot write: File too large; nothing was written\n"
        )
        assert path.read_bytes() == old
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == [], "a temporary file was left"


# --- Ctrl-C during a direct write (QA 21 #6) -------------------------------------------------------------


def _interrupt_at_append(monkeypatch: pytest.MonkeyPatch, at: int, landed: bool = True) -> list[int]:
    """SIGINT this process (Ctrl-C) as the ``at``-th chunk's append starts, on the append's own thread;
    the main thread is then waiting for it, as the CLI's is when a person presses Ctrl-C."""
    import os
    import signal
    import time

    from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
    from emulator.model.errors import OffsetsError

    calls: list[int] = []
    original = EmbeddedOffsetLog.append

    def append(self: EmbeddedOffsetLog, entries: Any, timeout_s: float = 30.0) -> Any:
        calls.append(len(entries))
        if len(calls) == at:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)  # the chunk is still under way when the interrupt is handled
            if not landed:
                raise OffsetsError("refused for the test")
        return original(self, entries, timeout_s)

    monkeypatch.setattr(EmbeddedOffsetLog, "append", append)
    return calls


@pytest.mark.parametrize("landed", [True, False])
def test_ctrl_c_during_an_import_into_an_embedded_log_says_how_many_records_were_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], landed: bool
) -> None:
    """QA 21 #6: Ctrl-C during ``import --to embedded:DIR`` left 20,000 of 100,000 records applied and said
    only "what `import` had already sent may have been applied". The chunk under way is waited for a
    moment, so the count is exact: its records are in effect if it landed, and the rest was not written."""
    from emulator.cli.main import main

    source = seed(tmp_path, [rec("big", p, b'{"o":1}') for p in range(35_000)])
    calls = _interrupt_at_append(monkeypatch, at=3, landed=landed)
    code = main(["import", "--from", str(source.path), "--to", f"embedded:{tmp_path / 'data'}", "--quiet"])
    err = capsys.readouterr().err
    assert code == 130, err
    assert calls == [10_000, 10_000, 10_000], "nothing was sent after the interrupt"
    done = 30_000 if landed else 20_000
    log = f"embedded:{tmp_path / 'data' / 'connect-offsets.sqlite3'}"
    assert (
        f"interrupted: `import` had written {done:,} of its 35,000 records to {log}, which are in effect; the other "
        f"{35_000 - done:,} were not written (running the same command again writes the rest)"
    ) in err, err
    assert "may have been applied" not in err
    monkeypatch.undo()
    held = EmbeddedLocation(tmp_path / "data", "connect-offsets").read(_ctx()).records
    assert len(held) == done


def _ctx() -> Any:
    from emulator.transfer.options import TransferContext

    return TransferContext(TransferOptions(), quiet())


def test_ctrl_c_while_the_source_is_read_says_nothing_was_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Interrupted before anything was sent (reading the source file), the import changed nothing, and
    says so instead of "may have been applied"."""
    from emulator.cli.main import main

    source = seed(tmp_path, [rec("c", 1, b'{"o":1}')])

    def interrupted(*_args: Any, **_kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(standalone, "loads", interrupted)
    code = main(["import", "--from", str(source.path), "--to", f"embedded:{tmp_path / 'data'}", "--quiet"])
    err = capsys.readouterr().err
    assert code == 130
    assert err == "interrupted: `import` sent no change (only its dry run, if any): nothing was changed\n", err
    assert not (tmp_path / "data").exists()
