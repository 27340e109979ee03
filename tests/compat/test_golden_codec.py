"""Golden bytes from a live JVM: Apache Kafka 4.3.0's JsonConverter (with its Jackson 2.21) encodes
and decodes, Kafka's Utils.murmur2 / BuiltInPartitioner place, and our codec must agree byte for byte.

Every comparison is one batched oracle call. Inputs are seeded-random, so a failure reproduces.
Doubles: JDK >= 19 prints the shortest digits (what we emit), JDK 17 sometimes prints more
(docs/protocol.md §1.3). On JDK 25 everything must match exactly; on JDK 17 the only tolerated
difference is a double whose JDK 17 text is longer than ours and reads back as the same double.
"""

from __future__ import annotations

import json
import math
import random
import re
import struct
from dataclasses import dataclass
from typing import Any

import pytest

from emulator.codec import (
    CodecError,
    KeyProblem,
    ParsedKey,
    encode_key,
    encode_offset,
    loads_lenient,
    murmur2,
    parse_key,
    partition_for,
)
from tests.oracle import JavaError, JavaOracle, typed

pytestmark = pytest.mark.jvm

SEED = 20240601
N_MAPS = 1200
PARTITION_COUNTS = (1, 2, 3, 7, 16, 25, 50, 101, 1000)

# --- seeded inputs -----------------------------------------------------------------------------

# Text pieces: ASCII, JSON metacharacters, every kind of escape, raw UTF-8 of 1-3 bytes, non-BMP
# (escaped as surrogate pairs), and lone surrogates (kept apart so they never pair up by accident).
_PIECES = [
    *"abcxyzABC0189 _-.:,/",
    '"',
    "\\",
    "\\u001f",
    *(chr(c) for c in range(0x20)),
    "\x7f",
    "\u2028",
    "\u2029",
    "é",
    "日本",
    "\ufeff",
    "\uffff",
    "\U0001f600",
    "\U00010000",
    "\U0010ffff",
    "\ud800x",
    "y\udfff",
]


def _text(rng: random.Random, max_pieces: int = 8) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, max_pieces)))


def _double(rng: random.Random) -> float:
    kind = rng.randrange(8)
    if kind == 0:  # any bit pattern: subnormals, huge and tiny exponents, NaN payloads
        return float(struct.unpack(">d", rng.getrandbits(64).to_bytes(8, "big"))[0])
    if kind == 1:
        return rng.choice(
            [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308, 2.2250738585072014e-308]
        )
    if kind == 2:  # the plain/scientific boundaries 1e-3 and 1e7, and their neighbours
        edge = rng.choice([1e-3, 1e7, -1e-3, -1e7])
        return rng.choice([edge, math.nextafter(edge, 0.0), math.nextafter(edge, math.inf * edge)])
    if kind == 3:
        return 10.0 ** rng.randint(-30, 30) * rng.choice([1, -1])
    if kind == 4:  # short decimals, the common case in real offsets
        return round(rng.uniform(-1e6, 1e6), rng.randint(0, 6))
    if kind == 5:
        return rng.uniform(-1, 1) * 10.0 ** rng.randint(-320, 308)
    if kind == 6:
        return float(rng.getrandbits(rng.randint(1, 64)))
    return rng.random()


def _long(rng: random.Random) -> int:
    return rng.choice(
        [
            lambda: rng.choice([0, 1, -1, 2**63 - 1, -(2**63), 2**53 + 1, -(2**31), 2**31 - 1]),
            lambda: rng.getrandbits(64) - 2**63,
            lambda: rng.randint(-1000, 100000),
        ]
    )()


@dataclass
class Value:
    """One map value: the Python value we encode and the Java object the oracle builds."""

    python: Any
    java: Any


def _value(rng: random.Random) -> Value:
    kind = rng.randrange(9)
    if kind == 0:
        return Value(None, None)
    if kind == 1:
        b = rng.random() < 0.5
        return Value(b, b)
    if kind == 2:
        n = _long(rng)
        return Value(n, typed.long(n))
    if kind == 3:  # Integer and Long print alike; a connector may use either
        n = rng.randint(-(2**31), 2**31 - 1)
        return Value(n, typed.integer(n))
    if kind in (4, 5):
        x = _double(rng)
        return Value(x, typed.double(x))
    if kind == 6:
        raw = rng.randbytes(rng.randint(0, 12))
        return Value(raw, typed.binary(raw))
    s = _text(rng)
    return Value(s, s)


