"""Reading JSON bytes the way Connect's ``JsonConverter`` reads them: a port of Jackson's lenient reader.

Connect parses with ``ObjectMapper.readTree`` (``ALLOW_LEADING_ZEROS_FOR_NUMBERS``,
``USE_BIG_DECIMAL_FOR_FLOATS``) and then ``JsonConverter.convertToConnect``. That is laxer than
JSON: hand-written or foreign records that Connect accepts must be accepted here too, or the daemon
would disagree with Connect about which partitions exist (docs/protocol.md §1.6). So we parse with the
stdlib's C scanner when the input is plain JSON (the overwhelmingly common case, and provably the
same result), and otherwise with a byte-level port of Jackson's ``UTF8StreamJsonParser`` rules.

What Connect hands back, and therefore what we return: ``None`` for null (and for empty input,
Jackson's ``MissingNode``), ``bool``, ``int`` wrapped to a signed 64-bit value (``BigInteger
.longValue()``), ``float`` (``BigDecimal.doubleValue()``, so ``-0.0`` reads as ``0.0``), ``str``,
``list`` and ``dict`` in document order with the last duplicate key winning at its first position.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from typing import Any, Final

from emulator.codec.jackson_writer import JAVA_LONG_MAX, JAVA_LONG_MIN
from emulator.codec.limits import (
    MAX_NAME_LENGTH,
    MAX_NESTING_DEPTH,
    MAX_NUMBER_LENGTH,
    MAX_STRING_LENGTH,
    depth_exceeded,
    float_length,
    name_too_long,
    number_too_long,
    string_too_long,
)

__all__ = ["CodecError", "loads_lenient"]


class CodecError(ValueError):
    """The bytes are not something Connect's JsonConverter can read (Connect: ``DataException``).

    ``offset`` is the byte of the input where the reader gave up (``None`` when unknown, e.g. for
    UTF-16/32 input), so that a refusal can point into a file.
    """

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


# --- Jackson's limits: emulator.codec.limits ---------------------------------------------------

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
# Inputs up to this size cannot exceed the depth limit (depth 1001 needs ≥ 2002 bytes) or the name
# limit, so the C scanner's answer needs only the number checks below.
_FAST_PATH_MAX_BYTES: Final = 2000


# --- numbers, as Connect converts them ---------------------------------------------------------


def _wrap_long(value: int) -> int:
    """``BigInteger.longValue()``: Connect keeps the low 64 bits of an oversized integer."""
    value &= 0xFFFF_FFFF_FFFF_FFFF
    return value - (1 << 64) if value >> 63 else value


class _NotFast(ValueError):
    """Internal: the C scanner's answer might differ from Jackson's; use the exact parser."""


def _connect_double(literal: str) -> float:
    """A JSON fraction/exponent literal as ``new BigDecimal(text).doubleValue()`` gives it.

    Raises ``CodecError`` where Jackson or ``BigDecimal`` reject the literal (too long, exponent
    or scale beyond an int).
    """
    mantissa, e_sep, exp_text = literal.replace("E", "e").partition("e")
    _, _, frac_text = mantissa.partition(".")
    exp_digits = exp_text.lstrip("+-")
    length = float_length(literal)
    if length > MAX_NUMBER_LENGTH:
        raise CodecError(number_too_long(length))
    if e_sep:
        exponent = int(exp_text)
        if len(exp_digits.lstrip("0")) > 10 or not _INT32_MIN <= exponent <= _INT32_MAX:
            raise CodecError("Exponent overflow.")
        if not _INT32_MIN <= len(frac_text) - exponent <= _INT32_MAX:
            raise CodecError("Scale out of range.")
    value = float(literal)
    # BigDecimal has no negative zero.
    return 0.0 if value == 0.0 else value


def _fast_double(literal: str) -> float:
    try:
        return _connect_double(literal)
    except CodecError as exc:
        raise _NotFast(str(exc)) from None


def _fast_long(literal: str) -> int:
    # Only an out-of-range (or over-long) integer needs Jackson's treatment; the exact parser has it.
    value = int(literal)
    if JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:
        return value
    raise _NotFast(literal)


def _reject_constant(name: str) -> object:
    # NaN / Infinity / -Infinity literals: Jackson rejects them (ALLOW_NON_NUMERIC_NUMBERS is off).
    raise _NotFast(name)


_decoder = json.JSONDecoder(parse_float=_fast_double, parse_int=_fast_long, parse_constant=_reject_constant)
_scan_once: Callable[[str, int], tuple[Any, int]] = _decoder.scan_once  # type: ignore[attr-defined]
_JSON_WS: Final = " \t\n\r"
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


_FALLBACK: Final = object()


def _loads_fast(text: str) -> object:
    """The C scanner, accepted only where its result provably equals Jackson's."""
    start = 0
    if text[:1] in _JSON_WS:
        start = len(text) - len(text.lstrip(_JSON_WS))
        if start == len(text):
            return None  # empty document: MissingNode, which Connect turns into null
    try:
        value, end = _scan_once(text, start)
    except (StopIteration, ValueError, RecursionError):
        return _FALLBACK
    # Jackson never looks past a root array/object/string; after a root number or literal the next
    # character must be white space (numbers) or a non-identifier character (true/false/null).
    if text[start] not in '[{"' and end < len(text) and text[end] not in _JSON_WS:
        return _FALLBACK
    if "\\u" in text and _ESCAPED_SURROGATE.search(text):
        return _FALLBACK  # field names have Jackson-specific surrogate rules; let the exact parser decide
    return value


