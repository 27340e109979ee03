"""Transfers between files, without a daemon or a JVM: what a document destination reports it holds,
dry runs that refuse as the real run does, CDC lines and their line breaks, envelope keys that
collide, progress on long transfers, mistyped location kinds, and the CLI's one-line refusals
(docs/transfers.md).

The CLI runs in this process (``emulator.cli.main.main``): these are file behaviours, and a
subprocess per case would cost more than the cases themselves.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from emulator.cli.main import main
from emulator.formats import cdc_state, kip875, snapshot, standalone
from emulator.formats.diff import compute_diff
from emulator.formats.model import FormatError, RawRecord, latest_per_key
from emulator.transfer import (
    CdcLocation,
    DaemonLocation,
    Kip875Location,
    LocationError,
    SnapshotLocation,
    StandaloneLocation,
    TransferError,
    TransferOptions,
    parse_location,
    transfer,
)
from emulator.transfer.locations.base import Location
from emulator.transfer.progress import Progress

A = RawRecord(b'["pg",{"server":"a"}]', b'{"lsn":1}')
NOT_AN_OFFSET = RawRecord(b'["pg",{"server":"b"}]', b"42")
JUNK = RawRecord(b"junk", b'{"lsn":3}')


def quiet() -> Progress:
    return Progress(enabled=False)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([*args, "--quiet"] if args[0] in ("export", "import", "migrate") else list(args))
    out, err = capsys.readouterr()
    return code, out, err


def mixed_standalone(tmp_path: Path) -> Path:
    """A standalone file holding a good record, a value that is no offset map, and a key Connect ignores."""
    path = tmp_path / "mk.offsets"
    standalone.write_file(path, [A, NOT_AN_OFFSET, JUNK])
    return path


# --- what a document destination holds ----------------------------------------------------------------


def test_a_kip875_export_reports_the_records_the_file_holds_not_those_offered(tmp_path: Path) -> None:
    out = Kip875Location(tmp_path / "mk.json")
    report = transfer(StandaloneLocation(mixed_standalone(tmp_path)), out, TransferOptions(malformed="keep"), quiet())
    held = kip875.loads_file(out.path.read_bytes()).records
    assert held == [A]
    assert (report.written, report.unreadable_values) == (1, 0), "written counts what the file holds"
    assert report.diff["summary"] == {"added": 1, "changed": 0, "removed": 0, "unchanged": 0}
    assert report.as_dict()["written"] == 1
    assert not any("written as-is" in n or "copied as-is" in n for n in report.notes), report.notes
    assert any("cannot be written as KIP-875 JSON and were left out" in n for n in report.notes)
    dry = transfer(
        StandaloneLocation(mixed_standalone(tmp_path)),
        Kip875Location(tmp_path / "dry.json"),
        TransferOptions(malformed="keep", dry_run=True),
        quiet(),
    )
    assert dry.diff["summary"]["added"] == 1 and dry.unreadable_values == 0, "a dry run plans what the file would hold"


def test_the_cli_summary_of_a_kip875_export_counts_what_was_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = mixed_standalone(tmp_path)
    code, out, _ = cli(
        capsys, "migrate", "--from", str(source), "--to", f"kip875:{tmp_path / 'mk.json'}", "--malformed", "keep"
    )
    assert code == 0
    assert "wrote 1 change(s) (1 record(s) written)" in out.splitlines()[0]


def test_a_cdc_dry_run_refuses_what_the_real_run_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = str(mixed_standalone(tmp_path))
    destination = f"cdc:{tmp_path / 'mk.jsonl'}"
    dry = cli(capsys, "migrate", "--from", source, "--to", destination, "--malformed", "keep", "--dry-run")
    real = cli(capsys, "migrate", "--from", source, "--to", destination, "--malformed", "keep")
    error = 'error: the value of key ["pg",{"server":"b"}] is a int, not an offset map; nothing was written'
    assert real[0] == 2 and error in real[2].splitlines()
    assert dry[0] == 2 and error in dry[2].splitlines(), dry
    assert dry[1] == real[1] == "" and not (tmp_path / "mk.jsonl").exists()


# --- a document destination's report is what the file holds, read back -----------------------------------

# Bytes a producer other than Connect may have written: Connect reads them, but a document format holds
# their parsed content, which reads back as Jackson's encoding of it (docs/transfers.md).
SPACED = RawRecord(b'["w1", {"a": 1}]', b'{"pos": 1}')
TRAILING_ZERO = RawRecord(b'["w1",{"a":2}]', b'{"pos":2.50}')
OTHER = RawRecord(b'["w2",{"b":"x"}]', b'{"lsn":1E2}')
SAME_KEY_LATER = RawRecord(b'["w1",{"a":1}]', b'{"pos":7}')
"""The canonical spelling of ``SPACED``'s key, later in the source: the file holds one entry for both
(a ``kip875:`` file leaves ``SPACED`` out, as no task or GET reads a key in its bytes)."""
EMPTY = RawRecord(b'["w1",{"a":3}]', b"")
NULL = RawRecord(b'["w1",{"a":4}]', b"null")
"""Values Connect reads as null without them being tombstones: the partition stays listed, no offset."""

DOCUMENTS = {"kip875": (Kip875Location, kip875.loads_file), "cdc": (CdcLocation, cdc_state.loads_file)}


def standalone_of(tmp_path: Path, *records: RawRecord) -> StandaloneLocation:
    path = tmp_path / "source.offsets"
    standalone.write_file(path, records)
    return StandaloneLocation(path)


def entries(diff: dict[str, object]) -> list[tuple[str, str, str | None, str | None]]:
    listed = diff["entries"]
    assert isinstance(listed, list)
    return sorted((e["key"], e["status"], e["old"], e["new"]) for e in listed)


@pytest.mark.parametrize("kind", sorted(DOCUMENTS))
def test_exporting_twice_reports_what_the_file_holds_then_no_change(tmp_path: Path, kind: str) -> None:
    """The specification: the first export reports the diff between nothing and what the file holds
    when read back, and a second one reports no change (docs/transfers.md, step 5)."""
    location, load = DOCUMENTS[kind]
    source = standalone_of(tmp_path, SPACED, TRAILING_ZERO, OTHER, SAME_KEY_LATER)
    out = location(tmp_path / f"out.{kind}")
    first = transfer(source, out, TransferOptions(), quiet())
    data = out.path.read_bytes()
    held = list(latest_per_key(load(data).records).values())
    assert sorted((r.key, r.value) for r in held) == [
        (b'["w1",{"a":1}]', b'{"pos":7}'),
        (b'["w1",{"a":2}]', b'{"pos":2.5}'),
        (b'["w2",{"b":"x"}]', b'{"lsn":100.0}'),
    ]
    expected = compute_diff(lambda _key: None, held).as_dict()
    assert first.diff["summary"] == expected["summary"] == {"added": 3, "changed": 0, "removed": 0, "unchanged": 0}
    assert entries(first.diff) == entries(expected)
    assert first.written == 3
    second = transfer(source, out, TransferOptions(), quiet())
    assert second.diff["summary"] == {"added": 0, "changed": 0, "removed": 0, "unchanged": 3}, second.diff
    assert second.changes() == []
    assert out.path.read_bytes() == data
    dry = transfer(source, out, TransferOptions(dry_run=True), quiet())
    assert dry.diff["summary"]["unchanged"] == 3 and dry.changes() == []


@pytest.mark.parametrize("kind", sorted(DOCUMENTS))
def test_a_value_that_reads_as_null_is_left_out_of_a_document_with_a_note(tmp_path: Path, kind: str) -> None:
    """A null offset in a KIP-875 body or a CDC state is a deletion: a record whose value is empty or
    ``null`` (not a tombstone) cannot be held, so it is left out, and the report does not list it."""
    location, load = DOCUMENTS[kind]
    out = location(tmp_path / f"out.{kind}")
    report = transfer(standalone_of(tmp_path, TRAILING_ZERO, EMPTY, NULL), out, TransferOptions(), quiet())
    assert [(r.key, r.value) for r in load(out.path.read_bytes()).records] == [(TRAILING_ZERO.key, b'{"pos":2.5}')]
    assert [e["key"] for e in report.changes()] == [TRAILING_ZERO.key.decode()]
    assert report.written == 1
    assert any("2 record(s) whose value reads as null without being a tombstone" in n for n in report.notes)
    again = transfer(standalone_of(tmp_path, TRAILING_ZERO, EMPTY, NULL), out, TransferOptions(), quiet())
    assert again.changes() == []
    # a file that held a live offset for that key no longer does: that is a removal, and reported as one
    previous = location(tmp_path / f"previous.{kind}")
    transfer(standalone_of(tmp_path, RawRecord(EMPTY.key, b'{"pos":3}')), previous, TransferOptions(), quiet())
    replaced = transfer(standalone_of(tmp_path, EMPTY), previous, TransferOptions(), quiet())
    assert [(e["status"], e["old"]) for e in replaced.changes()] == [("removed", '{"pos":3}')]
    if kind == "cdc":  # a CDC file holding no state is empty, and its import refuses it (it holds nothing to import)
        assert previous.path.read_bytes() == b""
    else:
        assert load(previous.path.read_bytes()).records == []


@pytest.mark.parametrize("kind", ["standalone", "snapshot"])
def test_the_byte_preserving_exports_hold_the_bytes_and_report_no_change_the_second_time(
    tmp_path: Path, kind: str
) -> None:
    """Standalone files and snapshots hold key and value bytes as they are (an empty value too)."""
    records = [SPACED, TRAILING_ZERO, EMPTY, NULL, SAME_KEY_LATER]
    out: Location = (
        StandaloneLocation(tmp_path / "out.offsets") if kind == "standalone" else SnapshotLocation(tmp_path / "o.avro")
    )
    first = transfer(standalone_of(tmp_path, *records), out, TransferOptions(), quiet())
    assert first.diff["summary"]["added"] == first.written == 5
    assert entries(first.diff) == sorted(
        (r.key.decode(), "added", None, r.value.decode()) for r in records if r.value is not None
    )
    data = out.path.read_bytes()
    held = standalone.load_file(out.path) if kind == "standalone" else snapshot.load_file(out.path)[0]
    assert sorted((r.key, r.value) for r in held.records) == sorted((r.key, r.value) for r in records)
    second = transfer(standalone_of(tmp_path, *records), out, TransferOptions(), quiet())
    assert second.changes() == [] and second.diff["summary"]["unchanged"] == 5
    if kind == "standalone":
        assert out.path.read_bytes() == data


# --- CDC lines -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\u0085"], ids=["U+2028", "U+2029", "U+0085"])
def test_a_cdc_state_with_a_unicode_line_break_in_a_string_round_trips(tmp_path: Path, char: str) -> None:
    state = {"sourcePartition": {"server": f"db{char}1"}, "sourceOffset": {"file": f"bin{char}log", "pos": 4}}
    line = json.dumps({"connector": "pg", "state": state}, ensure_ascii=False) + "\n"
    first = tmp_path / "first.jsonl"
    first.write_text(line, encoding="utf-8")  # raw, as Jackson writes it
    store = StandaloneLocation(tmp_path / "store.offsets")
    imported = transfer(CdcLocation(first), store, TransferOptions(), quiet())
    assert imported.written == 1
    exported = CdcLocation(tmp_path / "exported.jsonl")
    transfer(store, exported, TransferOptions(), quiet())
    assert len(exported.path.read_bytes().split(b"\n")) == 2, "one state, one line"
    again = transfer(exported, store, TransferOptions(), quiet())
    assert again.diff["summary"]["unchanged"] == 1 and again.written == 0, "the same key and value bytes"
    ((key, value),) = [(r.key, r.value) for r in standalone.load_file(store.path).records]
    assert json.loads(key) == ["pg", state["sourcePartition"]] and json.loads(value or b"") == state["sourceOffset"]


def test_a_cdc_file_may_start_with_a_byte_order_mark_and_end_lines_with_crlf() -> None:
    line = b'{"connector":"c","state":{"sourcePartition":{"p":1},"sourceOffset":{"o":1}}}'
    (record,) = cdc_state.loads_file(b"\xef\xbb\xbf" + line + b"\r\n").records
    assert record == RawRecord(b'["c",{"p":1}]', b'{"o":1}')


def test_a_cdc_line_holding_an_array_is_called_an_array() -> None:
    with pytest.raises(FormatError) as info:
        cdc_state.loads_file(b"[1,2]\n", default_connector="engine")
    assert "line 1 is a JSON array where a state object is expected" in str(info.value)
    assert "bare state" not in str(info.value)


# --- schema-envelope keys ---------------------------------------------------------------------------------

ENVELOPE = b'{"schema":null,"payload":["engine",{"server":"flink1"}]}'
PLAIN = b'["engine",{"server":"flink1"}]'


def test_an_unwrapped_envelope_colliding_with_its_plain_key_is_named_with_both_values(tmp_path: Path) -> None:
    source = tmp_path / "env.offsets"
    standalone.write_file(source, [RawRecord(ENVELOPE, b'{"lsn":777}'), RawRecord(PLAIN, b'{"lsn":888}')])
    out = StandaloneLocation(tmp_path / "out.offsets")
    report = transfer(StandaloneLocation(source), out, TransferOptions(unwrap_envelopes=True), quiet())
    named = [n for n in report.notes if "given twice" in n]
    assert len(named) == 1, report.notes
    note = named[0]
    assert note.startswith(f"key {PLAIN.decode()} is given twice with different values")
    assert '{"lsn":777}' in note and '{"lsn":888}' in note and ENVELOPE.decode() in note
    assert 'value {"lsn":888}, was kept' in note, "the later record in the source's order, as compaction keeps"
    assert [(r.key, r.value) for r in standalone.load_file(out.path).records] == [(PLAIN, b'{"lsn":888}')]
    same = tmp_path / "same.offsets"
    standalone.write_file(same, [RawRecord(ENVELOPE, b'{"lsn":1}'), RawRecord(PLAIN, b'{"lsn":1}')])
    quiet_report = transfer(
        StandaloneLocation(same), StandaloneLocation(tmp_path / "o2.offsets"), TransferOptions(unwrap_envelopes=True)
    )
    assert not any("given twice" in n for n in quiet_report.notes), "equal values lose nothing"


def test_refusing_an_envelope_key_points_at_unwrap_envelopes(tmp_path: Path) -> None:
    source = tmp_path / "env.offsets"
    standalone.write_file(source, [RawRecord(ENVELOPE, b'{"lsn":777}')])
    with pytest.raises(TransferError) as info:
        transfer(StandaloneLocation(source), StandaloneLocation(tmp_path / "o.offsets"), TransferOptions(), quiet())
    assert "--malformed skip" in str(info.value) and "--unwrap-envelopes" in str(info.value)


# --- progress ---------------------------------------------------------------------------------------------

COUNT = 2_100


def progress_lines(source: Location, destination: Location, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setattr("emulator.transfer.progress.PROGRESS_THRESHOLD", 2_000)
    stream = io.StringIO()
    transfer(source, destination, TransferOptions(), Progress(stream, every_s=0))
    return stream.getvalue().splitlines()


def many() -> list[RawRecord]:
    return [RawRecord(f'["c",{{"p":{i}}}]'.encode(), f'{{"o":{i}}}'.encode()) for i in range(COUNT)]


@pytest.mark.parametrize("kind", ["standalone", "cdc", "kip875", "snapshot"])
def test_every_file_source_and_document_destination_reports_progress(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / f"many.{kind}"
    if kind == "standalone":
        standalone.write_file(path, many())
    else:
        path.write_bytes(
            snapshot.dumps(many(), source="t")
            if kind == "snapshot"
            else kip875.dumps_file(many())[0]
            if kind == "kip875"
            else cdc_state.dumps_file(many())[0]
        )
    source = parse_location(f"{kind}:{path}")
    destination = CdcLocation(tmp_path / "out.jsonl") if kind != "cdc" else SnapshotLocation(tmp_path / "o.avro")
    lines = progress_lines(source, destination, monkeypatch)
    assert f"reading {source.description}: 1000/{COUNT} records" in lines
    assert f"read {source.description}: {COUNT}/{COUNT} records" in lines
    assert f"checking the values of {source.description}: 1000/{COUNT} records" in lines
    assert f"encoding {destination.description}: 1000/{COUNT} records" in lines


def test_a_standalone_destination_reports_its_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "many.jsonl"
    source.write_bytes(cdc_state.dumps_file(many())[0])
    destination = StandaloneLocation(tmp_path / "out.offsets")
    lines = progress_lines(CdcLocation(source), destination, monkeypatch)
    assert f"writing {destination.description}: 1000/{COUNT} records" in lines


def test_a_daemon_source_reports_once_its_answer_has_arrived(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon answers in one response: its count is reported when it arrives (docs/transfers.md)."""
    body = {"records": [{"key": "WyJjIix7InAiOjF9XQ==", "value": None}] * COUNT, "store": "effective"}
    monkeypatch.setattr(DaemonLocation, "_call", lambda *_args, **_kwargs: body)
    source = DaemonLocation("http://127.0.0.1:9")
    lines = progress_lines(source, SnapshotLocation(tmp_path / "o.avro"), monkeypatch)
    assert f"read http://127.0.0.1:9/offsets/records: {COUNT}/{COUNT} records" in lines


