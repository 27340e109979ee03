"""The limits Connect's reader enforces on JSON: the one definition every check in this package uses.

Apache Kafka 4.3.0's ``JsonConverter`` parses with ``new ObjectMapper()`` (``JsonDeserializer``) and
never changes its ``StreamReadConstraints``, and nothing else in the Connect runtime overrides the
defaults; so the limits are jackson-core 2.21's defaults (docs/protocol.md §9.1). A value beyond any
of them is one no task can read: ``OffsetStorageReaderImpl`` logs "CRITICAL: Failed to deserialize
offset data" and hands the task no offset. The daemon's reader (``jackson_reader``), the request
parser (``strict_json``) and the write-path check (``readable``) all count the way Jackson counts,
checked against the JVM in ``tests/compat/test_read_limits.py``:

- depth: open arrays and objects, the root included;
- numbers: digits only (no sign, no leading zeros; a fraction's and exponent's digits added);
- strings: UTF-16 code units, as Java's ``String.length()`` (a character beyond U+FFFF counts 2);
- property names: bytes of the name's UTF-8 encoding, after escapes are decoded.

Messages are Jackson's own words, so a refusal here reads like the exception Connect would log.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "MAX_NAME_LENGTH",
    "MAX_NESTING_DEPTH",
    "MAX_NUMBER_LENGTH",
    "MAX_STRING_LENGTH",
    "depth_exceeded",
    "float_length",
    "name_problem",
    "name_too_long",
    "number_too_long",
    "string_problem",
    "string_too_long",
]

MAX_NESTING_DEPTH: Final = 1000
"""``StreamReadConstraints.DEFAULT_MAX_DEPTH``."""
MAX_NUMBER_LENGTH: Final = 1000
"""``StreamReadConstraints.DEFAULT_MAX_NUM_LEN``, in digits."""
MAX_STRING_LENGTH: Final = 20_000_000
"""``StreamReadConstraints.DEFAULT_MAX_STRING_LEN``, in UTF-16 code units."""
MAX_NAME_LENGTH: Final = 50_000
"""``StreamReadConstraints.DEFAULT_MAX_NAME_LEN``, in bytes of UTF-8."""


def string_problem(text: str) -> str | None:
    """Jackson's message if ``text`` is longer than a string value may be, else ``None``.

    Java counts UTF-16 code units (a character beyond U+FFFF counts 2); only a string longer than
    half the limit can exceed it, so only such strings pay for counting them.
    """
    if len(text) <= MAX_STRING_LENGTH // 2:
        return None
    units = len(text.encode("utf-16-le", "surrogatepass")) // 2
    return string_too_long(units) if units > MAX_STRING_LENGTH else None


def name_problem(name: str) -> str | None:
    """Jackson's message if ``name`` is longer than a property name may be (UTF-8 bytes), else ``None``."""
    if len(name) <= MAX_NAME_LENGTH // 4:
        return None  # at most 4 bytes per character
    size = len(name.encode("utf-8", "surrogatepass"))
    return name_too_long(size) if size > MAX_NAME_LENGTH else None


def float_length(literal: str) -> int:
    """The digits Jackson counts in a fraction/exponent literal: integer part without leading zeros
    (at least one), fraction and exponent digits; signs and separators do not count."""
    mantissa, _, exponent = literal.replace("E", "e").partition("e")
    int_text, _, frac_text = mantissa.lstrip("+-").partition(".")
    return (len(int_text.lstrip("0")) or 1) + len(frac_text) + len(exponent.lstrip("+-"))


def depth_exceeded(depth: int) -> str:
    return f"Document nesting depth ({depth}) exceeds the maximum allowed ({MAX_NESTING_DEPTH})"


def number_too_long(length: int) -> str:
    return f"Number value length ({length}) exceeds the maximum allowed ({MAX_NUMBER_LENGTH})"


def string_too_long(length: int) -> str:
    return f"String value length ({length}) exceeds the maximum allowed ({MAX_STRING_LENGTH})"


def name_too_long(length: int) -> str:
    return f"Name length ({length}) exceeds the maximum allowed ({MAX_NAME_LENGTH})"
