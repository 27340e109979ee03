"""Java's text conversions that Connect applies to JSON values: ``String.valueOf`` and ``parseInt``.

Connect parses sink offsets with ``Integer.parseInt(String.valueOf(value))`` (so both ``10`` and
``"10"`` are accepted and ``10.0`` is not) and quotes ``String.valueOf(value)`` in its 400 messages;
task keys in the config topic go through ``Integer.parseInt`` too. Reproducing both exactly keeps the
set of accepted inputs, and the error texts, identical to Connect's.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping

from emulator.codec.jackson_writer import java_double_str


def string_value_of(value: object) -> str:
    """``String.valueOf`` of what Jackson builds from JSON (``AbstractMap``/``AbstractCollection`` text)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{string_value_of(k)}={string_value_of(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(string_value_of(v) for v in value) + "]"
    return str(value)


def parse_int(text: str, bits: int = 32) -> int:
    """``Integer.parseInt`` (``bits=32``) / ``Long.parseLong`` (``bits=64``); ``ValueError`` where Java
    throws ``NumberFormatException``.

    Java accepts one leading ``+`` or ``-`` and any Unicode decimal digits (``Character.digit``),
    and nothing else: no whitespace, no underscores, no empty digits, unlike Python's ``int()``.
    """
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not all(ch.isdecimal() for ch in digits):
        raise ValueError(f'For input string: "{text}"')
    magnitude = 0
    for ch in digits:
        magnitude = magnitude * 10 + unicodedata.decimal(ch)
    value = -magnitude if text[:1] == "-" else magnitude
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f'For input string: "{text}"')
    return value