# --- location strings -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "closest"),
    [("risingwave:rw.jsonl", "did you mean cdc:rw.jsonl with --risingwave?"), ("snapshto:bk.avro", "snapshot:bk.avro")],
)
def test_a_mistyped_location_kind_is_refused_naming_the_kinds_and_the_closest(text: str, closest: str) -> None:
    with pytest.raises(LocationError) as info:
        parse_location(text)
    message = str(info.value)
    assert closest in message
    assert "cdc:, embedded:, kip875:, snapshot:, standalone:, kafka://, http://, https://" in message
    assert f"./{text}" in message, "how to name such a file"


def test_a_path_or_a_drive_letter_before_the_colon_is_a_file_name() -> None:
    assert isinstance(parse_location("./risingwave:rw.jsonl"), CdcLocation)
    assert isinstance(parse_location("C:backup.avro"), SnapshotLocation)
    assert isinstance(parse_location("kip875:a:b.json"), Kip875Location)


def test_the_cli_writes_no_file_named_after_a_mistyped_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    standalone.write_file(tmp_path / "s.offsets", [A])
    code, _, err = cli(capsys, "migrate", "--from", "s.offsets", "--to", "snapshto:bk.avro")
    assert code == 2 and "did you mean snapshot:bk.avro?" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.offsets"]


