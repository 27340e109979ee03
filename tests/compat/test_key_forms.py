"""Which key bytes Connect reads back, decided by a JVM: Apache Kafka's ``JsonConverter`` and the JDK's
``HashMap``, against ``emulator.codec.java_hashmap`` and ``emulator.codec.key_forms``.

Connect's GET reads a partition back into a ``HashMap`` and writes it again to look its value up, so
the project must know that order exactly (buckets, resizes, collisions) and which bytes come back
unchanged. Inputs are seeded-random, so a failure reproduces.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from emulator.codec.jackson_reader import loads_lenient
from emulator.codec.jackson_writer import dumps
from emulator.codec.java_hashmap import hashmap_order, string_hash
from emulator.codec.key_forms import KeyForm, key_form
from tests.oracle import JavaError, JavaOracle
from tests.oracle import typed as T

pytestmark = pytest.mark.jvm

SEED = 20261129


def colliding(n: int) -> list[str]:
    """``n`` distinct strings with one ``String.hashCode`` ("Aa" and "BB" hash alike, so do their
    concatenations): they share a bucket at every capacity."""
    words = ["".join("Aa" if bit == "0" else "BB" for bit in format(i, "05b")) for i in range(n)]
    assert len({string_hash(w) for w in words}) == 1
    return words


def key_sets() -> list[list[str]]:
    rng = random.Random(SEED)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
    exotic = ["é", "日本", "\U0001f600", "\U00010000", "\u2028", "ÿ"]
    sets = []
    for _ in range(300):
        size = rng.choice([2, 3, 4, 5, 8, 12, 13, 14, 24, 25, 26, 40, 49, 70])
        keys: set[str] = set()
        while len(keys) < size:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
            if rng.random() < 0.15:
                text += rng.choice(exotic)
            keys.add(text)
        ordered = list(keys)
        rng.shuffle(ordered)
        sets.append(ordered)
    sets.append([f"{'long-field-name-' * 5}{i}" for i in range(14)])  # past the cache of short names
    # Full collisions: 8 stay a list at 16; 9 and 10 resize the table (16 -> 32 -> 64) instead of
    # making a tree; 11 make a tree (order unknown: None). Mixed with ordinary keys, in random order.
    for n in (2, 5, 8, 9, 10, 11, 16):
        words = colliding(n) + [f"k{i}" for i in range(rng.randint(0, 20))]
        rng.shuffle(words)
        sets.append(words)
    return sets


def test_hashmap_order_is_the_order_connects_json_converter_reads_a_map_in(java_oracle: JavaOracle) -> None:
    """Java's order comes from ``JsonConverter.toConnectData`` of a JSON object whose fields are in
    the listed order: the map every partition of the offsets topic is read into."""
    sets = key_sets()
    raws = [json.dumps(dict.fromkeys(keys, 0), separators=(",", ":")).encode() for keys in sets]
    decoded = java_oracle.json_decode(raws)
    unknown = 0
    for keys, java in zip(sets, decoded, strict=True):
        assert not isinstance(java, JavaError), java
        assert java["impl"] == "hash"
        java_order = [k for k, _ in java["map"]]
        ours = hashmap_order(keys)
        if ours is None:
            unknown += 1
            # Only where a bucket became a tree: 11 or more keys of one hash.
            assert max(sum(1 for k in keys if string_hash(k) == string_hash(other)) for other in keys) >= 11
        else:
            assert ours == java_order, keys
    assert unknown == 2, "the 11- and 16-key collision sets, and nothing else, are beyond this module"


def partitions(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """Partition maps with the field types Connect reads back (Long, Double with short digits on any
    JDK, Boolean, null, String), sometimes nested or holding a list."""
    values: list[Any] = [0, 7, -12, 2**40, 1.5, -0.25, 1.0, True, False, None, "x", "日本", "a\u0001b", 'q"/']
    out = []
    for _ in range(n):
        names = rng.sample(
            ["server", "db", "table", "Aa", "BB", "file", "p", "shard", "lsn", "zz", "é"], rng.randint(1, 5)
        )
        partition: dict[str, Any] = {name: rng.choice(values) for name in names}
        if rng.random() < 0.15:
            partition["nested"] = {"y": 1, "x": 2, "w": [3, {"b": 1, "a": 2}]}
        out.append(partition)
    return out


def variants(connector: str, partition: dict[str, Any], rng: random.Random) -> list[bytes]:
    """Byte-different keys of the partition: Jackson's form in document and shuffled orders, and
    forms no converter writes (spaces, an exponent, an escaped letter)."""
    items = list(partition.items())
    shuffled = dict(rng.sample(items, len(items)))
    out = [dumps([connector, partition]), dumps([connector, shuffled])]
    out.append(json.dumps([connector, partition], ensure_ascii=False).encode())  # ", " and ": "
    out.append(json.dumps([connector, partition], separators=(",", ":")).encode())  # \u escapes, 1.0 kept
    out.append(dumps([connector, partition]).replace(b'"p"', b'"\\u0070"'))
    out.append(dumps([connector, partition]).replace(b":1.5", b":15e-1"))
    return list(dict.fromkeys(out))


def test_key_forms_agree_with_what_connect_writes_back(java_oracle: JavaOracle) -> None:
    """``CONNECT`` exactly where Java's read-then-write gives the key's own bytes; ``COMPACT`` where it
    does not but Java writes those bytes for the map in the key's own order (a ``LinkedHashMap``
    connector); ``FOREIGN`` where Java writes neither."""
    rng = random.Random(SEED + 1)
    raws = [raw for p in partitions(rng, 400) for raw in variants("src", p, rng)]
    reencoded = java_oracle.json_reencode(raws)
    own_order = java_oracle.json_encode([T.from_python(loads_lenient(raw)) for raw in raws])
    seen = dict.fromkeys(KeyForm, 0)
    for raw, back, linked in zip(raws, reencoded, own_order, strict=True):
        assert not isinstance(back, JavaError), back
        form = key_form(raw)
        seen[form] += 1
        assert (form is KeyForm.CONNECT) == (back == raw), (raw, back)
        assert (form is not KeyForm.FOREIGN) == (linked == raw), (raw, linked)
    assert min(seen.values()) >= 50, seen
