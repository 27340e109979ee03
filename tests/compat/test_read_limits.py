"""Which values a task can read back, decided by Apache Kafka 4.3.0's own reader path in the JVM:
``JsonConverter.toConnectData`` (Jackson 2.21 with the default ``StreamReadConstraints``, which
Connect never changes) and then ``OffsetUtils.validateFormat``, as ``OffsetStorageReaderImpl`` runs
them. ``emulator.codec.readable.value_problem`` is what every write path asks; it must say "readable"
exactly where Java does, and for a limit name the same limit Jackson names.

The limits (docs/protocol.md §9.1) are probed at the boundary and one past it, in the unit Jackson
counts: digits, UTF-16 code units, bytes of a UTF-8 name, nesting levels.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from emulator.codec.limits import MAX_NAME_LENGTH, MAX_NESTING_DEPTH, MAX_NUMBER_LENGTH, MAX_STRING_LENGTH
from emulator.codec.readable import value_problem
from tests.compat.test_golden_codec import ODD_INPUTS, SEED, _fuzz_inputs
from tests.oracle import JavaOracle

pytestmark = pytest.mark.jvm


def nested_maps(depth: int) -> bytes:
    """An offset map whose field holds maps down to ``depth`` levels (root included)."""
    return b'{"a":' * (depth - 1) + b"{}" + b"}" * (depth - 1)


# (what, value at the limit, value one past it, Jackson's words for the limit)
BOUNDARIES: list[tuple[str, bytes, bytes, str]] = [
    (
        "integer digits",
        b'{"n":' + b"7" * MAX_NUMBER_LENGTH + b"}",
        b'{"n":' + b"7" * (MAX_NUMBER_LENGTH + 1) + b"}",
        f"Number value length ({MAX_NUMBER_LENGTH + 1}) exceeds the maximum allowed ({MAX_NUMBER_LENGTH}",
    ),
    (
        "negative integer with leading zeros (neither counts)",
        b'{"n":-000' + b"7" * MAX_NUMBER_LENGTH + b"}",
        b'{"n":-000' + b"7" * (MAX_NUMBER_LENGTH + 1) + b"}",
        f"Number value length ({MAX_NUMBER_LENGTH + 1}) exceeds",
    ),
    (
        "fraction and exponent digits",
        b'{"n":1.' + b"5" * (MAX_NUMBER_LENGTH - 3) + b"e+12}",
        b'{"n":1.' + b"5" * (MAX_NUMBER_LENGTH - 2) + b"e+12}",
        f"Number value length ({MAX_NUMBER_LENGTH + 1}) exceeds",
    ),
    (
        "property name, UTF-8 bytes",
        b'{"' + "é".encode() * (MAX_NAME_LENGTH // 2) + b'":1}',
        b'{"' + "é".encode() * (MAX_NAME_LENGTH // 2) + b'a":1}',
        f"Name length ({MAX_NAME_LENGTH + 1}) exceeds the maximum allowed ({MAX_NAME_LENGTH}",
    ),
    (
        "property name, escapes decoded first",
        b'{"' + b"\\u0061" * MAX_NAME_LENGTH + b'":1}',
        b'{"' + b"\\u0061" * (MAX_NAME_LENGTH + 1) + b'":1}',
        f"Name length ({MAX_NAME_LENGTH + 1}) exceeds",
    ),
    (
        "nesting depth (past the converter, validateFormat refuses nested maps anyway)",
        nested_maps(MAX_NESTING_DEPTH),
        nested_maps(MAX_NESTING_DEPTH + 1),
        f"Document nesting depth ({MAX_NESTING_DEPTH + 1}) exceeds the maximum allowed ({MAX_NESTING_DEPTH}",
    ),
]

BIG_STRINGS: list[tuple[str, bytes, bytes, str]] = [
    (
        "string, ASCII",
        b'{"s":"' + b"x" * MAX_STRING_LENGTH + b'"}',
        b'{"s":"' + b"x" * (MAX_STRING_LENGTH + 1) + b'"}',
        f"String value length ({MAX_STRING_LENGTH + 1}) exceeds the maximum allowed ({MAX_STRING_LENGTH}",
    ),
    (
        "string beyond U+FFFF: Java counts two units per character",
        ('{"s":"' + "\U0001f600" * (MAX_STRING_LENGTH // 2) + '"}').encode(),
        ('{"s":"' + "\U0001f600" * (MAX_STRING_LENGTH // 2 + 1) + '"}').encode(),
        f"String value length ({MAX_STRING_LENGTH + 2}) exceeds the maximum allowed ({MAX_STRING_LENGTH}",
    ),
]


def check_boundaries(java_oracle: JavaOracle, cases: list[tuple[str, bytes, bytes, str]]) -> None:
    for what, at_limit, past_limit, words in cases:
        at, past = java_oracle.offset_check([at_limit, past_limit])
        assert at.get("stage") != "converter", f"{what}: JsonConverter refused the value at the limit: {at}"
        assert not past["readable"] and past["stage"] == "converter", f"{what}: Java read past the limit: {past}"
        assert words in str(past["error"]), f"{what}: Java said {past['error']}"
        ours_at, ours_past = value_problem(at_limit), value_problem(past_limit)
        assert (ours_at is None) == at["readable"], f"{what}: at the limit Java {at}, ours {ours_at}"
        assert ours_past is not None and words in ours_past.reason, f"{what}: ours past the limit: {ours_past}"


def test_jsonconverter_enforces_jacksons_default_limits_and_so_do_we(java_oracle: JavaOracle) -> None:
    check_boundaries(java_oracle, BOUNDARIES)


@pytest.mark.slow
def test_the_string_limit_counts_utf16_units_as_java_does(java_oracle: JavaOracle) -> None:
    check_boundaries(java_oracle, BIG_STRINGS)
    # The value at the limit comes back whole: same length in UTF-16 units, same text.
    (answer,) = java_oracle.offset_check([BIG_STRINGS[1][1]])
    ((key, value),) = answer["entries"]
    assert key["sha256"] == hashlib.sha256(b"s").hexdigest()
    text = "\U0001f600" * (MAX_STRING_LENGTH // 2)
    assert value == {
        "class": "java.lang.String",
        "length": MAX_STRING_LENGTH,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


NOT_OFFSETS = [b"[1]", b'"x"', b"42", b"true", b'{"a":{"b":1}}', b'{"a":[1]}', b"[]", b'{"a":1,"b":[{}]}']
READABLE = [
    b"{}",
    b"null",
    b"",
    b" ",
    b'{"a":null}',
    b'{"a":1,"b":"x","c":2.5,"d":true}',
    b'{"n":99999999999999999999}',
]


@pytest.mark.slow
def test_readable_means_what_offsetstoragereaderimpl_accepts(java_oracle: JavaOracle) -> None:
    """Odd inputs from the codec goldens, values a bad producer writes, and 3,000 fuzzed ones."""
    inputs = [*READABLE, *NOT_OFFSETS, *ODD_INPUTS, *_fuzz_inputs(SEED + 1, 3000)]
    answers = java_oracle.offset_check(inputs)
    mismatches = []
    for raw, java in zip(inputs, answers, strict=True):
        ours = value_problem(raw)
        if (ours is None) != java["readable"]:
            mismatches.append((raw[:80], java.get("error"), ours))
    assert not mismatches, f"{len(mismatches)} of {len(inputs)} differ; first: {mismatches[:5]}"
    verdicts = [a["readable"] for a in answers]
    # Both outcomes well represented, or the comparison proves little.
    assert verdicts.count(True) >= 100 and verdicts.count(False) >= 1000
    assert all(not a["readable"] and a["stage"] == "validateFormat" for a in answers[len(READABLE) :][:5])


def test_what_the_reader_returns_for_a_readable_value(java_oracle: JavaOracle) -> None:
    (answer,) = java_oracle.offset_check([b'{"position":151,"file":"in.txt"}'])
    digest: dict[str, Any] = {key["sha256"]: value for key, value in answer["entries"]}
    assert digest[hashlib.sha256(b"position").hexdigest()]["class"] == "java.lang.Long"
    assert digest[hashlib.sha256(b"file").hexdigest()]["length"] == len("in.txt")
    assert json.dumps(answer["entries"])  # a digest, not the value: small whatever the value's size
