"""KIP-875 bodies, Avro snapshots and transfer diffs over raw records."""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pytest

from emulator.formats import diff as diff_format
from emulator.formats import kip875, snapshot
from emulator.formats.diff import Change, compute_diff, render_text
from emulator.formats.model import FormatError, RawRecord
from tests.fixtures.recursion import daemon_recursion_limit

# --- KIP-875 --------------------------------------------------------------------------------------------


def test_bodies_per_connector_become_jackson_encoded_records_in_body_key_order() -> None:
    document = {
        "jdbc": {"offsets": [{"partition": {"table": "orders", "db": "shop"}, "offset": {"ts": 1.0, "id": 7}}]},
        "files": {"offsets": [{"partition": {"filename": "/a"}, "offset": None}]},
    }
    loaded = kip875.loads_file(json.dumps(document).encode())
    assert loaded.records == [
        RawRecord(b'["jdbc",{"table":"orders","db":"shop"}]', b'{"ts":1.0,"id":7}'),
        RawRecord(b'["files",{"filename":"/a"}]', None),
    ]


def test_a_bare_body_needs_the_connector_name() -> None:
    body = b'{"offsets":[{"partition":{"p":1},"offset":{"o":2}}]}'
    with pytest.raises(
        FormatError, match=r"names no connector; give the connector name \(the CLI.s --name CONNECTOR\)"
    ):
        kip875.loads_file(body)
    assert kip875.loads_file(body, default_connector="c").records == [RawRecord(b'["c",{"p":1}]', b'{"o":2}')]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"c": {"offsets": [{"partition": {"p": {"x": 1}}, "offset": {}}]}}, "field p contains MAP"),
        ({"c": {"offsets": [{"partition": None, "offset": {}}]}}, '"c".offsets[0].partition must be a JSON object'),
        ({"c": {"offsets": [{"partition": {}, "offset": 3}]}}, "offset must be a JSON object or null"),
        ({"c": {"offsets": [{"partition": {}, "offset": {}, "x": 1}]}}, "unknown field(s) ['x']"),
        ({"c": {"offset": []}}, "unknown field(s) ['offset']"),
        ([1], "got list"),
    ],
)
def test_invalid_bodies_are_refused(document: object, message: str) -> None:
    with pytest.raises(FormatError) as info:
        kip875.loads_file(json.dumps(document).encode(), source="o.json")
    assert message in str(info.value)


def test_export_groups_by_connector_and_says_what_it_cannot_carry() -> None:
    records = [
        RawRecord(b'["a",{"p":1}]', b'{"o":1}'),
        RawRecord(b'["a",{"p":2}]', b'{"o": 2}'),  # not canonical: importing would write other bytes
        RawRecord(b'["a", {"p":3}]', b'{"o":3}'),  # a key no converter writes: no task or GET reads it
        RawRecord(b"junk", b"{}"),
        RawRecord(b'["b",{"p":1}]', None),
    ]
    data, notes = kip875.dumps_file(records)
    assert json.loads(data) == {
        "a": {"offsets": [{"partition": {"p": 1}, "offset": {"o": 1}}, {"partition": {"p": 2}, "offset": {"o": 2}}]},
        "b": {"offsets": [{"partition": {"p": 1}, "offset": None}]},
    }
    assert any("1 record(s) with keys Connect ignores" in n for n in notes)
    assert any("1 record(s) under keys in bytes no converter writes" in n for n in notes)
    assert any("1 record(s) are not in Jackson's canonical form" in n for n in notes)
    assert kip875.loads_file(data).records == [records[0], RawRecord(b'["a",{"p":2}]', b'{"o":2}'), records[4]]


# Key and value bytes Connect reads but did not write (other spellings of the same content), values that
# read as null, a tombstone, and connectors interleaved: what a KIP-875 or CDC file holds for them is
# what its reader reads back, and that is what the writer must say it holds (``Encoded.records``).
READ_BACK_CASES = [
    RawRecord(b'["a",{"p":1}]', b'{"o": 2.50}'),  # spaces, a trailing zero
    RawRecord(b'["b",{"p":2}]', b'{"o":1E2,"z":-0.0,"big":9223372036854775807,"e":1e16}'),  # -0.0 reads as 0.0
    RawRecord(b'["a",{"z":1,"y":"\\uD800"}]', '{"s":"\u2028\\u00e9","d":1,"d":2}'.encode()),
    RawRecord(b'["a",{"p":1}]', b'{"o":3}'),  # the first key's canonical spelling, later: the file holds one
    RawRecord(b'["b",{"p":3}]', b""),  # reads as null without being a tombstone: left out
    RawRecord(b'["b",{"p":4}]', b"null"),
    RawRecord(b'["c",{"p":5}]', None),
]


