"""Parsing is as lenient as Connect's JsonConverter (docs/protocol.md §1.6) and returns what Connect
holds after ``convertToConnect``; ``validate_format`` says what ``OffsetUtils.validateFormat`` says.
The same inputs are checked against a live JVM in tests/compat/test_golden_codec.py."""

from __future__ import annotations

import base64
import json
import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.codec.jackson_reader import _loads_exact
from emulator.codec.jackson_writer import dumps
from emulator.codec.values import (
    CodecError,
    InvalidOffsets,
    encode_offset,
    loads_lenient,
    parse_offset,
    validate_format,
)

# --- §1.6: what Connect accepts beyond strict JSON ------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b' ["c", {"a": 1}] ', ["c", {"a": 1}]),
        (b'\t\r\n{"a"\n:\t1 }', {"a": 1}),
        (b'["c",{"a":1}] trailing garbage', ["c", {"a": 1}]),
        (b'{"a":1}}}', {"a": 1}),
        (b'"text"xyz', "text"),
        (b"1 2 3", 1),
        (b"true:", True),
        (b"007", 7),
        (b"-007", -7),
        (b"[00, 01.50, -00e1]", [0, 1.5, 0.0]),
        (b"", None),
        (b" \n\t", None),
        (b"null", None),
        (b"\xef\xbb\xbf[1]", [1]),
        (b"[1]\xff\xfe", [1]),
    ],
)
def test_connect_leniency(raw: bytes, value: object) -> None:
    assert _typed(loads_lenient(raw)) == _typed(value)


def test_duplicate_key_keeps_last_value_at_first_position() -> None:
    parsed = loads_lenient(b'{"a":1,"b":2,"a":3}')
    assert list(parsed.items()) == [("a", 3), ("b", 2)]


def test_key_order_is_document_order() -> None:
    assert list(loads_lenient(b'{"z":1,"a":2,"m":3}')) == ["z", "a", "m"]


@pytest.mark.parametrize(
    "raw",
    [
        b"x",
        b"{",
        b'["c",',
        b"[1,]",
        b'{"a":1,}',
        b"[,1]",
        b"{a:1}",
        b"{'a':1}",
        b"NaN",
        b"[Infinity]",
        b"-Infinity",
        b"+1",
        b".5",
        b"1.",
        b"1e",
        b"1e+",
        b"0x10",
        b"1x",  # a root number must be followed by white space
        b"1,2",
        b"truex",
        b"true1",
        b"true\x7f",
        b"true\xc2\xa0",  # jackson 2.21 fails on any non-ASCII byte after a literal
        b"nul",
        b'"unterminated',
        b'"a\x01b"',  # raw control character in a string
        b'"\\x"',
        b'"\\u12G4"',
        b"/* c */ 1",
        b"# c\n1",
        b'"\xff"',
        b'"\xc3"',
        b'"\xed\xa0\x80"',  # UTF-8-encoded surrogate: rejected by jackson 2.21
        b'{"\\ud800":1}',  # lone escaped surrogate in a field name
        b'{"\\udc00":1}',
        b"[" * 1001 + b"]" * 1001,
        b"1" * 1001,
        b"1e2147483648",
        b"0." + b"1" * 1000,
    ],
)
def test_what_connect_rejects_is_a_codec_error(raw: bytes) -> None:
    with pytest.raises(CodecError):
        loads_lenient(raw)


def test_limits_accept_up_to_the_boundary() -> None:
    assert loads_lenient(b"[" * 1000 + b"]" * 1000) is not None
    assert loads_lenient(b"1" * 1000) is not None


# --- what Connect holds after convertToConnect --------------------------------------------------


def test_integers_are_longs_wrapped_like_biginteger_longvalue() -> None:
    assert loads_lenient(b"9223372036854775807") == 2**63 - 1
    assert loads_lenient(b"9223372036854775808") == -(2**63)
    assert loads_lenient(b"-9223372036854775809") == 2**63 - 1
    assert loads_lenient(b"[18446744073709551617]") == [1]


def test_fractions_and_exponents_are_doubles() -> None:
    assert _typed(loads_lenient(b"[1.0, 1e2, 1E-2, 0.30000000000000004]")) == _typed([1.0, 100.0, 0.01, 0.1 + 0.2])


def test_negative_zero_reads_as_positive_zero_because_bigdecimal_has_no_sign_on_zero() -> None:
    value = loads_lenient(b"[-0.0, -0e5, -0]")
    assert _typed(value) == _typed([0.0, 0.0, 0])


def test_huge_exponent_is_infinity_and_tiny_is_zero() -> None:
    assert loads_lenient(b"[1e400, -1e400, 1e-400]") == [math.inf, -math.inf, 0.0]


def test_escapes_decode_and_surrogate_pairs_join() -> None:
    assert loads_lenient(b'"\\ud83d\\ude00 \\u00e9 \\/ \\ud800"') == "\U0001f600 é / \ud800"
    assert loads_lenient(b'{"\\ud83d\\ude00":1}') == {"\U0001f600": 1}


def test_overlong_utf8_is_accepted_as_jackson_does() -> None:
    assert loads_lenient(b'"\xc0\x80\xe0\x80\x80"') == "\x00\x00"


def test_utf16_input_is_detected_like_jackson() -> None:
    assert loads_lenient('["c",{"a":1}]'.encode("utf-16-le")) == ["c", {"a": 1}]
    assert loads_lenient('["c",{"a":1}]'.encode("utf-16")) == ["c", {"a": 1}]  # with BOM