# --- the exact parser --------------------------------------------------------------------------


def _java_identifier_part(ch: int) -> bool:
    """``Character.isJavaIdentifierPart((char) ch)``: decides whether ``truex`` is one bad token."""
    ch &= 0xFFFF
    if ch <= 0x08 or 0x0E <= ch <= 0x1B or 0x7F <= ch <= 0x9F:
        return True  # identifier-ignorable controls
    if 0xD800 <= ch <= 0xDFFF:
        return False
    category = unicodedata.category(chr(ch))
    return category[0] == "L" or category in ("Sc", "Pc", "Nd", "Nl", "Mc", "Mn", "Cf")


def _decode_utf8_like_jackson(run: bytes, *, in_name: bool) -> str:
    """Decode a string's bytes with Jackson's (lenient) UTF-8 decoder.

    Jackson checks lead and continuation bit patterns and (2.21) rejects encoded surrogates, but
    accepts overlong forms; 4-byte forms become a surrogate pair computed without range checks.
    Called only when strict UTF-8 decoding failed.
    """
    units: list[int] = []
    i = 0
    n = len(run)
    while i < n:
        c = run[i]
        i += 1
        if c < 0x80:
            units.append(c)
            continue
        if 0xC0 <= c <= 0xDF:
            needed, value = 1, c & 0x1F
        elif 0xE0 <= c <= 0xEF:
            needed, value = 2, c & 0x0F
        elif 0xF0 <= c <= 0xF7:
            needed, value = 3, c & 0x07
        else:
            raise CodecError(f"Invalid UTF-8 start byte 0x{c:02x}")
        if i + needed > n:
            raise CodecError("Invalid UTF-8 middle byte (end of string)")
        for _ in range(needed):
            d = run[i]
            i += 1
            if d & 0xC0 != 0x80:
                raise CodecError(f"Invalid UTF-8 middle byte 0x{d:02x}")
            value = (value << 6) | (d & 0x3F)
        if needed == 2 and 0xD800 <= value <= 0xDFFF:
            # jackson-core 2.21 (unlike 2.16) rejects UTF-8-encoded surrogates.
            raise CodecError(f"Invalid UTF-8: Illegal surrogate character 0x{value:x}")
        if needed < 3:
            units.append(value)
            continue
        value -= 0x10000
        # Java int arithmetic then a (char) cast; names add where values OR (differs only for
        # overlong 4-byte forms, where value is negative).
        high = (0xD800 + (value >> 10)) if in_name else (0xD800 | (value >> 10))
        units.append(high & 0xFFFF)
        units.append(0xDC00 | (value & 0x3FF))
    return _units_to_str(units)


def _units_to_str(units: list[int]) -> str:
    """UTF-16 code units → Python str, pairing valid surrogates and keeping lone ones."""
    raw = b"".join(u.to_bytes(2, "little") for u in units)
    return raw.decode("utf-16-le", "surrogatepass")