@dataclass
class Case:
    connector: str
    entries: list[tuple[str, Value]]  # in insertion order
    impl: str  # "linked" (LinkedHashMap), "tree" (TreeMap) or "hash" (HashMap)

    def java_map(self) -> Any:
        return typed.jmap([(k, v.java) for k, v in self.entries], self.impl)

    def python_map(self, java_order: list[str] | None = None) -> dict[str, Any]:
        """The entries in the order Java iterates them (known for linked/tree; read back for hash)."""
        if self.impl == "linked":
            order = [k for k, _ in self.entries]
        elif self.impl == "tree":  # String.compareTo: UTF-16 code unit order
            order = sorted((k for k, _ in self.entries), key=lambda k: k.encode("utf-16-be", "surrogatepass"))
        else:
            assert java_order is not None
            order = java_order
        values = {k: v.python for k, v in self.entries}
        return {k: values[k] for k in order}


def _cases(seed: int, n: int) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        keys = list(dict.fromkeys(_text(rng, 4) for _ in range(rng.randint(0, 7))))
        rng.shuffle(keys)
        impl = rng.choices(["linked", "tree", "hash"], weights=[6, 2, 2])[0]
        cases.append(Case(_text(rng, 5) or "conn", [(k, _value(rng)) for k in keys], impl))
    return cases


# --- comparing bytes ------------------------------------------------------------------------------

_STRING_OR_OTHER = re.compile(rb'"(?:[^"\\]|\\.)*"|[^"]+', re.DOTALL)
_NUMBER = re.compile(rb"-?[0-9][0-9.eE+-]*")


def _double_differences(ours: bytes, java: bytes) -> list[tuple[str, str]] | None:
    """The (ours, Java) double texts where the bytes differ, or None if anything else differs."""
    our_tokens = _STRING_OR_OTHER.findall(ours)
    java_tokens = _STRING_OR_OTHER.findall(java)
    if b"".join(our_tokens) != ours or b"".join(java_tokens) != java or len(our_tokens) != len(java_tokens):
        return None
    diffs: list[tuple[str, str]] = []
    for a, b in zip(our_tokens, java_tokens, strict=True):
        if a == b:
            continue
        if a.startswith(b'"') or b.startswith(b'"'):
            return None  # strings (and their escapes) must match exactly
        our_parts, java_parts = _NUMBER.split(a), _NUMBER.split(b)
        our_nums, java_nums = _NUMBER.findall(a), _NUMBER.findall(b)
        if our_parts != java_parts or len(our_nums) != len(java_nums):
            return None
        for x, y in zip(our_nums, java_nums, strict=True):
            if x != y:
                diffs.append((x.decode(), y.decode()))
    return diffs


def _is_jdk17_double_quirk(ours: str, java: str) -> bool:
    """JDK <= 18 may print a longer digit string for the same double, never a different double."""
    is_double = any(c in java for c in ".E") and any(c in ours for c in ".E")
    return is_double and float(ours) == float(java) and len(java) > len(ours)


def _count_double_tokens(encoded: list[bytes]) -> int:
    return sum(
        1
        for raw in encoded
        for tok in _STRING_OR_OTHER.findall(raw)
        if not tok.startswith(b'"')
        for num in _NUMBER.findall(tok)
        if b"." in num or b"E" in num
    )


# --- the batches --------------------------------------------------------------------------------


@dataclass
class Batch:
    cases: list[Case]
    java_keys: list[bytes]
    java_values: list[bytes]
    our_keys: list[bytes]
    our_values: list[bytes]


def _encode_batch(oracle: JavaOracle) -> Batch:
    cases = _cases(SEED, N_MAPS)
    java_out = oracle.json_encode(
        [typed.jlist([c.connector, c.java_map()]) for c in cases] + [c.java_map() for c in cases]
    )
    assert all(b is not None for b in java_out)
    java_keys = [b for b in java_out[:N_MAPS] if b is not None]
    java_values = [b for b in java_out[N_MAPS:] if b is not None]
    our_keys, our_values = [], []
    for case, java_value in zip(cases, java_values, strict=True):
        order = None
        if case.impl == "hash":
            # HashMap iteration order is Java's business, not the codec's: take it from Java's bytes.
            # (Python's json, because Jackson 2.21 itself refuses a field name holding a lone
            # surrogate — bytes Connect writes but cannot read back.)
            names = json.loads(java_value, object_pairs_hook=lambda pairs: [k for k, _ in pairs])
            by_wire_name = {_as_java_string(k): k for k, _ in case.entries}
            order = [by_wire_name[_as_java_string(k)] for k in names]
        partition = case.python_map(order)
        our_keys.append(encode_key(case.connector, partition))
        encoded = encode_offset(partition)
        assert encoded is not None
        our_values.append(encoded)
    return Batch(cases, java_keys, java_values, our_keys, our_values)


