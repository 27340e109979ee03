"""Text as the CLI shows it to people: names and raw JSON text with unprintable characters escaped.

Connector names, partitions and offsets come from the log, where any tool may have written them:
Connect's name validator only applies to names that come through its REST API. A newline in a
connector's name made ``connect-offsets list`` print a second, fake connector; an escape sequence
could move the cursor or recolour the terminal; a bidirectional override could show the name
backwards. The CLI's output therefore escapes every character ``str.isprintable`` refuses (control
and format characters, line and paragraph separators, lone surrogates) in one of three forms (its
``--json`` output only where ``json.dumps`` leaves such a character raw, as a JSON escape: the same
JSON to any parser):

- a name (connector, consumer group, topic, principal) in Python's quoted form, ``'ctl\\nfake-name'``,
  which a shell's ``$'…'`` quoting reads back; a plain name is shown as it is, unless it starts with
  a quote (so that a name looking quoted is never taken for an escaped one);
- JSON text (partitions, offsets, raw keys and values) with each such character as a JSON escape,
  ``\\u000a``: still the same JSON, in one line;
- a message (the daemon's error texts, the log's, notes and warnings that quote a record or a name)
  with each such character as in a Python string literal, ``\\x1b``, ``\\r``, ``\\u202e``: a
  message is prose, not a value, so it is neither quoted nor JSON. ``shown_text`` is the one place
  the CLI does this for every line it prints, on stdout and stderr; ``lines=True`` keeps the line
  breaks of a text the CLI laid out in lines itself (its tables and reports).
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


def shown_text(text: str, lines: bool = False) -> str:
    """``text`` with each unprintable character (C0 and C1 controls such as ESC and ``\\r``, format
    characters, separators, lone surrogates) escaped as in a Python string literal, so that text a
    hostile writer put in a name or a record cannot drive the terminal (move the cursor, recolour,
    set the window title, overwrite the line). ``lines``: the newlines are the caller's own layout,
    kept (each line escaped on its own)."""
    if lines:
        return "\n".join(shown_text(line) for line in text.split("\n"))
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: JSON's escape is the UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