# --- connector names --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["get"],
        ["reset", "--yes"],
        ["alter", "--file", "-"],
        ["claim", "--owner", "me"],
        ["claims"],
        ["release", "--epoch", "1"],
        ["history"],
        ["rollback", "--to", "now", "--yes"],
    ],
)
def test_a_connector_name_that_is_not_utf8_is_one_line_and_exit_2(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    name = b"c\xed\xb0\x80".decode("utf-8", "surrogateescape")  # what Python makes of such argv bytes
    code, out, err = cli(capsys, command[0], name, *command[1:], "--url", "http://127.0.0.1:9")
    assert (code, out) == (2, "")
    assert err == (
        "error: the connector name 'c\\xed\\xb0\\x80' is not valid UTF-8 (at byte 1); connector names are UTF-8 "
        "text: check the shell's quoting and the terminal's encoding\n"
    )


def test_an_empty_key_is_named_as_empty_not_printed_as_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    standalone.write_file(tmp_path / "s.offsets", [RawRecord(b"", b'{"lsn":1}')])
    code, _, err = cli(capsys, "migrate", "--from", str(tmp_path / "s.offsets"), "--to", str(tmp_path / "o.offsets"))
    assert code == 2 and "first: (empty: 0 bytes));" in err


@pytest.mark.parametrize("kind", ["kip875", "cdc"])
def test_an_export_of_records_not_in_jacksons_form_reports_what_the_file_holds_and_a_rerun_nothing(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON format re-encodes keys and values as Jackson would (spaces go, ``2.50`` becomes ``2.5``,
    an empty value reads back as null): the report is of those records, not the source's bytes."""
    source = tmp_path / "s.offsets"
    standalone.write_file(
        source,
        [
            RawRecord(b'["w1",{"a":1}]', b'{"pos": 1}'),
            RawRecord(b'["w1",{"a":2}]', b'{"pos":2.50}'),
        ],
    )
    out = tmp_path / f"out.{kind}"

    def export() -> dict[str, Any]:
        code, printed, err = cli(capsys, "migrate", "--from", str(source), "--to", f"{kind}:{out}", "--json")
        assert code == 0, err
        report: dict[str, Any] = json.loads(printed)
        return report

    first = export()
    assert first["diff"]["summary"] == {"added": 2, "changed": 0, "removed": 0, "unchanged": 0}
    listed = {(e["key"], e["new"]) for e in first["diff"]["entries"]}
    assert listed == {('["w1",{"a":1}]', '{"pos":1}'), ('["w1",{"a":2}]', '{"pos":2.5}')}  # as the file holds them
    bytes_after_first = out.read_bytes()
    second = export()
    assert second["diff"]["summary"] == {"added": 0, "changed": 0, "removed": 0, "unchanged": 2}
    assert out.read_bytes() == bytes_after_first


# --- --connector into an existing document keeps the other connectors (docs/transfers.md) ---------------

MINE_OLD = RawRecord(b'["my-source",{"f":"a"}]', b'{"p":1}')
MINE_GONE = RawRecord(b'["my-source",{"f":"z"}]', b'{"p":3}')
MINE_NEW = RawRecord(b'["my-source",{"f":"a"}]', b'{"p":2}')
THEIRS = RawRecord(b'["other",{"f":"b"}]', b'{"p":5}')
THEIRS_AT_SOURCE = RawRecord(b'["other",{"f":"b"}]', b'{"p":9}')
DOCUMENT_KINDS = {"kip875": kip875.loads_file, "snapshot": lambda data: snapshot.loads(data)[0]}


@pytest.mark.parametrize("kind", sorted(DOCUMENT_KINDS))
def test_an_export_of_one_connector_into_a_file_of_several_keeps_the_others(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 21 (HIGH): ``export --to kip875:multi.json --connector my-source`` exited 0 reporting
    ``connector other: … 1 removed`` and left only my-source in the file. The named connector's records
    are replaced (``f":"z`` goes, as the source lacks it); every other connector's stay, untouched."""
    destination = tmp_path / f"multi.{kind}"
    seed = standalone_of(tmp_path, MINE_OLD, MINE_GONE, THEIRS)
    assert transfer(seed, parse_location(f"{kind}:{destination}"), TransferOptions(), quiet()).written == 3
    standalone.write_file(tmp_path / "now.offsets", [MINE_NEW, THEIRS_AT_SOURCE])
    args = ("migrate", "--from", f"standalone:{tmp_path / 'now.offsets'}", "--to", f"{kind}:{destination}")

    code, out, err = cli(capsys, *args, "--connector", "my-source", "--dry-run")
    assert code == 0, err
    assert "connector other" not in out, out
    assert "would be kept" in err

    code, out, err = cli(capsys, *args, "--connector", "my-source")
    assert code == 0, err
    assert "connector other" not in out, out
    assert "1 changed, 1 removed, 0 unchanged" in out.splitlines()[1], out
    assert (
        f"note: 1 record(s) of 1 other connector(s) ('other') already in {kind}:{destination} were kept as they are"
        in err
    ), err
    held = latest_per_key(DOCUMENT_KINDS[kind](destination.read_bytes()).records)
    assert {k: r.value for k, r in held.items()} == {MINE_NEW.key: MINE_NEW.value, THEIRS.key: THEIRS.value}

    code, out, err = cli(capsys, *args)  # without --connector the file is the source's, whole
    assert code == 0, err
    held = latest_per_key(DOCUMENT_KINDS[kind](destination.read_bytes()).records)
    assert {k: r.value for k, r in held.items()} == {MINE_NEW.key: MINE_NEW.value, THEIRS.key: b'{"p":9}'}


def test_an_export_of_one_connector_over_an_unreadable_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What an unreadable file holds cannot be kept: refused, the file untouched (without --connector
    the export replaces it, with a note, as before)."""
    destination = tmp_path / "multi.json"
    destination.write_text('{"other": ')
    source = standalone_of(tmp_path, MINE_NEW).path
    code, out, err = cli(
        capsys, "migrate", "--from", f"standalone:{source}", "--to", f"kip875:{destination}", "--connector", "my-source"
    )
    assert code == 2 and out == ""
    assert "is unreadable" in err and "cannot be kept" in err and err.rstrip().endswith("nothing was written"), err
    assert destination.read_text() == '{"other": '


@pytest.mark.parametrize(
    "command",
    [
        ["get", ""],
        ["reset", "", "--yes"],
        ["alter", "", "--file", "-"],
        ["claim", "", "--owner", "me"],
        ["claims", ""],
        ["release", "", "--epoch", "1"],
        ["history", ""],
        ["rollback", "", "--to", "now", "--yes"],
        ["spark-handoff", "--checkpoint", "cp", "--connector", ""],
        ["export", "--to", "kip875:-", "--connector", ""],
    ],
)
def test_an_empty_connector_name_is_a_usage_error(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """QA 21 #5: ``get ''`` asked the daemon for ``/connectors//offsets`` and reported "answered 404 without
    being a connect-offsets daemon route: a wrong base path …". An empty name is refused before any
    request (nothing listens on the port), exit 2."""
    code, out, err = cli(capsys, *command, "--url", "http://127.0.0.1:48899")
    assert (code, out) == (2, "")
    what = "--connector '' names no connector" if "--connector" in command else "the connector name is empty"
    assert err == f"error: {what}: name a connector (`connect-offsets list` lists them)\n"


@pytest.mark.parametrize("limit", ["0", "-3"])
def test_history_limit_below_one_is_a_usage_error_checked_before_any_request(
    limit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA 21 #8: ``history --limit 0`` was the daemon's 400, exit 1 ("refused"); nothing listens here."""
    code, out, err = cli(capsys, "history", "c", "--limit", limit, "--url", "http://127.0.0.1:48899")
    assert (code, out, err) == (2, "", f"error: --limit must be at least 1, got {limit}\n")
