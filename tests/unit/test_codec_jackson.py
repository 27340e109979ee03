"""The encoder writes Jackson's bytes: the published vectors (docs/protocol.md §1.7), each row of the
byte-level rules table (§1.3) and Java's Double.toString format. Golden checks over thousands of
values against a live JVM are in tests/compat/test_golden_codec.py."""

from __future__ import annotations

import math
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.codec.jackson_writer import _encode, dumps, java_double_str
from tests.fixtures.recursion import daemon_recursion_limit

# --- §1.7 vectors ----------------------------------------------------------------------------


def test_file_source_key_vector() -> None:
    assert dumps(["local-file-source", {"filename": "/tmp/test.txt"}]) == bytes.fromhex(
        "5b226c6f63616c2d66696c652d736f75726365222c7b2266696c656e616d65223a222f746d702f746573742e747874227d5d"
    )


def test_position_value_vector() -> None:
    assert dumps({"position": 1234}) == bytes.fromhex("7b22706f736974696f6e223a313233347d")


def test_debezium_key_vector() -> None:
    assert dumps(["inventory-connector", {"server": "dbserver1"}]) == b'["inventory-connector",{"server":"dbserver1"}]'


def test_string_escaping_vector() -> None:
    value = {"s1": "café 日本 \U0001f600", "s2": "tab\tnl\ncr\rbs\bff\f", "s3": '\x01\x1f\x7f\u2028/"\\'}
    expected = (
        '{"s1":"café 日本 \\uD83D\\uDE00","s2":"tab\\tnl\\ncr\\rbs\\bff\\f","s3":"\\u0001\\u001F\x7f\u2028/\\"\\\\"}'
    ).encode()
    assert dumps(value) == expected


def test_number_and_scalar_vector() -> None:
    value = {
        "d1": 1.0,
        "d2": 1.0e10,
        "d3": 1.0e-5,
        "d4": 0.001,
        "d5": 1234567.0,
        "d6": 1.0e7,
        "d7": 100.5,
        "d8": 0.1 + 0.2,
        "d9": -0.0,
        "nan": math.nan,
        "inf": math.inf,
        "i": 42,
        "l": 9007199254740993,
        "b": True,
        "n": None,
        "bytes": bytes([1, 2, 3, 255]),
    }
    assert dumps(value) == (
        b'{"d1":1.0,"d2":1.0E10,"d3":1.0E-5,"d4":0.001,"d5":1234567.0,"d6":1.0E7,"d7":100.5,'
        b'"d8":0.30000000000000004,"d9":-0.0,"nan":"NaN","inf":"Infinity","i":42,"l":9007199254740993,'
        b'"b":true,"n":null,"bytes":"AQID/w=="}'
    )


# --- §1.3 rules, one row at a time ---------------------------------------------------------------


def test_output_is_compact_with_no_trailing_newline() -> None:
    assert dumps({"a": [1, 2], "b": {"c": None}}) == b'{"a":[1,2],"b":{"c":null}}'


@pytest.mark.parametrize(
    ("char", "escaped"),
    [("\b", "\\b"), ("\t", "\\t"), ("\n", "\\n"), ("\f", "\\f"), ("\r", "\\r"), ('"', '\\"'), ("\\", "\\\\")],
)
def test_short_escapes(char: str, escaped: str) -> None:
    assert dumps(char) == f'"{escaped}"'.encode()


@pytest.mark.parametrize("code", [c for c in range(0x20) if c not in (0x08, 0x09, 0x0A, 0x0C, 0x0D)])
def test_other_control_characters_use_uppercase_hex(code: int) -> None:
    assert dumps(chr(code)) == f'"\\u{code:04X}"'.encode()


@pytest.mark.parametrize("char", ["/", "\x7f", "\u2028", "\u2029", "é", "日", "\ufffd", "\uffff"])
def test_slash_del_line_separators_and_bmp_text_are_raw_utf8(char: str) -> None:
    assert dumps(char) == b'"' + char.encode("utf-8") + b'"'


def test_supplementary_characters_become_two_uppercase_surrogate_escapes() -> None:
    assert dumps("\U0001f600") == b'"\\uD83D\\uDE00"'
    assert dumps("\U00010000\U0010ffff") == b'"\\uD800\\uDC00\\uDBFF\\uDFFF"'


def test_lone_surrogates_are_escaped_like_java_chars() -> None:
    assert dumps("a\ud800b\udfffc") == b'"a\\uD800b\\uDFFFc"'


def test_literal_backslash_u_text_is_not_mistaken_for_an_escape() -> None:
    # The text `\u001f` (6 characters) must stay an escaped backslash followed by "u001f".
    assert dumps("\\u001f\x1f") == b'"\\\\u001f\\u001F"'


def test_escapes_apply_to_map_keys_too() -> None:
    assert dumps({"k\x1f\U0001f600": 1}) == b'{"k\\u001F\\uD83D\\uDE00":1}'


