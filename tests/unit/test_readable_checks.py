"""The pure parts of "nothing is written that Connect cannot read back": the request parser's limits,
the readability check, and how refusals name the record, the byte and the reason.

Which values are readable is decided against Java in ``tests/compat/test_read_limits.py``; here the
parts that need no JVM: messages, positions, the walk and depth detection, the committers' and
transfers' use of the check, times and names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulator.codec.limits import MAX_NAME_LENGTH, MAX_STRING_LENGTH
from emulator.codec.readable import ValueProblem, offset_problem, value_problem
from emulator.codec.strict_json import JsonLimitExceeded, exceeds_depth, loads_strict
from emulator.formats import cdc_state, kip875, snapshot, standalone
from emulator.formats.model import FormatError, RawRecord
from emulator.model.times import MAX_TIME_MS, MIN_TIME_MS, format_time_ms, parse_time_ms
from emulator.server.routes.params import DEFAULT_MAX_BODY_BYTES, connector_name_problem
from emulator.server.settings import Settings
from emulator.spark.committer import DaemonOffsets, UnreadableOffsets
from emulator.spark.handoff import HandoffError, entries_for
from emulator.transfer import SnapshotLocation, StandaloneLocation, TransferError, TransferOptions, transfer
from emulator.transfer.progress import Progress

KEY = b'["c",{"p":1}]'


# --- the request parser -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "words"),
    [
        (b"[" * 2000 + b"]" * 2000, "Document nesting depth (1001) exceeds the maximum allowed (1000)"),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, "Document nesting depth (1001)"),
        (b"-" + b"9" * 1001, "Number value length (1001) exceeds the maximum allowed (1000)"),
        (b"0." + b"1" * 1000, "Number value length (1001)"),
        (b"1e" + b"1" * 1000, "Number value length (1001)"),
        (b'{"' + b"k" * 50_001 + b'":1}', "Name length (50001) exceeds the maximum allowed (50000)"),
        (('{"' + "\u00e9" * 25_001 + '":1}').encode(), "Name length (50002)"),
        (b'["' + b"s" * 20_000_001 + b'"]', "String value length (20000001) exceeds the maximum allowed (20000000)"),
        (('"' + "\U0001f600" * 10_000_001 + '"').encode(), "String value length (20000002)"),
    ],
)
def test_documents_beyond_jacksons_limits_name_the_limit(document: bytes, words: str) -> None:
    with pytest.raises(JsonLimitExceeded) as raised:
        loads_strict(document)
    assert words in str(raised.value)


def test_documents_at_the_limits_parse() -> None:
    assert loads_strict(b"-" + b"9" * 1000) == -int("9" * 1000)
    assert loads_strict(b'{"' + b"k" * MAX_NAME_LENGTH + b'":1}') == {"k" * MAX_NAME_LENGTH: 1}
    assert len(loads_strict(b'["' + b"s" * MAX_STRING_LENGTH + b'"]')[0]) == MAX_STRING_LENGTH
    assert loads_strict(b'{"a":"[[[[","b":[[1]]}') == {"a": "[[[[", "b": [[1]]}
    assert loads_strict('"\u00e9"'.encode("utf-16")) == "\u00e9", "UTF-16 is detected as json.loads does"


@pytest.mark.parametrize("document", [b"NaN", b"[Infinity]", b"01", b"{'a':1}", b"[1,]", b"\xff"])
def test_what_is_not_strict_json_is_a_value_error_not_a_limit(document: bytes) -> None:
    with pytest.raises(ValueError) as raised:
        loads_strict(document)
    assert not isinstance(raised.value, JsonLimitExceeded)


def test_depth_is_found_without_recursion_and_strings_do_not_count() -> None:
    assert exceeds_depth("[" * 1001)
    assert not exceeds_depth("[" * 1000 + "]" * 1000)
    assert not exceeds_depth('["' + "[" * 5000 + '"]')
    assert not exceeds_depth('["\\"' + "[" * 5000 + '"]'), "an escaped quote does not end the string"
    assert exceeds_depth("[" * 16_000_000), "32 MB of brackets: found, at C speed"


# --- the readability check ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "words", "at"),
    [
        (b'{"position":x51}', "Unexpected character", 12),
        (b'{"position":151', "Unexpected end-of-input", 15),
        (b"[1]", "Offsets must be specified as a Map", None),
        (b'"x"', "Offsets must be specified as a Map", None),
        (b"42", "Offsets must be specified as a Map", None),
        (b'{"a":{"b":1}}', "field a contains MAP", None),
        (b'{"n":' + b"1" * 1001 + b"}", "Number value length (1001)", 1006),
    ],
)
def test_a_problem_says_why_and_where_in_the_value(raw: bytes, words: str, at: int | None) -> None:
    problem = value_problem(raw)
    assert problem is not None and words in problem.reason
    assert problem.at == at


@pytest.mark.parametrize("raw", [None, b"", b"null", b"{}", b'{"a":1,"b":null,"c":"x","d":1.5,"e":false}'])
def test_tombstones_nulls_and_flat_maps_are_readable(raw: bytes | None) -> None:
    assert value_problem(raw) is None


def test_the_problem_points_into_the_file_when_the_value_has_a_place() -> None:
    problem = ValueProblem("not JSON Connect's JsonConverter can read: Unexpected character", 12)
    assert (
        problem.describe()
        == "not JSON Connect's JsonConverter can read: Unexpected character (at byte 12 of the value)"
    )
    assert problem.describe(value_at=200).endswith("(at byte 12 of the value, byte offset 212 of the file)")


def test_an_offset_map_is_checked_as_it_will_be_encoded() -> None:
    assert offset_problem({"position": 1}) is None and offset_problem(None) is None
    problem = offset_problem({"s": "x" * (MAX_STRING_LENGTH + 1)})
    assert problem is not None and "String value length (20000001)" in problem.reason
    nested = offset_problem({"a": [1]})
    assert nested is not None and "field a contains ARRAY" in nested.reason


# --- files and transfers ------------------------------------------------------------------------


def quiet() -> Progress:
    return Progress(enabled=False)


def test_a_standalone_file_keeps_each_values_byte_offset(tmp_path: Path) -> None:
    data = standalone.dumps([RawRecord(KEY, b'{"o":1}'), RawRecord(b'["c",{"p":2}]', None)])
    loaded = standalone.loads(data)
    first, second = loaded.records
    assert first.value_at is not None and data[first.value_at : first.value_at + 7] == b'{"o":1}'
    assert second.value_at is None
    assert first == RawRecord(KEY, b'{"o":1}'), "where a record came from is not part of what it is"


def test_a_refused_transfer_names_the_record_the_byte_and_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "bad.offsets"
    standalone.write_file(path, [RawRecord(b'["c",{"p":0}]', b'{"o":0}'), RawRecord(KEY, b'{"position":x51}')])
    value_at = standalone.load_file(path).records[1].value_at
    assert value_at is not None
    out = StandaloneLocation(tmp_path / "out.offsets")
    for dry_run in (False, True):
        with pytest.raises(TransferError) as raised:
            transfer(StandaloneLocation(path), out, TransferOptions(dry_run=dry_run), quiet())
        message = str(raised.value)
        assert "1 record(s) of standalone:" in message and "have values Connect cannot read back" in message
        assert f"record 2 of 2, key {KEY.decode()}, value at byte offset {value_at} of the file" in message
        assert "Unexpected character (code 120)" in message
        assert f"(at byte 12 of the value, byte offset {value_at + 12} of the file)" in message
        assert "Nothing was written" in message
    assert not out.path.exists()


def test_skip_writes_the_rest_and_keep_counts_what_it_wrote(tmp_path: Path) -> None:
    path = tmp_path / "bad.offsets"
    standalone.write_file(path, [RawRecord(b'["c",{"p":0}]', b'{"o":0}'), RawRecord(KEY, b"[1]")])
    out = StandaloneLocation(tmp_path / "out.offsets")
    skipped = transfer(StandaloneLocation(path), out, TransferOptions(malformed="skip"), quiet())
    assert (skipped.written, skipped.unreadable_values) == (1, 0)
    assert any("1 record(s) with values Connect cannot read back left out" in n for n in skipped.notes)
    would = transfer(StandaloneLocation(path), out, TransferOptions(malformed="keep", dry_run=True), quiet())
    assert (would.written, would.unreadable_values) == (0, 1)
    assert any("1 value(s) Connect cannot read back would be written as-is" in n for n in would.notes)
    kept = transfer(StandaloneLocation(path), out, TransferOptions(malformed="keep"), quiet())
    assert (kept.written, kept.unreadable_values) == (1, 1) and kept.as_dict()["unreadable_values"] == 1
    assert any("1 value(s) Connect cannot read back were written as-is" in n for n in kept.notes)
    assert {r.key: r.value for r in standalone.load_file(out.path).records}[KEY] == b"[1]"


def test_a_snapshots_refusal_names_the_records_log_coordinates(tmp_path: Path) -> None:
    path = tmp_path / "backup.avro"
    good = RawRecord(b'["c",{"p":0}]', b'{"o":0}', 0, 4, 1)
    path.write_bytes(snapshot.dumps([good, RawRecord(KEY, b'{"o":4x}', 3, 17, 2)], source="test"))
    with pytest.raises(TransferError, match=r"record 2 of 2, key .*, Kafka partition 3 offset 17: not JSON"):
        transfer(SnapshotLocation(path), StandaloneLocation(tmp_path / "out.offsets"), TransferOptions(), quiet())


def test_a_key_connect_ignores_is_judged_by_its_key_alone(tmp_path: Path) -> None:
    path = tmp_path / "junk.offsets"
    standalone.write_file(path, [RawRecord(b"junk", b"not json")])
    with pytest.raises(TransferError, match="keys Connect ignores"):
        transfer(StandaloneLocation(path), StandaloneLocation(tmp_path / "o.offsets"), TransferOptions(), quiet())


def test_kip875_and_cdc_files_are_read_within_jacksons_limits() -> None:
    deep = b'{"c":{"offsets":[{"partition":{"p":1},"offset":{"o":' + b"[" * 3000 + b"]" * 3000 + b"}}]}}"
    with pytest.raises(FormatError, match="Document nesting depth \\(1001\\)"):
        kip875.loads_file(deep)
    long_string = json.dumps({"c": {"offsets": [{"partition": {"p": "x" * 20_000_001}, "offset": None}]}})
    with pytest.raises(FormatError, match="String value length \\(20000001\\)"):
        kip875.loads_file(long_string.encode())
    line = b'{"connector":"c","state":{"sourcePartition":{"p":1},"sourceOffset":{"o":' + b"1" * 1001 + b"}}}"
    with pytest.raises(FormatError, match=r"line 1.*Number value length \(1001\)"):
        cdc_state.loads_file(line)


# --- the Spark committers -----------------------------------------------------------------------


@pytest.mark.slow
def test_the_committer_refuses_an_unreadable_entry_before_sending_anything() -> None:
    daemon = DaemonOffsets("http://127.0.0.1:9")  # nothing listens: any request would fail differently
    for entries in (
        [({"spark_source": 0}, {"offset": "x" * (MAX_STRING_LENGTH + 1)})],
        [({"spark_source": 0}, {"offset": 2**64})],
        [({"p": {"nested": 1}}, {"offset": 1})],
    ):
        for dry_run in (False, True):
            with pytest.raises(UnreadableOffsets, match="Connect could not read it back"):
                daemon.commit("c", entries, dry_run=dry_run)
    daemon.close()


def test_a_handoff_names_the_source_whose_offset_cannot_be_written() -> None:
    with pytest.raises(HandoffError, match="source 2's offset: the offset for partition"):
        entries_for({"pos": 2**70}, 2, "source")
    assert entries_for({"pos": 5}, 2, "source") == (None, [({"spark_source": 2}, {"pos": 5})])


# --- times, names, settings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["99999999999999999999", "-" + "9" * 5000, str(MAX_TIME_MS + 1), "0001-01-01T00:00:00+00:01"]
)
def test_times_beyond_what_can_be_printed_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_time_ms(text)


def test_the_range_ends_print_exactly() -> None:
    assert format_time_ms(parse_time_ms(str(MIN_TIME_MS))) == "0001-01-01T00:00:00.000Z"
    assert format_time_ms(parse_time_ms("9999-12-31T23:59:59.999Z")) == "9999-12-31T23:59:59.999Z"


@pytest.mark.parametrize(
    ("segment", "words"),
    [
        (b"%FE", "not valid UTF-8"),
        (b"%ED%A0%80", "not valid UTF-8"),
        (b"a%2Fb", "encoded '/'"),
        (b"a%2fb", "encoded '/'"),
        (b"%00", "following ASCII chars: 0"),
        (b"x%0A%C2%85", "following ASCII chars: 10, 133"),
    ],
)
def test_connector_names_connect_could_not_have_are_named(segment: bytes, words: str) -> None:
    problem = connector_name_problem(segment)
    assert problem is not None and words in problem


@pytest.mark.parametrize("segment", [b"plain", b"caf%C3%A9", b"%F0%9F%98%80", b"a%20b", b"a+b%25"])
def test_other_names_are_fine(segment: bytes) -> None:
    assert connector_name_problem(segment) is None


def test_the_body_limit_default_is_the_settings_default() -> None:
    assert Settings().max_body_bytes == DEFAULT_MAX_BODY_BYTES == 32 * 1024 * 1024


def test_only_the_value_a_destination_ends_up_with_is_judged(tmp_path: Path) -> None:
    """A snapshot may hold a key's history: an unreadable value superseded by a readable one is never written."""
    path = tmp_path / "history.avro"
    older_bad, newer_good = RawRecord(KEY, b"[1]", 0, 1, 1), RawRecord(KEY, b'{"o":2}', 0, 2, 2)
    path.write_bytes(snapshot.dumps([older_bad, newer_good], source="test"))
    report = transfer(SnapshotLocation(path), StandaloneLocation(tmp_path / "a.offsets"), TransferOptions(), quiet())
    assert report.written == 1
    path.write_bytes(snapshot.dumps([newer_good, older_bad], source="test"))
    skipped = transfer(
        SnapshotLocation(path), StandaloneLocation(tmp_path / "b.offsets"), TransferOptions(malformed="skip"), quiet()
    )
    assert skipped.selected == 0, "skip leaves out every record of that key: the older value is not written instead"