def _as_java_string(s: str) -> str:
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def test_the_inputs_cover_what_the_issue_asks_for() -> None:
    """Guards the generator: without this, a refactor could silently shrink the golden coverage."""
    cases = _cases(SEED, N_MAPS)
    values = [v.python for c in cases for _, v in c.entries]
    texts = [c.connector for c in cases] + [k for c in cases for k, _ in c.entries]
    texts += [v for v in values if isinstance(v, str)]
    assert len(cases) >= 1000
    assert any(any(ord(ch) > 0xFFFF for ch in t) for t in texts)
    assert any(any(ord(ch) < 0x20 for ch in t) for t in texts)
    assert {2**63 - 1, -(2**63)} <= {v for v in values if type(v) is int}
    floats = [v for v in values if type(v) is float]
    assert any(abs(x) >= 1e7 for x in floats if math.isfinite(x)) and any(0 < abs(x) < 1e-3 for x in floats)
    assert any(type(v) is bool for v in values) and None in values and any(type(v) is bytes for v in values)
    linked = [c for c in cases if c.impl == "linked" and len(c.entries) >= 2]
    assert sum(1 for c in linked if [k for k, _ in c.entries] != sorted(k for k, _ in c.entries)) >= 100
    assert sum(1 for c in cases if c.impl == "tree") >= 100 and sum(1 for c in cases if c.impl == "hash") >= 100


def test_keys_and_values_match_jdk25_byte_for_byte(java_oracle_modern: JavaOracle) -> None:
    batch = _encode_batch(java_oracle_modern)
    mismatches = [
        (ours, java)
        for ours, java in zip(batch.our_keys + batch.our_values, batch.java_keys + batch.java_values, strict=True)
        if ours != java
    ]
    assert not mismatches, f"{len(mismatches)} of {2 * N_MAPS} differ on JDK 25; first: {mismatches[:3]}"


def test_keys_and_values_match_jdk17_except_its_longer_doubles(java_oracle: JavaOracle, record_property: Any) -> None:
    batch = _encode_batch(java_oracle)
    real, quirks = [], []
    for ours, java in zip(batch.our_keys + batch.our_values, batch.java_keys + batch.java_values, strict=True):
        if ours == java:
            continue
        diffs = _double_differences(ours, java)
        if diffs is None or not all(_is_jdk17_double_quirk(a, b) for a, b in diffs):
            real.append((ours, java))
        else:
            quirks.extend(diffs)
    doubles = _count_double_tokens(batch.java_keys + batch.java_values)
    record_property("jdk17_double_quirks", len(quirks))
    record_property("double_tokens", doubles)
    summary = f"{len(quirks)} of {doubles} doubles printed longer by JDK 17 (tolerated): {quirks[:5]}"
    assert not real, f"{len(real)} real mismatches on JDK 17; {summary}; first: {real[:3]}"
    # The tolerance must stay a rare JDK quirk, not a cover for a systematic formatting bug.
    assert len(quirks) <= doubles // 50, summary
    print(summary)


def test_murmur2_and_partitions_match_java(java_oracle: JavaOracle) -> None:
    keys = _encode_batch(java_oracle).our_keys
    assert java_oracle.murmur2(keys) == [murmur2(k) for k in keys]
    for n in PARTITION_COUNTS:
        assert java_oracle.partition(keys, n) == [partition_for(k, n) for k in keys], f"{n} partitions"


@pytest.mark.slow
def test_parse_key_reads_javas_keys_as_connect_does(java_oracle: JavaOracle) -> None:
    java_keys = _encode_batch(java_oracle).java_keys
    decoded = java_oracle.json_decode(list(java_keys))
    unreadable = 0
    for raw, java in zip(java_keys, decoded, strict=True):
        parsed = parse_key(raw)
        if isinstance(java, JavaError):
            # Connect writes a field name holding a lone surrogate as "\uD800" but Jackson 2.21
            # refuses to read it back; such a key is NOT_JSON to Connect, so it must be to us.
            unreadable += 1
            assert parsed is KeyProblem.NOT_JSON, (raw, java)
            continue
        assert isinstance(parsed, ParsedKey), (raw, parsed)
        assert _typed([parsed.connector, parsed.partition]) == _typed(typed.to_python(java)), raw
    assert unreadable < len(java_keys) // 2


