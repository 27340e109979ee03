"""Text as the CLI shows it to people: names and raw JSON text with unprintable characters escaped.

Connector names, partitions and offsets come from the log, where any tool may have written them:
Connect's name validator only applies to names that come through its REST API. A newline in a
connector's name made ``connect-offsets list`` print a second, fake connector; an escape sequence
could move the cursor or recolour the terminal; a bidirectional override could show the name
backwards. The CLI's human output (tables and lines; ``--json`` is untouched) therefore escapes
every character ``str.isprintable`` refuses (control and format characters, line and paragraph
separators, lone surrogates) in one of two forms:

- a name (connector, consumer group, topic, principal) in Python's quoted form, ``'ctl\\nfake-name'``,
  which a shell's ``$'…'`` quoting reads back; a plain name is shown as it is, unless it starts with
  a quote (so that a name looking quoted is never taken for an escaped one);
- JSON text (partitions, offsets, raw keys and values) with each such character as a JSON escape,
  ``\\u000a``: still the same JSON, in one line.
"""

from __future__ import annotations

_QUOTES = ("'", '"')


def shown_name(text: str) -> str:
    """``text`` as it is when every character is printable, else Python's quoted form (``repr``)."""
    if text and text.isprintable() and not text.startswith(_QUOTES):
        return text
    return repr(text)


def shown_json(text: str) -> str:
    """JSON (or raw) text with each unprintable character as a ``\\uXXXX`` escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _json_escape(c) for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: JSON's escape is the UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