def test_the_records_a_kip875_file_holds_are_those_its_reader_reads_back() -> None:
    encoded = kip875.encode_file(READ_BACK_CASES)
    assert encoded.records == kip875.loads_file(encoded.data).records
    assert [(r.key, r.value) for r in encoded.records] == [
        (b'["a",{"p":1}]', b'{"o":2.5}'),
        (b'["a",{"z":1,"y":"\\uD800"}]', '{"s":"\u2028\u00e9","d":2}'.encode()),
        (b'["a",{"p":1}]', b'{"o":3}'),
        (b'["b",{"p":2}]', b'{"o":100.0,"z":0.0,"big":9223372036854775807,"e":1.0E16}'),
        (b'["c",{"p":5}]', None),
    ]
    assert any("2 record(s) whose value reads as null without being a tombstone" in n for n in encoded.notes)


@pytest.mark.parametrize(
    ("record", "note"),
    [
        (RawRecord(b'["a",{"p":[1]}]', b'{"o":1}'), "whose partition is not a flat map of primitive values"),
        (RawRecord(b'["a",{"p":1}]', b'{"o":{"x":1}}'), "whose value is not an offset map Connect can read"),
    ],
    ids=["nested-partition", "nested-value"],
)
def test_a_kip875_export_leaves_out_what_its_import_would_refuse(record: RawRecord, note: str) -> None:
    encoded = kip875.encode_file([record, RawRecord(b'["a",{"p":2}]', b'{"o":2}')])
    assert encoded.records == kip875.loads_file(encoded.data).records == [RawRecord(b'["a",{"p":2}]', b'{"o":2}')]
    assert any(f"1 record(s) {note}" in n and "left out" in n for n in encoded.notes), encoded.notes


def test_an_offset_beyond_a_double_is_left_out_of_a_kip875_export_not_aborting_it() -> None:
    """Java reads ``1e400`` as a double Infinity; KIP-875 JSON could hold it only as the string
    ``"Infinity"``, which importing the file would write as a string. The rest is exported."""
    good = RawRecord(b'["a",{"p":2}]', b'{"o":2}')
    encoded = kip875.encode_file([RawRecord(b'["a",{"p":1}]', b'{"o":1e400}'), good])
    assert encoded.records == kip875.loads_file(encoded.data).records == [good]
    assert any("1 record(s) whose offset holds a number beyond a double's range" in n for n in encoded.notes)


def test_a_tombstone_of_a_key_no_converter_writes_stays_in_a_kip875_export() -> None:
    """Connect's listing drops a partition at a tombstone of any of its keys; a null offset in the file
    does the same, so the tombstone is kept while the value of such a key is not."""
    encoded = kip875.encode_file([RawRecord(b'["a", {"p":1}]', None), RawRecord(b'["a", {"p":2}]', b'{"o":2}')])
    assert json.loads(encoded.data) == {"a": {"offsets": [{"partition": {"p": 1}, "offset": None}]}}


# --- snapshots ------------------------------------------------------------------------------------------


SNAPSHOT_RECORDS = [
    RawRecord(b'["c",{"p":1}]', b'{"o":1}', 3, 17, 1_700_000_000_000),
    RawRecord(b'["c", {"p":2}]', None, 0, 4, 1_700_000_000_001),
    RawRecord(b"\xff\x00binary", b"", None, None, None),
]


def test_snapshot_round_trip_keeps_bytes_coordinates_and_metadata() -> None:
    data = snapshot.dumps(SNAPSHOT_RECORDS, source="kafka://h:9092/connect-offsets", taken_at_ms=1234)
    loaded, info = snapshot.loads(data)
    assert loaded.records == SNAPSHOT_RECORDS
    assert (info.source, info.taken_at_ms, info.records) == ("kafka://h:9092/connect-offsets", 1234, 3)
    assert loaded.notes == []


