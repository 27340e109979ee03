"""Lone UTF-16 surrogates: Connect's strings may hold them, UTF-8 cannot.

Jackson reads the escape ``"\\ud800"`` in a JSON string into a Java String holding half a surrogate
pair, and Connect's ``JsonConverter`` writes it back as the escape ``\\uD800``
(``tests/compat/test_oracle_selfcheck.py``), so a partition or an offset holding one is data
Connect writes and reads. Python holds it as a ``str`` that ``.encode("utf-8")`` refuses: a GET
answered 500, the history archive stored bytes no Avro reader accepts, and an export ended in a
traceback. Every JSON text leaving the process therefore escapes them as Jackson does (the same
value to any JSON reader); plain text (a name in the archive, a line the CLI prints) shows them as
backslash escapes.
"""

from __future__ import annotations

import re

_LONE = re.compile("[\ud800-\udfff]")


def _jackson_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04X}"


def escape_in_json(text: str) -> str:
    """JSON text with each lone surrogate as Jackson's upper-case escape. In JSON text a surrogate
    can only stand inside a string, where the escape means the same character."""
    return _LONE.sub(_jackson_escape, text)


def json_utf8(text: str) -> bytes:
    """JSON text as UTF-8; the escaping pass runs only for a text that holds a lone surrogate."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return escape_in_json(text).encode("utf-8")


def printable(text: str) -> str:
    """Plain text that encodes as UTF-8: each lone surrogate as a backslash escape (``\\ud800``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