# --- lenient decoding -----------------------------------------------------------------------------

ODD_INPUTS: list[bytes] = [
    b"",
    b" ",
    b"\t\r\n",
    b'  ["c", {"a": 1}]  ',
    b'["c",{"a":1}] trailing',
    b'["c",{"a":1}]]]',
    b'["c",{"a":1}]\xff\xfe',
    b'{"a":1,"a":2,"b":3,"a":4}',
    b"007",
    b"-007",
    b"[00, 01.50, -00e1, 0e0]",
    b"00.5",
    b"-0",
    b"-0.0",
    b"[-0.0, 0.0, -0e9]",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551617",
    b"1e400",
    b"-1e400",
    b"1e-400",
    b"1.7976931348623157e308",
    b"4.9e-324",
    b"1E2",
    b"1e2147483647",
    b"1e2147483648",
    b"1" * 1000,
    b"1" * 1001,
    b"0." + b"1" * 999,
    b"0." + b"1" * 1000,
    b"1 2",
    b"1x",
    b"1,",
    b"1]",
    b"1.",
    b"1.e5",
    b"1e",
    b"1e+",
    b".5",
    b"+1",
    b"-",
    b"0x10",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b'"NaN"',
    b"[NaN]",
    b"true",
    b"true ",
    b"true:",
    b"true@",
    b"truex",
    b"true1",
    b"true_",
    b"true$",
    b"true\x7f",
    b"true\xc3\xa9",
    b"true\xc2\xa0",
    b"[true]",
    b"[truex]",
    b"nul",
    b"null",
    b"null}",
    b"x",
    b"{",
    b"}",
    b"[",
    b"]",
    b"[1,]",
    b"[,1]",
    b'{"a":1,}',
    b"{a:1}",
    b"{'a':1}",
    b'{"a" 1}',
    b'{"a":1 "b":2}',
    b"[1 2]",
    b"/*c*/1",
    b"//c\n1",
    b"#c\n1",
    b"\x00",
    b"\x001",
    b"1\x00",
    b"\x01",
    b"\x0b[1]",
    b"\x1e[1]",
    b'"a\x01b"',
    b'"a\x7fb"',
    b'"\\u0041\\u00e9\\u20ac\\ud83d\\ude00"',
    b'"\\ud800"',
    b'"\\udc00\\ud800"',
    b'{"\\ud83d\\ude00":1}',
    b'{"\\ud800":1}',
    b'{"\\udc00":1}',
    b'{"\\ud800x":1}',
    b'{"\\ud800\\n":1}',
    b'"\\x"',
    b'"\\\'"',
    b'"\\u12G4"',
    b'"\\u12"',
    b'"unterminated',
    b'"\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80"',
    b'"\xc0\x80"',
    b'"\xc1\xbf"',
    b'"\xe0\x80\x80"',
    b'"\xed\xa0\x80"',
    b'"\xed\xbf\xbf"',
    b'"\xf0\x80\x80\x80"',
    b'"\xf4\x90\x80\x80"',
    b'"\xf7\xbf\xbf\xbf"',
    b'"\xf8"',
    b'"\xff"',
    b'"\x80"',
    b'"\xc3"',
    b'"\xe2\x82"',
    b'{"\xc0\x80":1}',
    b'{"\xf0\x80\x80\x80":1}',
    b'{"\xed\xa0\x80":1}',
    b"\xef\xbb\xbf[1]",
    b"\xef\xbb\xbf",
    b"\xef\xbb\xbf1",
    '["c",{"a":1}]'.encode("utf-16-le"),
    '["c",{"a":1}]'.encode("utf-16-be"),
    '["c",{"a":1}]'.encode("utf-16"),
    '["c",{"a":1}]'.encode("utf-32-le"),
    '["c",{"a":1}]'.encode("utf-32-be"),
    b"[" * 300 + b"]" * 300,  # the accepted boundary (1000) is a unit test: the oracle's reply recurses
    b"[" * 1001 + b"]" * 1001,
    b'{"a":' * 1001 + b"1" + b"}" * 1001,
    # keys of every classification (docs/protocol.md §2.6)
    b'["c",{"a":1}]',
    b'["c",null]',
    b'["c",[]]',
    b'["c","p"]',
    b"[1,{}]",
    b"[null,{}]",
    b'["c"]',
    b'["c",{},{}]',
    b"[]",
    b'{"c":{}}',
    b"42",
    b'"c"',
]


