"""JSON written by people and tools (request bodies, query parameters, KIP-875 and CDC files): standard
JSON, read within the same limits Connect's Jackson enforces (``emulator.codec.limits``).

Connect's REST layer and ``JsonConverter`` both parse with Jackson's default ``StreamReadConstraints``,
so a document beyond them is one Connect would refuse; and a string, name or number beyond them,
once written into an offset, is one no task could read back. Python's ``json`` has none of these
limits and fails on deep nesting with a ``RecursionError`` (around 1,000 levels, fewer on a deep
stack). This module adds the limits and turns the recursion into the depth limit's message:

- numbers: checked as ``json`` hands each literal over (``parse_int``/``parse_float``), before
  Python converts it (which has its own, different, 4,300-digit limit for integers);
- depth: only when ``json`` gives up, the nesting is measured without recursion (any valid body is a
  few levels deep, so a document ``json`` cannot parse is refused either way, naming the limit
  when it is beyond it);
- strings and names: after parsing, only for documents long enough to hold one over the limit.

Unlike ``jackson_reader`` (Connect's lenient reader for bytes in the log) this is strict JSON, as
Connect's REST mapper reads it: no leading zeros, no NaN/Infinity.
"""

from __future__ import annotations

import json
import operator
import re
from functools import partial
from itertools import accumulate, count
from typing import Any, Final

from emulator.codec.limits import (
    MAX_NAME_LENGTH,
    MAX_NESTING_DEPTH,
    MAX_NUMBER_LENGTH,
    MAX_STRING_LENGTH,
    depth_exceeded,
    float_length,
    name_problem,
    number_too_long,
    string_problem,
)

__all__ = ["JsonLimitExceeded", "exceeds_depth", "loads_strict"]


def json_type(value: Any) -> str:
    """A parsed value's JSON type, for messages ("got null", not Python's "got NoneType")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


class JsonLimitExceeded(ValueError):
    """The document is JSON-shaped but exceeds one of Jackson's read limits; the message names it."""


class TooDeepHere(ValueError):
    """A document Jackson would read (within its nesting limit) that Python's recursion cannot."""


def _parse_int(literal: str) -> int:
    digits = len(literal) - (literal[0] == "-")
    if digits > MAX_NUMBER_LENGTH:
        raise JsonLimitExceeded(number_too_long(digits))
    return int(literal)


def _parse_float(literal: str) -> float:
    length = float_length(literal)
    if length > MAX_NUMBER_LENGTH:
        raise JsonLimitExceeded(number_too_long(length))
    return float(literal)


def _reject_constant(name: str) -> Any:
    # Jackson rejects NaN/Infinity literals (ALLOW_NON_NUMERIC_NUMBERS is off); Python's json accepts them.
    raise ValueError(f"Non-standard token '{name}': NaN and Infinity are not valid JSON numbers")


_decoder = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_reject_constant)

# Below these sizes (in characters) no name or string can exceed its limit, so the walk is skipped:
# a name over the limit has more than 12,500 characters (4 UTF-8 bytes each at most), a string more
# than 10,000,000 (2 UTF-16 units each at most).
_NAME_CHECK_FROM: Final = MAX_NAME_LENGTH // 4
_STRING_CHECK_FROM: Final = MAX_STRING_LENGTH // 2


class Duplicates:
    """Names that appeared twice in one JSON object while parsing: Jackson (and ``json``) keep the
    later value without a word, which a file migration must not do silently. ``at_top`` holds those of
    the document's outermost object (``loads_strict`` fills it once the parse is done)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.at_top: list[str] = []
        self._by_object: dict[int, tuple[dict[str, Any], list[str]]] = {}
        """By ``id``, each object that held a name twice, kept alive so no later object reuses its id."""

    def _hook(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        made = dict(pairs)
        if len(made) != len(pairs):
            seen: set[str] = set()
            twice: list[str] = []
            for name, _ in pairs:
                if name in seen:
                    twice.append(name)
                seen.add(name)
            self.names.extend(twice)
            self._by_object[id(made)] = (made, twice)
        return made

    def _settle(self, document: Any) -> None:
        self.at_top = self.in_object(document)

    def in_object(self, value: Any) -> list[str]:
        """The names ``value`` (an object of a document this parsed) held twice; none for anything else."""
        found = self._by_object.get(id(value)) if isinstance(value, dict) else None
        return found[1] if found is not None and found[0] is value else []


def loads_strict(data: bytes | str, duplicates: Duplicates | None = None) -> Any:
    """Parse a JSON document within Jackson's read limits.

    Raises ``JsonLimitExceeded`` naming the limit, or ``ValueError`` (``json.JSONDecodeError``,
    ``UnicodeDecodeError``) for text that is not JSON. ``duplicates``, when given, is told every name
    an object held twice (the later value is kept, as Jackson keeps it); the parse is then slower.
    """
    # As json.loads does with bytes (and Jackson): UTF-8, or UTF-16/32 recognised by the first bytes.
    text = data.decode(json.detect_encoding(data), "surrogatepass") if isinstance(data, bytes | bytearray) else data
    decoder = _decoder
    if duplicates is not None:
        decoder = json.JSONDecoder(
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_reject_constant,
            object_pairs_hook=duplicates._hook,
        )
    try:
        value = decoder.decode(text)
    except RecursionError:
        if exceeds_depth(text):
            raise JsonLimitExceeded(depth_exceeded(MAX_NESTING_DEPTH + 1)) from None
        raise TooDeepHere(
            f"nested deeper than this program parses, though within the limit of Connect's JSON reader "
            f"(Jackson: {MAX_NESTING_DEPTH} levels); no request body, parameter or offsets file is nested more "
            "than a few levels"
        ) from None
    # Where the recursion limit is high (a host process may raise it), json parses deeper than Jackson
    # would: only a document with more brackets than the limit can be too deep, so only it is measured.
    if text.count("[") + text.count("{") > MAX_NESTING_DEPTH and exceeds_depth(text):
        # Jackson stops at the first level beyond the limit, so its message always names that one.
        raise JsonLimitExceeded(depth_exceeded(MAX_NESTING_DEPTH + 1))
    if len(text) > _NAME_CHECK_FROM:
        _check_lengths(value, check_strings=len(text) > _STRING_CHECK_FROM)
    if duplicates is not None:
        duplicates._settle(value)
    return value


def _check_lengths(value: Any, *, check_strings: bool) -> None:
    """Walk the parsed document (without recursion) for a string or name over its limit."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for name, child in item.items():
                problem = name_problem(name)
                if problem is not None:
                    raise JsonLimitExceeded(problem)
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
        elif check_strings and isinstance(item, str):
            problem = string_problem(item)
            if problem is not None:
                raise JsonLimitExceeded(problem)


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def exceeds_depth(text: str, limit: int = MAX_NESTING_DEPTH) -> bool:
    """Whether arrays and objects in ``text`` (strings ignored) nest deeper than ``limit``, found
    without recursion and at C speed: strings are removed by a regular expression and everything but
    brackets by ``bytes.translate``, then each opening bracket counts +1 and each closing one -1 through ``accumulate``,
    stopping at the first level beyond ``limit``."""
    brackets = _STRING.sub("", text).encode("utf-8", "surrogatepass").translate(_STEP, _NOT_BRACKETS)
    # Each step is 2 (open) or 0 (close): the running sum minus the step count is the depth.
    depths = map(operator.sub, accumulate(brackets), count(1))
    return next(filter(partial(operator.lt, limit), depths), None) is not None