def _normalize_surrogates(text: str) -> str:
    """Join adjacent surrogate code points into one character, as Java's UTF-16 String does."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


_STRING_RUN = re.compile(rb'[^"\\\x00-\x1f]*')
_HAS_SURROGATE = re.compile("[\ud800-\udfff]")
_SHORT_ESCAPES: Final = {
    ord("b"): 0x08,
    ord("t"): 0x09,
    ord("n"): 0x0A,
    ord("f"): 0x0C,
    ord("r"): 0x0D,
    ord('"'): 0x22,
    ord("/"): 0x2F,
    ord("\\"): 0x5C,
}
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")


class _Parser:
    """Port of the parts of Jackson's UTF8StreamJsonParser + readTree that Connect exercises."""

    __slots__ = ("data", "n", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.n = len(data)
        self.pos = 0

    # white space --------------------------------------------------------------------------
    def skip_ws(self, *, eof_ok: bool = False) -> int:
        """Position on the next significant byte and return it (-1 at end when ``eof_ok``)."""
        data, n, pos = self.data, self.n, self.pos
        while pos < n:
            c = data[pos]
            if c > 0x20:
                if c in (0x2F, 0x23):  # '/' and '#': comments are not enabled in Connect
                    self.pos = pos
                    raise CodecError("comments are not allowed (ALLOW_COMMENTS is off)")
                self.pos = pos
                return c
            if c not in (0x20, 0x09, 0x0A, 0x0D):
                raise CodecError(f"Illegal character (code {c}): only regular white space allowed")
            pos += 1
        self.pos = pos
        if eof_ok:
            return -1
        raise CodecError("Unexpected end-of-input")

    # scalars ------------------------------------------------------------------------------
    def string(self, *, in_name: bool) -> str:
        """Parse a string whose opening quote is at ``pos``."""
        data, n = self.data, self.n
        pos = self.pos + 1
        pieces: list[str] = []
        while True:
            end = _STRING_RUN.match(data, pos).end()  # type: ignore[union-attr]
            if end > pos:
                run = data[pos:end]
                try:
                    pieces.append(run.decode("utf-8"))
                except UnicodeDecodeError:
                    pieces.append(_decode_utf8_like_jackson(run, in_name=in_name))
            pos = end
            if pos >= n:
                raise CodecError("Unexpected end-of-input in a string")
            c = data[pos]
            if c == 0x22:
                pos += 1
                break
            if c != 0x5C:
                raise CodecError(f"Illegal unquoted character (code {c}): must be escaped")
            code, pos = self._escape(pos)
            if in_name and 0xD800 <= code <= 0xDFFF:
                # jackson-core 2.21 re-encodes escaped name characters as UTF-8 and insists that an
                # escaped high surrogate is followed at once by an escaped low one.
                if code >= 0xDC00:
                    raise CodecError(f"Unexpected low surrogate in field name: 0x{code:x}")
                if pos >= n or data[pos] != 0x5C:
                    raise CodecError("Broken surrogate pair in field name: expected '\\' to start low surrogate")
                low, pos = self._escape(pos)
                if not 0xDC00 <= low <= 0xDFFF:
                    raise CodecError(f"Broken surrogate pair in field name: expected low surrogate, got 0x{low:04X}")
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            pieces.append(chr(code))
        self.pos = pos
        text = "".join(pieces)
        if _HAS_SURROGATE.search(text):
            text = _normalize_surrogates(text)
        if in_name:
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > MAX_NAME_LENGTH:
                raise CodecError(name_too_long(size))
        elif len(text) > MAX_STRING_LENGTH // 2:
            # Java counts UTF-16 code units: a character beyond U+FFFF counts twice.
            units = len(text.encode("utf-16-le", "surrogatepass")) // 2
            if units > MAX_STRING_LENGTH:
                raise CodecError(string_too_long(units))
        return text

    def _escape(self, pos: int) -> tuple[int, int]:
        """Decode the escape sequence whose backslash is at ``pos``: (UTF-16 unit, next position)."""
        data = self.data
        if pos + 1 >= self.n:
            raise CodecError("Unexpected end-of-input in character escape sequence")
        esc = data[pos + 1]
        short = _SHORT_ESCAPES.get(esc)
        if short is not None:
            return short, pos + 2
        if esc != 0x75:  # 'u'
            raise CodecError(f"Unrecognized character escape (code {esc})")
        hex_digits = data[pos + 2 : pos + 6]
        if len(hex_digits) < 4:
            raise CodecError("Unexpected end-of-input in character escape sequence")
        if not all(h in _HEX for h in hex_digits):
            raise CodecError("expected a hex-digit for character escape sequence")
        return int(hex_digits, 16), pos + 6

    def number(self, *, at_root: bool) -> int | float:
        """Parse a number starting at ``pos`` (a '-' or a digit), Jackson-style."""
        data, n = self.data, self.n
        pos = self.pos
        negative = data[pos] == 0x2D
        if negative:
            pos += 1
            if pos >= n:
                raise CodecError("Unexpected end-of-input in a number")
            if not 0x30 <= data[pos] <= 0x39:
                raise CodecError("Unexpected character in a number: expected digit")
        # ALLOW_LEADING_ZEROS_FOR_NUMBERS: skip zeros that are followed by a digit.
        while data[pos] == 0x30 and pos + 1 < n and 0x30 <= data[pos + 1] <= 0x39:
            pos += 1
        int_start = pos
        while pos < n and 0x30 <= data[pos] <= 0x39:
            pos += 1
        int_digits = data[int_start:pos]
        is_float = False
        frac_digits = b""
        exp_text = b""
        if pos < n and data[pos] == 0x2E:  # '.'
            is_float = True
            frac_start = pos = pos + 1
            while pos < n and 0x30 <= data[pos] <= 0x39:
                pos += 1
            frac_digits = data[frac_start:pos]
            if not frac_digits:
                raise CodecError("Decimal point not followed by a digit")
        if pos < n and data[pos] in (0x65, 0x45):  # 'e' / 'E'
            is_float = True
            exp_start = pos = pos + 1
            if pos < n and data[pos] in (0x2B, 0x2D):
                pos += 1
            digits_start = pos
            while pos < n and 0x30 <= data[pos] <= 0x39:
                pos += 1
            if pos == digits_start:
                raise CodecError("Exponent indicator not followed by a digit")
            exp_text = data[exp_start:pos]
        if at_root and pos < n and data[pos] not in (0x20, 0x09, 0x0A, 0x0D):
            raise CodecError("Expected space separating root-level values")
        self.pos = pos
        sign = "-" if negative else ""
        if not is_float:
            if len(int_digits) > MAX_NUMBER_LENGTH:
                raise CodecError(number_too_long(len(int_digits)))
            return _wrap_long(int(sign + int_digits.decode("ascii")))
        literal = sign + int_digits.decode("ascii")
        if frac_digits:
            literal += "." + frac_digits.decode("ascii")
        if exp_text:
            literal += "e" + exp_text.decode("ascii")
        return _connect_double(literal)

    def literal(self, word: bytes, value: object) -> object:
        """``true`` / ``false`` / ``null``: the word, not followed by a Java identifier character."""
        data, pos = self.data, self.pos
        if data[pos : pos + len(word)] != word:
            raise CodecError(f"Unrecognized token: expected '{word.decode()}'")
        pos += len(word)
        self.pos = pos
        if pos < self.n:
            c = data[pos]
            # jackson-core 2.21's _checkMatchEnd decodes a non-ASCII follower starting one byte too
            # late, so any byte >= 0x80 here fails ("Invalid UTF-8 middle byte"), identifier or not.
            if c >= 0x80 or (c >= 0x30 and c not in (0x5D, 0x7D) and _java_identifier_part(c)):
                raise CodecError(f"Unrecognized token '{word.decode()}...'")
        return value

    # documents ----------------------------------------------------------------------------
    def document(self) -> object:
        c = self.skip_ws(eof_ok=True)
        if c < 0:
            return None  # MissingNode → null
        # Each frame: [container, pending key or None for arrays].
        stack: list[list[Any]] = []
        while True:
            value: object
            # Parse one value starting at self.pos (c is its first byte).
            if c == 0x7B or c == 0x5B:  # '{' or '['
                if len(stack) + 1 > MAX_NESTING_DEPTH:
                    raise CodecError(depth_exceeded(len(stack) + 1))
                self.pos += 1
                closer = 0x7D if c == 0x7B else 0x5D
                c = self.skip_ws()
                if c == closer:
                    self.pos += 1
                    value = {} if closer == 0x7D else []
                elif closer == 0x7D:
                    stack.append([{}, self._name(c)])
                    c = self.skip_ws()
                    continue
                else:
                    stack.append([[], None])
                    continue
            elif c == 0x22:
                value = self.string(in_name=False)
            elif c == 0x2D or 0x30 <= c <= 0x39:
                value = self.number(at_root=not stack)
            elif c == 0x74:
                value = self.literal(b"true", True)
            elif c == 0x66:
                value = self.literal(b"false", False)
            elif c == 0x6E:
                value = self.literal(b"null", None)
            else:
                raise CodecError(f"Unexpected character (code {c}): expected a valid value")
            # Attach the finished value; close every container that ends right after it.
            while True:
                if not stack:
                    return value
                frame = stack[-1]
                container = frame[0]
                if frame[1] is None:
                    container.append(value)
                else:
                    container[frame[1]] = value
                c = self.skip_ws()
                if c == 0x2C:  # ','
                    self.pos += 1
                    c = self.skip_ws()
                    if frame[1] is not None:
                        frame[1] = self._name(c)
                        c = self.skip_ws()
                    break
                expected = 0x5D if frame[1] is None else 0x7D
                if c != expected:
                    raise CodecError(f"Unexpected character (code {c}): expected ',' or a close marker")
                self.pos += 1
                stack.pop()
                value = container

    def _name(self, c: int) -> str:
        """An object field name and its ':'; leaves ``pos`` on the value's first byte."""
        if c != 0x22:
            raise CodecError(f"Unexpected character (code {c}): expected '\"' to start a field name")
        name = self.string(in_name=True)
        if self.skip_ws() != 0x3A:
            raise CodecError("Unexpected character: was expecting a colon to separate field name and value")
        self.pos += 1
        return name


def _to_utf8(raw: bytes) -> bytes:
    """Jackson's encoding detection (``ByteSourceJsonBootstrapper``), normalised to UTF-8.

    Connect only ever writes UTF-8; UTF-16/32 input is handled by decoding it with Python's codecs
    (Jackson uses a Reader-based parser there, whose rules agree for everything Connect reads).
    """
    head = raw[:4]
    if len(head) == 4:
        quad = int.from_bytes(head, "big")
        if quad == 0x0000FEFF:
            return _transcode(raw[4:], "utf-32-be")
        if quad == 0xFFFE0000:
            return _transcode(raw[4:], "utf-32-le")
        if quad in (0x0000FFFE, 0xFEFF0000):
            raise CodecError("Unsupported UCS-4 endianness")
        if quad >> 16 == 0xFEFF:
            return _transcode(raw[2:], "utf-16-be")
        if quad >> 16 == 0xFFFE:
            return _transcode(raw[2:], "utf-16-le")
        if quad >> 8 == 0xEFBBBF:
            return raw[3:]
        if quad >> 8 == 0:
            return _transcode(raw, "utf-32-be")
        if quad & 0x00FFFFFF == 0:
            return _transcode(raw, "utf-32-le")
        if quad & ~0x00FF0000 & 0xFFFFFFFF == 0 or quad & ~0x0000FF00 & 0xFFFFFFFF == 0:
            raise CodecError("Unsupported UCS-4 endianness")
    if len(head) >= 2:
        if head[0] == 0:
            return _transcode(raw, "utf-16-be")
        if head[1] == 0:
            return _transcode(raw, "utf-16-le")
    return raw


def _transcode(raw: bytes, encoding: str) -> bytes:
    errors = "replace" if encoding.startswith("utf-16") else "strict"
    try:
        text = raw.decode(encoding, errors)
    except UnicodeDecodeError as exc:
        raise CodecError(f"Invalid {encoding} input: {exc}") from None
    return text.encode("utf-8", "surrogatepass")


def _loads_exact(raw: bytes) -> object:
    utf8 = _to_utf8(raw)
    parser = _Parser(utf8)
    try:
        return parser.document()
    except CodecError as exc:
        # Positions map back to the input only where no transcoding happened (UTF-8, or a BOM cut).
        if exc.offset is None and (utf8 is raw or raw.endswith(utf8)):
            exc.offset = parser.pos + len(raw) - len(utf8)
        raise


def loads_lenient(raw: bytes | bytearray | memoryview) -> Any:
    """Parse bytes exactly as Connect's ``JsonConverter.toConnectData`` does (schemaless).

    Raises ``CodecError`` where Connect raises ``DataException``.
    """
    data = raw if type(raw) is bytes else bytes(raw)
    if len(data) <= _FAST_PATH_MAX_BYTES:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            value = _loads_fast(text)
            if value is not _FALLBACK:
                return value
    return _loads_exact(data)