def test_bytes_like_input_is_accepted() -> None:
    assert loads_lenient(bytearray(b"[1]")) == [1]
    assert loads_lenient(memoryview(b"[1]")) == [1]


# --- the fast path and the exact parser agree ------------------------------------------------------

_json_ish = st.lists(
    st.sampled_from(
        [
            *(b"[", b"]", b"{", b"}", b'"', b",", b":", b" ", b"\n", b"0", b"1", b"-", b".", b"e", b"true"),
            *(b"null", b'"a"', b'"k":', b"\\", b"u", b"d800", b"\xc3\xa9", b"\xff", b"\x00", b"007", b"1e5"),
            b"\\n",
        ]
    ),
    max_size=12,
).map(b"".join)


@pytest.mark.slow
@settings(max_examples=2000)
@given(st.one_of(_json_ish, st.binary(max_size=12)))
def test_fast_path_and_exact_parser_agree_on_arbitrary_bytes(raw: bytes) -> None:
    assert _outcome(loads_lenient, raw) == _outcome(_loads_exact, raw)


def test_documents_beyond_the_fast_path_size_parse_the_same() -> None:
    # Over 2000 bytes the exact parser runs alone (it enforces Jackson's depth/length limits).
    offset = {f"field_{i}": (i if i % 3 else f"value \u00e9 {i}") for i in range(300)}
    raw = json.dumps(offset, separators=(",", ":")).encode()
    assert len(raw) > 2000
    assert loads_lenient(raw) == offset


# --- round trip: what we write, Connect (and we) read back ------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.text(st.characters(codec=None, exclude_categories=()))
    | st.binary(max_size=8)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=500)
@given(_values)
def test_round_trip_gives_what_connect_would_hold(value: object) -> None:
    assert _typed(loads_lenient(dumps(value))) == _typed(_as_connect_reads_it(value))


@settings(max_examples=300)
@given(st.dictionaries(st.text(), _scalars, max_size=8))
def test_offset_round_trip(offset: dict[str, Any]) -> None:
    raw = encode_offset(offset)
    assert raw is not None
    assert _typed(parse_offset(raw)) == _typed(_as_connect_reads_it(offset))


def test_tombstone_and_empty_value_are_different_things() -> None:
    assert encode_offset(None) is None
    assert parse_offset(None) is None
    assert parse_offset(b"") is None  # parses to null, but the caller keeps the entry


def test_bad_offset_bytes_raise_codec_error() -> None:
    with pytest.raises(CodecError):
        parse_offset(b"{not json")


# --- OffsetUtils.validateFormat ------------------------------------------------------------------


@pytest.mark.parametrize(
    "m",
    [
        None,
        {},
        {"a": None, "b": True, "c": 1, "d": 1.5, "e": "s", "f": b"x", "g": bytearray(b"y"), "h": math.nan},
    ],
)
def test_valid_offsets(m: object) -> None:
    validate_format(m)


@pytest.mark.parametrize(
    ("m", "message"),
    [
        ([1], "Offsets must be specified as a Map"),
        ("x", "Offsets must be specified as a Map"),
        ({1: "a"}, "Offsets may only use String keys"),
        ({None: "a"}, "Offsets may only use String keys"),
        ({"f": {"x": 1}}, "Offsets may only contain primitive types as values, but field f contains MAP"),
        ({"f": [1]}, "Offsets may only contain primitive types as values, but field f contains ARRAY"),
        ({"f": (1,)}, "Offsets may only contain primitive types as values, but field f contains ARRAY"),
        (
            {"f": 2**63},
            "Offsets may only contain primitive types as values, but field f contains class java.math.BigInteger",
        ),
        (
            {"ok": 1, "f": {1, 2}},
            "Offsets may only contain primitive types as values, but field f contains class builtins.set",
        ),
    ],
)
def test_invalid_offsets_carry_connects_message(m: object, message: str) -> None:
    with pytest.raises(InvalidOffsets) as info:
        validate_format(m)
    assert str(info.value) == message


def test_validation_stops_at_the_first_bad_entry_in_iteration_order() -> None:
    with pytest.raises(InvalidOffsets, match="field b contains ARRAY"):
        validate_format({"a": 1, "b": [], "c": {}})


# --- helpers ------------------------------------------------------------------------------------


def _as_connect_reads_it(value: object) -> object:
    """What Connect's parse of our bytes holds: the wire changes a few values (docs/protocol.md §1.3, §1.6)."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return 0.0 if value == 0.0 else value
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, str):
        # Java strings are UTF-16: separately held surrogate halves are one character again.
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if isinstance(value, list | tuple):
        return [_as_connect_reads_it(v) for v in value]
    if isinstance(value, dict):
        return {_as_connect_reads_it(k): _as_connect_reads_it(v) for k, v in value.items()}
    return value


def _typed(value: object) -> object:
    """A comparable form that keeps Java's type distinctions (True != 1, 1 != 1.0, float bits)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("long", value)
    if isinstance(value, float):
        return ("double", struct.pack(">d", value))
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, dict):
        return ("map", [(k, _typed(v)) for k, v in value.items()])
    return (type(value).__name__, value)


def _outcome(parse: Any, raw: bytes) -> object:
    try:
        return ("ok", _typed(parse(raw)))
    except CodecError:
        return ("error",)
