"""``java.util.Properties`` text, read exactly as ``Properties.load(InputStream)`` reads it.

Connect's ``PropertyFileLoginModule`` loads its credentials file that way, so a file that works
for a Connect worker must mean the same users and passwords here, escapes and all:

- bytes are ISO-8859-1 (one byte, one character); other characters need ``\\uXXXX`` escapes;
- a line ends at ``\\n``, ``\\r`` or ``\\r\\n``; an odd number of backslashes at its end continues
  it on the next line, whose leading blanks are dropped;
- leading blanks (space, tab, form feed) are skipped; a line whose first character is then ``#``
  or ``!`` is a comment;
- the key ends at the first unescaped ``=``, ``:`` or blank; blanks and at most one ``=``/``:``
  after it are skipped; the rest is the value;
- ``\\t \\n \\r \\f`` and ``\\uXXXX`` are escapes; a backslash before any other character stands for
  that character; a later duplicate key replaces an earlier one.

Checked against Java's own class by ``tests/compat/test_properties_oracle.py``.
"""

from __future__ import annotations

_BLANKS = " \t\f"


class PropertiesError(ValueError):
    """Text Java's ``Properties.load`` refuses (a malformed ``\\uXXXX`` escape)."""


def parse_properties(data: bytes, skipped: list[tuple[int, str]] | None = None) -> dict[str, str]:
    """The key → value pairs of a properties file's bytes, in file order (later duplicates win).

    A line Java refuses raises ``PropertiesError``; with ``skipped`` given, it is left out instead
    and (line number, why) appended there (the daemon's reload: the other users apply)."""
    text = data.decode("iso-8859-1")
    entries: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line)
        try:
            entries[_unescape(key)] = _unescape(value)
        except PropertiesError as exc:
            if skipped is None:
                raise PropertiesError(f"line {number}: {exc}") from None
            skipped.append((number, str(exc)))
    return entries


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Java's ``LineReader``: logical lines (continuations joined, comments and blank lines
    dropped), each with the number of the natural line it starts on."""
    lines: list[tuple[int, str]] = []
    i, n, number = 0, len(text), 1
    while i < n:
        buf: list[str] = []
        first = number
        skip_blanks, appended, backslash = True, False, False
        while True:
            if i >= n:  # end of input: a trailing backslash is dropped, the line still counts
                if buf:
                    if backslash:
                        buf.pop()
                    lines.append((first, "".join(buf)))
                break
            c = text[i]
            i += 1
            if skip_blanks:
                if c in _BLANKS:
                    continue
                if not appended and c in "\r\n":
                    number += c == "\n" or not (i < n and text[i] == "\n")
                    continue
                skip_blanks, appended = False, False
            if not buf and c in "#!":
                while i < n and text[i] not in "\r\n":
                    i += 1
                skip_blanks = True
                continue
            if c not in "\r\n":
                if not buf and not appended:
                    first = number
                buf.append(c)
                backslash = not backslash if c == "\\" else False
                continue
            if backslash and i >= n:  # Java ends here, even if the line is now empty
                lines.append((first, "".join(buf[:-1])))
                break
            if c == "\r" and i < n and text[i] == "\n":
                i += 1
            number += 1
            if not buf:
                skip_blanks = True
                continue
            if not backslash:
                lines.append((first, "".join(buf)))
                break
            buf.pop()
            skip_blanks, appended, backslash = True, True, False
    return lines


def _split(line: str) -> tuple[str, str]:
    """Key and raw value of one logical line (``Properties.load0``)."""
    key_end, value_start, has_separator, backslash = 0, len(line), False, False
    while key_end < len(line):
        c = line[key_end]
        if c in "=:" and not backslash:
            value_start, has_separator = key_end + 1, True
            break
        if c in _BLANKS and not backslash:
            value_start = key_end + 1
            break
        backslash = not backslash if c == "\\" else False
        key_end += 1
    while value_start < len(line):
        c = line[value_start]
        if c not in _BLANKS:
            if has_separator or c not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


_SIMPLE = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}


def _unescape(raw: str) -> str:
    """``Properties.loadConvert``. ``\\uXXXX`` yields one UTF-16 code unit, so escaped surrogate
    pairs become one character, and a lone surrogate stays one, as in a Java string."""
    units: list[int] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        i += 1
        if c != "\\" or i >= len(raw):
            units.append(ord(c))
            continue
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i : i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError("malformed \\uxxxx encoding")
            units.append(int(digits, 16))
            i += 4
        else:
            units.append(ord(_SIMPLE.get(c, c)))
    return b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le", "surrogatepass")