def test_snapshots_are_plain_avro_with_the_schema_from_schemas_dir() -> None:
    data = snapshot.dumps(SNAPSHOT_RECORDS, source="s")
    import io

    reader = fastavro.reader(io.BytesIO(data))
    contract = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "snapshot.avsc").read_text())
    assert reader.writer_schema["name"] == f"{contract['namespace']}.{contract['name']}"
    assert [f["name"] for f in reader.writer_schema["fields"]] == [f["name"] for f in contract["fields"]]
    rows = list(reader)
    assert [r["connector"] for r in rows] == ["c", "c", None], "connector is filled in where the key parses"


def test_a_connector_named_with_half_a_surrogate_pair_is_snapshotted_byte_exact() -> None:
    """Connect's data may name a connector ``half\\ud800`` (a lone surrogate, from Jackson's escape);
    the informational ``connector`` field is an Avro string, UTF-8, and the raw name ended the whole
    export in a UnicodeEncodeError (every connector's records unwritten). It holds the escape now;
    the key, the truth, is kept byte for byte."""
    import io

    records = [RawRecord(b'["half\\ud800",{"f":1}]', b'{"p":1}', 0, 1, 1), RawRecord(b'["ok",{"f":1}]', b"1", 0, 2, 2)]
    data = snapshot.dumps(records, source="s")
    assert [r["connector"] for r in fastavro.reader(io.BytesIO(data))] == ["half\\ud800", "ok"]  # type: ignore[index,call-overload]
    assert snapshot.loads(data)[0].records == records


def test_a_truncated_snapshot_is_refused_whole() -> None:
    data = snapshot.dumps([RawRecord(f'["c",{{"p":{i}}}]'.encode(), b"{}" * 50) for i in range(200)], source="s")
    for cut in (0, 10, len(data) // 2, len(data) - 1):
        with pytest.raises(FormatError) as info:
            snapshot.loads(data[:cut], source="b.avro")
        assert "b.avro" in str(info.value)
        assert "none will be imported" in str(info.value) or "empty" in str(info.value)


def test_a_snapshot_missing_records_is_refused_by_its_declared_count() -> None:
    import io

    out = io.BytesIO()
    fastavro.writer(
        out,
        snapshot.snapshot_schema(),
        [{"key": b"k", "value": None}],
        metadata={snapshot.META_FORMAT: snapshot.FORMAT, snapshot.META_RECORDS: "2"},
    )
    with pytest.raises(FormatError, match="declares 2 records but holds 1"):
        snapshot.loads(out.getvalue())


def test_a_foreign_avro_file_is_refused_by_schema() -> None:
    import io

    out = io.BytesIO()
    schema = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]}
    fastavro.writer(out, schema, [{"x": 1}])
    with pytest.raises(FormatError, match="not a readable snapshot"):
        snapshot.loads(out.getvalue())


# --- diffs ----------------------------------------------------------------------------------------------


def test_diff_statuses_compare_raw_bytes() -> None:
    current = {b'["c",{"p":1}]': b'{"o":1}', b'["c",{"p":2}]': b'{"o":2}', b'["c",{"p":3}]': b'{"o":3}'}
    incoming = [
        RawRecord(b'["c",{"p":1}]', b'{"o":1}'),
        RawRecord(b'["c",{"p":2}]', b'{"o": 2}'),  # same JSON, other bytes: a change for Connect
        RawRecord(b'["c",{"p":3}]', None),
        RawRecord(b'["c",{"p":4}]', b'{"o":4}'),
        RawRecord(b'["c",{"p":5}]', None),
        RawRecord(b"junk", b"{}"),
    ]
    diff = compute_diff(current.get, incoming)
    assert [e.status for e in diff.entries] == [
        Change.UNCHANGED,
        Change.CHANGED,
        Change.REMOVED,
        Change.ADDED,
        Change.UNCHANGED,
        Change.ADDED,
    ]
    assert [r.key for r in diff.records_to_write()] == [incoming[i].key for i in (1, 2, 3, 5)]
    assert len(diff.records_to_write(write_all=True)) == 6
    assert diff.as_dict()["connectors"] == {
        "(keys Connect ignores)": {"added": 1, "changed": 0, "removed": 0, "unchanged": 0},
        "c": {"added": 1, "changed": 1, "removed": 1, "unchanged": 2},
    }


def test_the_last_record_per_key_decides() -> None:
    diff = compute_diff(lambda _k: None, [RawRecord(b"k", b"1"), RawRecord(b"k", None)])
    assert [(e.key, e.status) for e in diff.entries] == [(b"k", Change.UNCHANGED)]