def _fuzz_inputs(seed: int, n: int) -> list[bytes]:
    """Mutated keys and offsets, plus random token soup: the shapes a bad producer writes."""
    rng = random.Random(seed)
    # Raw surrogate bytes are left out here (they are in ODD_INPUTS inside strings): the oracle
    # cannot yet ship Jackson's error message back when it quotes such a character.
    # 0xFE stands in for an invalid byte, not 0xFF: Jackson pads short field-name quads with 0xFF,
    # so a name like "\xffa" is looked up as the already-seen name "a" and parses or fails
    # depending on which names the JVM met before (our parser always fails it, as a fresh JVM does).
    alphabet = [
        *(b"[", b"]", b"{", b"}", b'"', b",", b":", b" ", b"\t", b"\n", b"\r", b"0", b"1", b"9", b"-", b"+"),
        *(b".", b"e", b"E", b"true", b"false", b"null", b"\\", b"u", b"d8", b"dc", b"00", b"a", b"x"),
        *(b"\xc3\xa9", b"\xfe", b"\xf0\x9f\x98\x80", b"\x00", b"\x1f", b"/", b"#", b"NaN", b"\xef\xbb\xbf"),
        *(b'"a"', b'"k":', b"007", b"1e5", b"\\ud800", b"\\udc00", b"\\n", b"\x7f", b"$", b"_"),
    ]
    bases = [
        b'["c",{"a":1,"b":"x"}]',
        b'{"position":1234}',
        b'["x",{"k":[1,2.5,true,null,{"z":"\\u00e9"}]}]',
        b"[1,-0.0,1e400,007]",
        b'"s"',
    ]
    out: set[bytes] = set()
    while len(out) < n:
        if rng.random() < 0.5:
            b = bytearray(rng.choice(bases))
            for _ in range(rng.randint(1, 3)):
                i = rng.randint(0, len(b))
                op = rng.random()
                if op < 0.4:
                    b[i:i] = rng.choice(alphabet)
                elif op < 0.7 and b:
                    del b[min(i, len(b) - 1)]
                else:
                    b[i : i + 1] = rng.choice(alphabet)
            out.add(bytes(b))
        else:
            out.add(b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))))
    return sorted(out)


def test_lenient_decoding_matches_jsonconverter(java_oracle: JavaOracle) -> None:
    inputs = ODD_INPUTS + _fuzz_inputs(SEED, 3000)
    decoded = java_oracle.json_decode(list(inputs))
    mismatches = []
    connect_rejects = 0
    for raw, java in zip(inputs, decoded, strict=True):
        key = parse_key(raw)
        if isinstance(java, JavaError):
            connect_rejects += 1
            try:
                ours: object = loads_lenient(raw)
            except CodecError:
                if key is not KeyProblem.NOT_JSON:
                    mismatches.append((raw, "Connect: not JSON", f"parse_key: {key}"))
                continue
            mismatches.append((raw, f"Connect: {java}", f"ours: {ours!r}"))
            continue
        expected = typed.to_python(java)
        try:
            ours = loads_lenient(raw)
        except CodecError as e:
            mismatches.append((raw, f"Connect: {expected!r}", f"ours: CodecError({e})"))
            continue
        if _typed(ours) != _typed(expected):
            mismatches.append((raw, f"Connect: {expected!r}", f"ours: {ours!r}"))
        elif key is KeyProblem.NOT_JSON:
            mismatches.append((raw, "Connect parses it", "parse_key: NOT_JSON"))
    assert not mismatches, f"{len(mismatches)} of {len(inputs)} differ; first: {mismatches[:5]}"
    # Both outcomes must be well represented, or the comparison proves little.
    assert 300 <= connect_rejects <= len(inputs) - 300


def _typed(value: object) -> object:
    """Java-type-aware form: True != 1 != 1.0, doubles by bits, maps unordered (Connect's HashMap)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("long", value)
    if isinstance(value, float):
        return ("double", "NaN" if math.isnan(value) else struct.pack(">d", value))
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, dict):
        return ("map", sorted((repr(k), _typed(v)) for k, v in value.items()))
    return (type(value).__name__, value)