@pytest.mark.parametrize("n", [0, 42, -1, 2**53 + 1, 2**63 - 1, -(2**63)])
def test_longs_are_plain_decimal(n: int) -> None:
    assert dumps(n) == str(n).encode()


@pytest.mark.parametrize("n", [2**63, -(2**63) - 1, 10**30])
def test_integers_beyond_a_java_long_are_rejected(n: int) -> None:
    with pytest.raises(ValueError, match="Java long"):
        dumps({"x": n})


def test_non_finite_doubles_are_quoted_strings() -> None:
    assert dumps([math.nan, math.inf, -math.inf]) == b'["NaN","Infinity","-Infinity"]'


def test_bytes_like_values_are_padded_standard_base64() -> None:
    assert dumps([b"\x01\x02\x03\xff", bytearray(b"\xfb\xff"), memoryview(b"ab")]) == b'["AQID/w==","+/8=","YWI="]'


def test_key_order_is_the_mappings_iteration_order() -> None:
    assert dumps({"table": "orders", "db": "shop", "protocol": "1"}) == (
        b'{"table":"orders","db":"shop","protocol":"1"}'
    )
    assert dumps(OrderedDict([("b", 1), ("a", 2)])) == b'{"b":1,"a":2}'


def test_map_with_non_string_keys_is_written_as_pairs_like_jsonconverter() -> None:
    assert dumps({1: "a", "b": None}) == b'[[1,"a"],["b",null]]'


def test_tuples_are_arrays_and_booleans_are_not_numbers() -> None:
    assert dumps((True, False, 1, 0)) == b"[true,false,1,0]"


def test_unsupported_types_are_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match="cannot encode set"):
        dumps({"x": {1, 2}})


def test_absurd_nesting_is_a_value_error_not_a_crash() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValueError, match=r"Document nesting depth \(1001\) exceeds the maximum allowed \(1000\)"):
        dumps(deep)


def test_nesting_up_to_jacksons_limit_is_written_without_recursion() -> None:
    """Jackson reads and writes 1,000 levels; two Python frames per level stopped the encoder at ~500."""
    deep: object = 1
    for _ in range(999):
        deep = [deep]
    with daemon_recursion_limit():
        assert dumps({"a": deep}) == b'{"a":' + b"[" * 999 + b"1" + b"]" * 999 + b"}"
        with pytest.raises(ValueError, match="nesting depth"):
            dumps({"a": [deep]})


# --- Double.toString (JDK >= 19) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (1.0, "1.0"),
        (100.5, "100.5"),
        (0.001, "0.001"),
        (1234567.0, "1234567.0"),
        (9999999.999999998, "9999999.999999998"),
        (1.0e7, "1.0E7"),
        (1.0e10, "1.0E10"),
        (1.0e-5, "1.0E-5"),
        (0.0009999999999999998, "9.999999999999998E-4"),
        (12345678.9, "1.23456789E7"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1.0e23, "1.0E23"),  # JDK 17 prints 9.999999999999999E22 (docs/protocol.md §1.3)
        (3.342741096160404e17, "3.342741096160404E17"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (2.2250738585072014e-308, "2.2250738585072014E-308"),
        (5e-324, "4.9E-324"),  # Double.MIN_VALUE: 2 digits are closer than 1 (Python: 5e-324)
        (1e-323, "9.9E-324"),
        (-123.0, "-123.0"),
    ],
)
def test_java_double_str(x: float, text: str) -> None:
    assert java_double_str(x) == text


def test_special_doubles() -> None:
    assert [java_double_str(v) for v in (math.nan, math.inf, -math.inf)] == ["NaN", "Infinity", "-Infinity"]


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_double_text_reads_back_as_the_same_double(x: float) -> None:
    text = java_double_str(x)
    assert float(text) == x
    assert math.copysign(1.0, float(text)) == math.copysign(1.0, x)
    plain = x == 0.0 or 1e-3 <= abs(x) < 1e7
    assert ("E" not in text) == plain
    assert "+" not in text and "." in text


# --- the fast paths are the reference encoder ------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.text(st.characters(codec=None, exclude_categories=()))
    | st.binary(max_size=8)
)
_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=12
)


@pytest.mark.slow
@settings(max_examples=500)
@given(st.dictionaries(st.text(st.characters(codec=None, exclude_categories=())), _scalars, max_size=6))
def test_flat_map_fast_path_is_byte_identical_to_the_reference_encoder(value: dict[str, object]) -> None:
    out: list[str] = []
    _encode(value, out)
    assert dumps(value) == "".join(out).encode("utf-8")
    out = []
    _encode(["conn", value], out)
    assert dumps(["conn", value]) == "".join(out).encode("utf-8")


@pytest.mark.slow
@settings(max_examples=300)
@given(_values)
def test_output_is_ascii_safe_utf8_without_raw_surrogates(value: object) -> None:
    encoded = dumps(value)
    text = encoded.decode("utf-8")  # strict: a raw surrogate would not be valid UTF-8
    assert not any(0xD800 <= ord(c) <= 0xDFFF or ord(c) > 0xFFFF for c in text)
