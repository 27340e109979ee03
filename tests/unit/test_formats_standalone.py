"""Connect's standalone offsets file (Java-serialized HashMap<byte[],byte[]>): exact bytes, strict reading.

Golden bytes come from docs/protocol.md §6 (Java's own output); the JVM round trips
(Java writes → we read, we write → Java reads, a FileStream task resumes) are in
tests/integration/test_formats_standalone.py.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.formats import standalone
from emulator.formats.model import FormatError, RawRecord

KEY = b'["local-file-src",{"f":"/in"}]'[:15]
VALUE = b'{"p":1}'


def _utf(text: str) -> str:
    return f"{len(text):04x}" + text.encode().hex()


# docs/protocol.md §6, verbatim: one entry with a 15-byte key and a 7-byte value.
GOLDEN_ONE_ENTRY = bytes.fromhex(
    "aced0005"
    "7372" + _utf("java.util.HashMap") + "0507dac1c31660d1" + "03" + "0002"
    "46" + _utf("loadFactor") + "49" + _utf("threshold") + "7870"
    "3f400000" + "0000000c"
    "7708" + "00000010" + "00000001"
    "7572" + _utf("[B") + "acf317f8060854e0" + "02" + "0000" + "7870" + "0000000f" + KEY.hex() + "7571007e0002"
    "00000007" + VALUE.hex() + "78"
)


def test_one_entry_is_written_exactly_as_java_writes_it() -> None:
    assert len(KEY) == 15
    assert standalone.dumps([RawRecord(KEY, VALUE)]) == GOLDEN_ONE_ENTRY


def test_java_bytes_read_back_as_the_entry() -> None:
    loaded = standalone.loads(GOLDEN_ONE_ENTRY)
    assert loaded.records == [RawRecord(KEY, VALUE)]
    assert loaded.notes == []


def test_empty_map_has_java_s_empty_threshold_and_default_capacity() -> None:
    data = standalone.dumps([])
    # loadFactor 0.75, threshold 0 (no table yet), then block data: capacity 16, size 0, TC_ENDBLOCKDATA.
    assert data.endswith(bytes.fromhex("3f400000000000007708000000100000000078"))
    assert standalone.loads(data).records == []


@pytest.mark.parametrize(
    ("entries", "capacity", "threshold"), [(1, 16, 12), (12, 16, 12), (13, 32, 24), (100, 256, 192)]
)
def test_capacity_and_threshold_follow_hashmap_growth(entries: int, capacity: int, threshold: int) -> None:
    data = standalone.dumps([RawRecord(f'["c",{{"i":{i}}}]'.encode(), b"{}") for i in range(entries)])
    header = data.index(b"threshold") + len(b"threshold") + 2  # skip TC_ENDBLOCKDATA, TC_NULL
    load_factor, found_threshold = struct.unpack(">fi", data[header : header + 8])
    block_capacity, size = struct.unpack(">ii", data[header + 10 : header + 18])
    assert (load_factor, found_threshold, block_capacity, size) == (0.75, threshold, capacity, entries)


def test_tombstones_are_kept_as_null_values_both_ways() -> None:
    records = [RawRecord(b'["c",{"a":1}]', b'{"o":1}'), RawRecord(b'["c",{"a":2}]', None)]
    data = standalone.dumps(records)
    assert b"\x70" in data[data.index(b'{"a":2}') :]  # TC_NULL right after the key
    loaded = standalone.loads(data)
    assert loaded.records == records
    assert loaded.notes == ["1 tombstone(s) (null values) kept as deletions"]


def test_a_later_record_for_the_same_key_wins_when_writing() -> None:
    data = standalone.dumps([RawRecord(b"k", b"1"), RawRecord(b"j", b"x"), RawRecord(b"k", b"2")])
    assert standalone.loads(data).records == [RawRecord(b"k", b"2"), RawRecord(b"j", b"x")]


records_strategy = st.lists(
    st.tuples(st.binary(min_size=0, max_size=300), st.none() | st.binary(max_size=300)), max_size=40
)


@settings(max_examples=200, deadline=None)
@given(records_strategy)
def test_any_records_round_trip_byte_exact(pairs: list[tuple[bytes, bytes | None]]) -> None:
    records = [RawRecord(k, v) for k, v in pairs]
    latest: dict[bytes, bytes | None] = {}
    for k, v in pairs:
        latest[k] = v
    assert standalone.loads(standalone.dumps(records)).records == [RawRecord(k, v) for k, v in latest.items()]


def _three_entries() -> bytes:
    return standalone.dumps(
        [
            RawRecord(b'["a",{"f":"x"}]', b'{"pos":1}'),
            RawRecord(b'["b",{"f":"x"}]', None),
            RawRecord(b'["c",{"f":"x"}]', b'{"pos":3}'),
        ]
    )


def test_every_truncation_is_a_clear_error_naming_the_byte_offset() -> None:
    data = _three_entries()
    for cut in range(len(data)):
        with pytest.raises(FormatError) as info:
            standalone.loads(data[:cut], source="f.offsets")
        message = str(info.value)
        assert message.startswith("f.offsets: "), message
        assert f"of {cut})" in message, message  # "(at byte offset N of <file size>)"
        if cut > 0:
            assert "truncated" in message or "ends" in message or "only" in message, message


def test_an_empty_file_is_an_error_not_empty_offsets() -> None:
    with pytest.raises(FormatError, match=r"empty \(0 bytes\).*silently load it as NO offsets"):
        standalone.loads(b"")


SIZE_BLOCK = b"\x77\x08\x00\x00\x00\x10\x00\x00\x00\x03"  # TC_BLOCKDATA 8: capacity 16, size 3


def _replace_once(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) >= 1
    return data.replace(old, new, 1)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda d: b"PK" + d[2:], r"not a Java serialization stream: starts with 0x504b.*at byte offset 0"),
        (lambda d: d[:2] + b"\x00\x04" + d[4:], r"stream version 4, expected 5"),
        (
            lambda d: _replace_once(d, b"\x00\x11java.util.HashMap", b"\x00\x11java.util.TreeMap"),
            r"Expected HashMap but found java.util.TreeMap",
        ),
        (lambda d: _replace_once(d, bytes.fromhex("0507dac1c31660d1"), bytes(8)), r"serialVersionUID 0x0+, expected"),
        (lambda d: _replace_once(d, b"\x00\x02[B", b"\x00\x02[I"), r"array of class \[I, expected byte\[\]"),
        (
            lambda d: _replace_once(d, bytes.fromhex("7571007e0002"), bytes.fromhex("7571007e0009")),
            r"handle 0x007e0009",
        ),
        (
            lambda d: _replace_once(d, bytes.fromhex("7571007e0002"), bytes.fromhex("7571007e0001")),
            r"class descriptor of the value of entry 0 of 3 refers to something that is not a class",
        ),
        (lambda d: d + b"\x00", r"1 unexpected byte\(s\) after the HashMap"),
        (lambda d: d[:-1] + b"\x70", r"expected TC_ENDBLOCKDATA after the HashMap's 3 declared entries, found TC_NULL"),
        (lambda d: _replace_once(d, SIZE_BLOCK, b"\x77\x08" + bytes(4) + b"\xff" * 4), "illegal HashMap size -1"),
        (
            lambda d: _replace_once(d, SIZE_BLOCK, b"\x77\x08" + bytes(4) + b"\x00\x10\x00\x00"),
            r"declares 1048576 entries but only \d+ byte\(s\) follow",
        ),
        (lambda d: _replace_once(d, b"\x3f\x40\x00\x00", b"\x7f\xc0\x00\x00"), r"illegal HashMap load factor nan"),
        (lambda d: _replace_once(d, b"\x00\x09threshold", b"\x00\x09threshols"), r"declares fields"),
    ],
    ids=[
        "zip-magic",
        "version",
        "treemap",
        "suid",
        "int-array",
        "dangling-reference",
        "map-as-class",
        "trailing-byte",
        "missing-end",
        "negative-size",
        "huge-size",
        "nan-load-factor",
        "renamed-field",
    ],
)
def test_corrupt_files_are_refused_by_name(damage: object, expected: str) -> None:
    data = damage(_three_entries())  # type: ignore[operator]
    with pytest.raises(FormatError, match=expected) as info:
        standalone.loads(data)
    assert "byte offset" in str(info.value)


def test_a_string_where_a_byte_array_belongs_is_refused() -> None:
    data = _three_entries()
    first_key = data.index(b"\x75\x72\x00\x02[B")
    damaged = data[:first_key] + b"\x74\x00\x01x" + data[first_key:]
    with pytest.raises(FormatError, match=r"must be a byte\[\] \(TC_ARRAY\) or null, found TC_STRING"):
        standalone.loads(damaged)


def test_back_reference_to_an_earlier_array_yields_the_same_bytes() -> None:
    # Java writes the same byte[] object twice as a back-reference; handles: 0 class, 1 map, 2 [B, 3 key, 4 value.
    data = standalone.dumps([RawRecord(b"k1", b"v"), RawRecord(b"k2", b"w")])
    second_value = data.rindex(bytes.fromhex("7571007e0002") + struct.pack(">i", 1) + b"w")
    patched = data[:second_value] + bytes.fromhex("71007e0004") + data[second_value + 11 :]
    assert standalone.loads(patched).records == [RawRecord(b"k1", b"v"), RawRecord(b"k2", b"v")]


def test_long_block_data_is_accepted() -> None:
    data = _three_entries()
    patched = _replace_once(data, b"\x77\x08\x00\x00\x00\x10", b"\x7a\x00\x00\x00\x08\x00\x00\x00\x10")
    assert len(standalone.loads(patched).records) == 3


def _header(size: int) -> bytes:
    empty = standalone.dumps([])
    return empty[: -len(struct.pack(">i", 0)) - 1] + struct.pack(">i", size)


def test_a_null_key_is_skipped_and_reported() -> None:
    byte_array_class = bytes.fromhex("7572" + _utf("[B") + "acf317f8060854e0" + "02" + "0000" + "7870")
    data = _header(1) + b"\x70" + byte_array_class + struct.pack(">i", 2) + b"{}" + b"\x78"
    loaded = standalone.loads(data)
    assert loaded.records == []
    assert "null key skipped" in loaded.notes[0]


def test_a_reference_to_the_map_itself_is_refused() -> None:
    byte_array_class = bytes.fromhex("7572" + _utf("[B") + "acf317f8060854e0" + "02" + "0000" + "7870")
    data = _header(1) + byte_array_class + struct.pack(">i", 1) + b"k" + bytes.fromhex("71007e0001") + b"\x78"
    with pytest.raises(FormatError, match=r"value of entry 0 of 1 is a back-reference to the map itself"):
        standalone.loads(data)


def test_write_file_replaces_atomically_and_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "connect.offsets"
    path.write_bytes(b"old")
    os.chmod(path, 0o640)
    standalone.write_file(path, [RawRecord(KEY, VALUE)])
    assert path.read_bytes() == GOLDEN_ONE_ENTRY
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["connect.offsets"], "no temp file left behind"


def test_a_failing_write_leaves_the_old_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "connect.offsets"
    path.write_bytes(GOLDEN_ONE_ENTRY)

    def exploding() -> object:
        yield RawRecord(b"k", b"v")
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        standalone.write_file(path, exploding())  # type: ignore[arg-type]
    assert path.read_bytes() == GOLDEN_ONE_ENTRY
    assert sorted(p.name for p in tmp_path.iterdir()) == ["connect.offsets"]
