"""Flink CDC / RisingWave state JSON ⇄ Connect records (shapes in docs/transfers.md, "CDC state").

The byte equality with Java's OffsetStorageWriter / Jackson is checked in
tests/integration/test_formats_cdc.py; these pin the shapes and the refusals.
"""

from __future__ import annotations

import json

import pytest

from emulator.formats import cdc_state
from emulator.formats.model import FormatError, RawRecord
from tests.unit.test_formats_kip875_snapshot_diff import READ_BACK_CASES

FLINK_STATE = (
    b'{"sourcePartition":{"server":"mysql_binlog_source"},"sourceOffset":{"file":"mysql-bin.000003","pos":154,'
    b'"row":1,"event":2,"server_id":223344,"ts_sec":1670876905}}'
)
RISINGWAVE_STATE = (
    b'{"sourcePartition":{"server":"RW_CDC_1001"},"sourceOffset":{"last_snapshot_record":false,"lsn":200,'
    b'"lsn_proc":200,"lsn_commit":200,"txId":12345,"ts_usec":1700000000000000},"isHeartbeat":false}'
)


def test_a_flink_state_becomes_the_records_its_restore_writes() -> None:
    state = cdc_state.parse_state(FLINK_STATE)
    key, value = cdc_state.state_to_entry("engine", state)
    assert key == b'["engine",{"server":"mysql_binlog_source"}]'
    assert value == (
        b'{"file":"mysql-bin.000003","pos":154,"row":1,"event":2,"server_id":223344,"ts_sec":1670876905}'
    ), "key order is the document's, as Jackson's LinkedHashMap keeps it"


def test_a_connect_record_becomes_the_state_jackson_writes() -> None:
    key = b'["engine",{"server":"mysql_binlog_source"}]'
    value = b'{"file":"mysql-bin.000003","pos":154,"row":1,"event":2,"server_id":223344,"ts_sec":1670876905}'
    connector, state, notes = cdc_state.entry_to_state(key, value)
    assert connector == "engine" and notes == []
    assert cdc_state.state_bytes(state) == FLINK_STATE


def test_risingwave_shape_round_trips_with_is_heartbeat() -> None:
    state = cdc_state.parse_state(RISINGWAVE_STATE)
    assert state.is_heartbeat is False
    key, value = cdc_state.state_to_entry("pg:5432:db.t", state)
    connector, back, _ = cdc_state.entry_to_state(key, value)
    assert connector == "pg:5432:db.t"
    assert cdc_state.state_bytes(back, with_heartbeat=True) == RISINGWAVE_STATE
    assert cdc_state.state_bytes(back) == RISINGWAVE_STATE.replace(b',"isHeartbeat":false', b"")


def test_a_schema_envelope_key_is_accepted_and_reported() -> None:
    key = b'{"schema":null,"payload":["engine",{"server":"mysql_binlog_source"}]}'
    connector, state, notes = cdc_state.entry_to_state(key, b'{"pos":1}')
    assert (connector, state.partition, state.offset) == ("engine", {"server": "mysql_binlog_source"}, {"pos": 1})
    assert len(notes) == 1 and "schema envelope" in notes[0] and "schemas.enable=true" in notes[0]


def test_non_canonical_bytes_are_reported_because_the_state_cannot_keep_them() -> None:
    _, _, notes = cdc_state.entry_to_state(b'["c", {"a":1}]', b'{"pos": 1}')
    assert [n.split(" is not")[0] for n in notes] == ['key ["c", {"a":1}]', 'the value of key ["c", {"a":1}]']


def test_a_null_source_offset_is_a_tombstone() -> None:
    state = cdc_state.parse_state(b'{"sourcePartition":{"s":"x"},"sourceOffset":null}')
    assert cdc_state.state_to_entry("engine", state) == (b'["engine",{"s":"x"}]', None)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (b'{"sourceOffset":{}}', "sourcePartition must be a JSON object, got null"),
        (b'{"sourcePartition":[],"sourceOffset":{}}', "sourcePartition must be a JSON object, got list"),
        (b'{"sourcePartition":{},"sourceOffset":5}', "sourceOffset must be a JSON object or null, got int"),
        (b'{"sourcePartition":{},"sourceOffset":{},"isHeartbeat":"no"}', "isHeartbeat must be true or false"),
        (b'{"sourcePartition":{},"sourceOffset":{},"extra":1}', "unknown field(s) ['extra']"),
        (
            b'{"sourcePartition":{},"sourceOffset":{"nested":{"a":1}}}',
            "Offsets may only contain primitive types as values, but field nested contains MAP",
        ),
        (b'{"sourcePartition":{"n":NaN},"sourceOffset":{}}', "not valid JSON"),
        (b'{"sourcePartition":{"big":99999999999999999999},"sourceOffset":{}}', "primitive types"),
        # An engine property's state (Flink CDC, RisingWave) follows the files' rule on repeated fields:
        # last-wins would restore the engine from one of two offsets without a word.
        (b'{"sourcePartition":{},"sourceOffset":{"lsn":1},"sourceOffset":{"lsn":9}}', 'names "sourceOffset" twice'),
        (b'{"sourcePartition":{"a":1},"sourcePartition":{"a":2},"sourceOffset":{}}', 'names "sourcePartition" twice'),
    ],
)
def test_invalid_states_are_refused_with_the_reason(document: bytes, message: str) -> None:
    with pytest.raises(FormatError) as info:
        cdc_state.parse_state(document)
    assert message in str(info.value)