def test_text_rendering_shows_old_and_new_values() -> None:
    current = {b'["c",{"p":1}]': b'{"o":1}', b'["c",{"p":2}]': b'{"o":2}'}
    incoming = [RawRecord(b'["c",{"p":1}]', b'{"o":5}'), RawRecord(b'["c",{"p":2}]', None)]
    text = render_text(compute_diff(current.get, incoming).as_dict())
    assert text.splitlines() == [
        "0 added, 1 changed, 1 removed, 0 unchanged",
        "connector c: 0 added, 1 changed, 1 removed, 0 unchanged",
        '  ~ {"p":1}  {"o":1} -> {"o":5}',
        '  - {"p":2}  {"o":2} -> (deleted)',
    ]


def test_a_long_diff_lists_changes_first_up_to_the_limit_and_counts_the_rest() -> None:
    current = {f'["c",{{"p":{i}}}]'.encode(): b"1" for i in range(5)}
    incoming = [RawRecord(k, b"1") for k in current] + [RawRecord(f'["c",{{"p":{i}}}]'.encode(), b"2") for i in (7, 8)]
    shown = compute_diff(current.get, incoming).as_dict(limit_per_connector=3)
    assert shown["summary"] == {"added": 2, "changed": 0, "removed": 0, "unchanged": 5}
    assert [e["status"] for e in shown["entries"]] == ["added", "added", "unchanged"]
    assert shown["entries_omitted"] == 4
    assert render_text(shown, show_unchanged=True).endswith(
        "(4 more entries not listed; --diff-limit 0 or --json lists them all)"
    )
    # Unchanged entries are not listed without --show-unchanged: none of the 4 left out is a change.
    assert "more entries not listed" not in render_text(shown)
    fewer = compute_diff(current.get, incoming).as_dict(limit_per_connector=1)
    assert render_text(fewer).endswith("(1 more entries not listed; --diff-limit 0 or --json lists them all)")


def test_text_rendering_shortens_long_partitions_keys_and_values_and_says_how_much_was_cut() -> None:
    """A 5 MB offset printed a 5 MB line: ``--diff-limit`` caps the entries, not their length.
    The dict form (``--json``, what is written) keeps every value whole."""
    big = "x" * 5_000
    partition = json.dumps({"p": big}, separators=(",", ":"))
    key = f'["c",{partition}]'.encode()
    current = {key: json.dumps({"o": big}).encode()}
    incoming = [RawRecord(key, json.dumps({"o": "y" * 5_000}).encode()), RawRecord(b"not-a-key" * 1_000, b"1")]
    diff = compute_diff(current.get, incoming).as_dict()
    assert diff["entries"][0]["new"] == json.dumps({"o": "y" * 5_000})  # whole
    lines = render_text(diff).splitlines()
    assert max(len(line) for line in lines) < 1_000, [len(line) for line in lines]
    cut, shorten = diff_format.SHOWN_CHARS, diff_format.shorten
    changed = next(line for line in lines if line.startswith("  ~ "))
    assert changed.startswith(f"  ~ {partition[:cut]}… ({len(partition) - cut:,} more characters)  ")
    old, new = current[key].decode(), json.dumps({"o": "y" * 5_000})
    assert changed.endswith(
        f"  {old[:cut]}… ({len(old) - cut:,} more characters) -> {new[:cut]}… ({len(new) - cut:,} more characters)"
    )
    added = next(line for line in lines if line.startswith("  + key "))
    assert added == f"  + key {('not-a-key' * 1_000)[:cut]}… (8,800 more characters)  1"
    assert shorten("short") == "short" and shorten("z" * cut) == "z" * cut


def test_a_diffs_text_quotes_a_partition_nested_as_deep_as_jackson_reads() -> None:
    """A transfer of a record nested 1,000 levels (as deep as Connect's reader goes) wrote it, then
    failed printing its report: the diff's text quoted it with ``json.dumps``, which stops at Python's
    recursion limit."""
    inner = 997
    key = b'["deep",{"a":' + b"[" * inner + b"1" + b"]" * inner + b"}]"
    diff = compute_diff(lambda _: None, [RawRecord(key, b'{"pos":1}')])
    with daemon_recursion_limit():
        text = render_text(diff.as_dict())
    assert text.startswith("1 added, 0 changed, 0 removed, 0 unchanged"), text[:200]
    assert "[[[[" in text
