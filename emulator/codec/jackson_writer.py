"""Bytes exactly as Connect's ``JsonConverter`` (``schemas.enable=false``) writes them.

Connect looks offsets up by exact key bytes (a ``HashMap<ByteBuffer, ByteBuffer>``), and the broker
compacts by exact key bytes. A key we write that differs from Connect's by one escape, one digit
or one space is a *different* partition for both of them: the task never sees our write and the
old record is never compacted away. So this encoder reproduces Jackson's default ``ObjectMapper``
output byte for byte rather than "valid JSON" (rules: docs/protocol.md §1.3, checked against a JVM in
``tests/compat/test_golden_codec.py``).

Types follow ``ConnectSchema.schemaType`` for schemaless data, as ``JsonConverter.convertToJson``
sees it: ``None``→null, ``bool``→Boolean, ``int``→Long (must fit in 64 bits), ``float``→Double,
``str``→String, bytes-like→``byte[]`` (base64), ``list``/``tuple``→List, ``dict``→Map. A map
whose keys are not all strings is written the way ``JsonConverter`` writes such maps: as an array
of ``[key, value]`` pairs.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from emulator.codec.limits import MAX_NESTING_DEPTH, depth_exceeded
from emulator.codec.strict_json import exceeds_depth

__all__ = ["JAVA_LONG_MAX", "JAVA_LONG_MIN", "at_any_depth", "dumps", "java_double_str"]

JAVA_LONG_MIN = -(1 << 63)
JAVA_LONG_MAX = (1 << 63) - 1

# --- Double.toString ---------------------------------------------------------------------------

# Below this magnitude a double has so few significand bits that a 2-digit decimal can be closer
# to it than the shortest 1-digit one (only subnormals qualify; 1e-300 leaves a wide margin).
_TINY = 1e-300


def _shortest_digits(x: float) -> tuple[str, int]:
    """Shortest round-trip digits of ``x > 0`` and exponent ``e`` with ``x ≈ d.ddd × 10^e``.

    ``repr`` is Python's shortest-digits algorithm (closest of the shortest), which is the
    digit choice JDK ≥ 19's ``Double.toString`` makes too, except for the 1-digit case below.
    """
    mantissa, _, exp_text = repr(x).partition("e")
    exponent = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # Position of the first significant digit relative to the decimal point.
    if int_part.strip("0"):
        exponent += len(int_part.lstrip("0")) - 1
    else:
        exponent -= len(frac_part) - len(frac_part.lstrip("0")) + 1
    digits = digits.rstrip("0") or "0"
    return digits, exponent


def _two_digit_rule(x: float, digit: str, exponent: int) -> tuple[str, int]:
    """Apply JDK ≥ 19's rule for when the shortest decimal has one digit.

    The javadoc then also admits 2-digit decimals that round to ``x`` and picks the one closest
    to ``x`` (ties: even last digit). This is why ``Double.MIN_VALUE`` prints as ``4.9E-324``
    where Python prints ``5e-324``.
    """
    exact = Fraction(x)
    best = Fraction(int(digit)) * Fraction(10) ** exponent
    best_key = (abs(best - exact), int(digit) % 2)
    best_digits, best_exp = digit, exponent
    for scale in (exponent - 1, exponent - 2):
        unit = Fraction(10) ** scale
        for k in range(10, 100):
            candidate = k * unit
            if float(candidate) != x:
                continue
            key = (abs(candidate - exact), k % 2)
            if key < best_key:
                best_key = key
                text = str(k).rstrip("0")
                best_digits, best_exp = text, scale + 1
    return best_digits, best_exp


def java_double_str(x: float) -> str:
    """``Double.toString(x)`` as JDK ≥ 19 prints it (what Jackson writes for a Double).

    Plain notation for 1e-3 ≤ |x| < 1e7, otherwise ``d.dddE±n`` with no ``+`` sign and at least
    one fractional digit. JDK ≤ 18 sometimes prints extra digits; we match the modern JDK, and
    the compat tests count the JDK 17 differences.
    """
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    magnitude = -x if x < 0 else x
    digits, exponent = _shortest_digits(magnitude)
    if len(digits) == 1 and magnitude < _TINY:
        digits, exponent = _two_digit_rule(magnitude, digits, exponent)
    if 1e-3 <= magnitude < 1e7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            frac = digits[exponent + 1 :] or "0"
        else:
            whole = "0"
            frac = "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


# --- strings -----------------------------------------------------------------------------------

# json's C string encoder (ensure_ascii=False flavour) already does what Jackson does for '"', '\\'
# and the five short escapes, and leaves '/', 0x7F and U+2028 raw. It differs only in writing
# other control characters with lowercase hex and in not escaping surrogates / non-BMP characters.
_c_encode_basestring: Callable[[str], str] = json.encoder.encode_basestring
_NEEDS_SURROGATE_ESCAPE = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")
# A lowercase-hex control escape, or an escaped backslash consumed first so that the literal text
# `\\u001f` (backslash, then "u001f") is never mistaken for an escape.
_LOWER_HEX_ESCAPE = re.compile(r"\\\\|\\u00[01][0-9a-f]")


def _surrogate_escape(match: re.Match[str]) -> str:
    """Jackson escapes each UTF-16 unit of a supplementary character (and lone surrogates)."""
    cp = ord(match.group())
    if cp < 0x10000:
        return f"\\u{cp:04X}"
    cp -= 0x10000
    return f"\\u{0xD800 | (cp >> 10):04X}\\u{0xDC00 | (cp & 0x3FF):04X}"


def _upper_hex(match: re.Match[str]) -> str:
    text = match.group()
    return text if text == "\\\\" else text.upper().replace("\\U", "\\u")


def _fix_escapes(text: str) -> str:
    """Turn json's C-encoder output into Jackson's (see the two differences above)."""
    if not text.isascii() and _NEEDS_SURROGATE_ESCAPE.search(text):
        text = _NEEDS_SURROGATE_ESCAPE.sub(_surrogate_escape, text)
    if "\\u00" in text:
        text = _LOWER_HEX_ESCAPE.sub(_upper_hex, text)
    return text


def _encode_str(s: str) -> str:
    return _fix_escapes(_c_encode_basestring(s))


# --- documents ---------------------------------------------------------------------------------

_BYTES_TYPES = (bytes, bytearray, memoryview)


def _b64(value: bytes | bytearray | memoryview) -> str:
    return base64.b64encode(value).decode("ascii")


def _encode_int(value: int) -> str:
    if JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:
        return int.__repr__(value)
    raise ValueError(f"integer {value} does not fit in a Java long; Connect cannot hold it")


class _Raw:
    """Text ``_encode`` appends as it is (brackets, commas, an object's ``"name":``), told apart on
    its work stack from the values still to encode."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_COMMA = _Raw(",")
_CLOSE_LIST, _CLOSE_MAP = _Raw("]"), _Raw("}")


def _encode(value: object, out: list[str]) -> None:
    """Append the Jackson text of ``value`` to ``out`` (reference encoder: every type, any depth).

    Without recursion, on a stack of its own: a record's key or value may nest as deep as Jackson
    reads (1,000 levels, docs/protocol.md §9.1), two Python frames per level would pass Python's
    recursion limit halfway there, and everything the daemon does with such a record (list it,
    archive it, export it) encodes it again.
    """
    stack: list[object] = [value]
    pop, push = stack.pop, stack.extend
    while stack:
        item = pop()
        if type(item) is _Raw:
            out.append(item.text)
        elif type(item) is str:
            out.append(_encode_str(item))
        elif item is None:
            out.append("null")
        elif type(item) is bool:
            out.append("true" if item else "false")
        elif type(item) is int:
            out.append(_encode_int(item))
        elif type(item) is float:
            out.append(_encode_float(item))
        elif isinstance(item, Mapping):
            push(reversed(_map_items(item, out)))
        elif type(item) is list or type(item) is tuple:
            push(reversed(_list_items(item, out)))
        elif isinstance(item, _BYTES_TYPES):
            out.append('"' + _b64(item) + '"')
        # Subclasses (IntEnum, str subclasses, ...) after the exact-type fast checks.
        elif isinstance(item, bool):
            out.append("true" if item else "false")
        elif isinstance(item, int):
            out.append(_encode_int(int(item)))
        elif isinstance(item, float):
            out.append(_encode_float(float(item)))
        elif isinstance(item, str):
            out.append(_encode_str(str(item)))
        elif isinstance(item, list | tuple):
            push(reversed(_list_items(item, out)))
        else:
            raise TypeError(
                f"cannot encode {type(item).__name__}: Connect offsets hold only null, booleans, "
                "integers, doubles, strings, bytes, lists and maps"
            )


def _encode_float(value: float) -> str:
    text = java_double_str(value)
    # Jackson's QUOTE_NON_NUMERIC_NUMBERS (default on) writes NaN and ±Infinity as strings.
    return f'"{text}"' if not math.isfinite(value) else text


def _list_items(items: list[object] | tuple[object, ...], out: list[str]) -> list[object]:
    """Open a list in ``out``; what follows it, in order: its items with commas between, its close."""
    out.append("[")
    pieces: list[object] = []
    for item in items:
        if pieces:
            pieces.append(_COMMA)
        pieces.append(item)
    pieces.append(_CLOSE_LIST)
    return pieces


def _map_items(mapping: Mapping[object, object], out: list[str]) -> list[object]:
    """Open a map in ``out``; what follows it, in order: each ``"name":`` and value, then its close."""
    pieces: list[object] = []
    if all(type(k) is str or isinstance(k, str) for k in mapping):
        out.append("{")
        for key, item in mapping.items():
            pieces.append(_Raw(("," if pieces else "") + _encode_str(str(key)) + ":"))
            pieces.append(item)
        pieces.append(_CLOSE_MAP)
        return pieces
    # JsonConverter: "If the map uses strings for keys, it should be encoded in the natural JSON
    # format. If it uses other primitive types or a complex type as a key, it will be encoded as a
    # list of pairs."
    out.append("[")
    for key, item in mapping.items():
        pieces.append(_Raw(",[" if pieces else "["))
        pieces.extend((key, _COMMA, item, _CLOSE_LIST))
    pieces.append(_CLOSE_LIST)
    return pieces


def _encode_flat_str_map(mapping: dict[str, object]) -> str | None:
    """The common offset shape (flat map of strings/ints/bools/nulls), or ``None`` to fall back.

    One pass with no recursion and no per-item list appends; the result is identical to
    ``_encode`` because it emits the same pieces for the same types.
    """
    parts = []
    for key, item in mapping.items():
        if type(key) is not str:
            return None
        if type(item) is str:
            text = _c_encode_basestring(item)
        elif type(item) is int:
            if not JAVA_LONG_MIN <= item <= JAVA_LONG_MAX:
                return None
            text = int.__repr__(item)
        elif item is None:
            text = "null"
        elif type(item) is bool:
            text = "true" if item else "false"
        elif type(item) is float:
            text = _encode_float(item)
        else:
            return None
        parts.append(_c_encode_basestring(key) + ":" + text)
    return "{" + ",".join(parts) + "}"


def dumps(value: object) -> bytes:
    """Encode ``value`` exactly as Connect's ``JsonConverter`` + Jackson write it (UTF-8 bytes).

    Raises ``TypeError`` for types Connect has no schema type for, and ``ValueError`` for integers
    outside Java's long range and for nesting beyond Jackson's 1,000 levels.
    """
    if type(value) is dict:
        flat = _encode_flat_str_map(value)
        if flat is not None:
            return _fix_escapes(flat).encode("utf-8")
    elif type(value) is list and len(value) == 2 and type(value[0]) is str and type(value[1]) is dict:
        # The record-key shape [connector, partition].
        flat = _encode_flat_str_map(value[1])
        if flat is not None:
            return _fix_escapes("[" + _c_encode_basestring(value[0]) + "," + flat + "]").encode("utf-8")
    text = _text(value)
    # Jackson's writer stops at the depth its reader does (StreamWriteConstraints, 1,000 levels):
    # Connect cannot write, nor read back, anything nested deeper.
    if text.count("[") + text.count("{") > MAX_NESTING_DEPTH and exceeds_depth(text):
        raise ValueError(depth_exceeded(MAX_NESTING_DEPTH + 1))
    return text.encode("utf-8")


def _text(value: object) -> str:
    """The Jackson text of ``value`` through the reference encoder, at any depth."""
    out: list[str] = []
    _encode(value, out)
    return "".join(out)


def at_any_depth(encode: Callable[[Any], str], value: object) -> str:
    """``encode(value)`` (a ``json.dumps`` of the caller's choosing), or Jackson's text of ``value``
    (``dumps``'s, without its depth limit: an answer wraps what it quotes in a few levels of its own)
    where ``value`` nests deeper than ``json``'s C encoder goes: it stops at Python's
    recursion limit, about 1,000 levels less the stack in use, and ``dumps`` keeps a stack of its own.

    A record's key or value may nest as deep as Jackson reads (1,000 levels, docs/protocol.md §9.1),
    and whatever quotes it (an answer, an audit line, the history archive) must still be written: the
    same JSON values; only the spelling of a double (``1.0E10``), of an infinity (Jackson's string
    ``"Infinity"``) and of an escape may differ from ``json``'s.
    """
    try:
        return encode(value)
    except RecursionError:
        return _text(value)