def test_the_file_is_json_lines_with_connector_and_state() -> None:
    records = [
        RawRecord(b'["a",{"server":"s1"}]', b'{"pos":1}'),
        RawRecord(b'["b",{"server":"s2"}]', None),
        RawRecord(b'["c",{"server":"s3"}]', b'{"lsn":7}'),
    ]
    data, notes = cdc_state.dumps_file(records, risingwave=True)
    assert data.splitlines() == [
        b'{"connector":"a","state":{"sourcePartition":{"server":"s1"},"sourceOffset":{"pos":1},"isHeartbeat":false}}',
        b'{"connector":"c","state":{"sourcePartition":{"server":"s3"},"sourceOffset":{"lsn":7},"isHeartbeat":false}}',
    ]
    assert notes == ["1 tombstone(s) left out: a CDC state has no way to say 'deleted'"]
    assert cdc_state.loads_file(data).records == [records[0], records[2]]


# The read-back cases are the KIP-875 tests' (one list for both JSON formats).


def test_the_records_a_cdc_file_holds_are_those_its_reader_reads_back() -> None:
    envelope = RawRecord(b'{"schema":null,"payload":["engine",{"server":"f1"}]}', b'{"lsn":1}')
    encoded = cdc_state.encode_file([*READ_BACK_CASES, envelope], risingwave=True)
    assert encoded.records == cdc_state.loads_file(encoded.data).records
    assert [(r.key, r.value) for r in encoded.records] == [
        (b'["a",{"p":1}]', b'{"o":2.5}'),
        (b'["b",{"p":2}]', b'{"o":100.0,"z":0.0,"big":9223372036854775807,"e":1.0E16}'),
        (b'["a",{"z":1,"y":"\\uD800"}]', '{"s":"\u2028\u00e9","d":2}'.encode()),
        (b'["a",{"p":1}]', b'{"o":3}'),
        (b'["engine",{"server":"f1"}]', b'{"lsn":1}'),
    ]
    assert "1 tombstone(s) left out: a CDC state has no way to say 'deleted'" in encoded.notes
    assert any("2 record(s) whose value reads as null without being a tombstone" in n for n in encoded.notes)


@pytest.mark.parametrize(
    ("record", "error"),
    [
        (RawRecord(b'["a",{"p":[1]}]', b'{"o":1}'), 'the partition of key ["a",{"p":[1]}] cannot be a CDC state'),
        (RawRecord(b'["a",{"p":1}]', b'{"o":{"x":1}}'), 'the value of key ["a",{"p":1}] cannot be a CDC state'),
    ],
    ids=["nested-partition", "nested-value"],
)
def test_a_cdc_export_refuses_what_its_reader_would_refuse(record: RawRecord, error: str) -> None:
    with pytest.raises(FormatError) as info:
        cdc_state.encode_file([record])
    assert str(info.value).startswith(error) and "OffsetUtils.validateFormat" in str(info.value)


def test_a_state_held_as_a_json_string_is_accepted() -> None:
    line = json.dumps({"connector": "rw", "state": RISINGWAVE_STATE.decode()}).encode()
    (record,) = cdc_state.loads_file(line).records
    assert record.key == b'["rw",{"server":"RW_CDC_1001"}]'


def test_bare_states_need_a_connector_name() -> None:
    with pytest.raises(FormatError, match=r"bare state document.*\(the CLI.s --name ENGINE\)") as info:
        cdc_state.loads_file(b"\n" + FLINK_STATE + b"\n", source="f.jsonl")
    assert str(info.value).endswith("(at line 2)")
    (record,) = cdc_state.loads_file(FLINK_STATE, default_connector=cdc_state.FLINK_DEFAULT_ENGINE).records
    assert record.key == b'["engine",{"server":"mysql_binlog_source"}]'


def test_a_bad_line_names_its_number_and_imports_nothing() -> None:
    good = b'{"connector":"a","state":' + FLINK_STATE + b"}"
    with pytest.raises(FormatError, match=r"line 3"):
        cdc_state.loads_file(good + b"\n" + good + b"\n" + b'{"connector":"a","state":{"sourcePartition":')


def test_keys_that_are_not_connect_keys_cannot_become_states() -> None:
    with pytest.raises(FormatError, match="not a Connect offsets key"):
        cdc_state.entry_to_state(b"plain", b"{}")


def test_an_envelope_key_unwraps_to_the_exact_payload_bytes() -> None:
    inner = b'["engine",{"server":"caf\xc3\xa9 \\uD83D\\uDE00","n":1.0E10}]'
    assert cdc_state.connect_key(b'{"schema":null,"payload":' + inner + b"}") == (inner, True)
    # Another spelling of the envelope cannot be sliced: its content is re-encoded (and said so).
    spaced = b'{"payload": ["engine", {"server": "x"}], "schema": null}'
    assert cdc_state.connect_key(spaced) == (b'["engine",{"server":"x"}]', False)
    assert cdc_state.connect_key(b'["engine",{"server":"x"}]') is None, "a Connect key needs no unwrapping"
    assert cdc_state.connect_key(b'{"schema":null,"payload":"no"}') is None
