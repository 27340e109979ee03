"""The view lists and finds exactly what a plain model of Connect's reader would, whatever the hashes do.

The view keeps no parsed partitions: its records live in one arena (emulator/view/record_arena.py),
found by a hash of the raw key and, per connector, by a hash of the logical partition. These tests
replay random logs against the view and against a model written the obvious way (every key parsed,
grouped by logical id): with the real hashes, with every logical partition forced into the same one
or two buckets, with every raw key (and logical partition) forced onto hash 0, and with the arena compacting at every
chance instead of past 1 MiB of garbage.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from emulator.codec.key_forms import key_form, shown_variant
from emulator.codec.keys import KeyProblem, logical_id, parse_key
from emulator.codec.values import CodecError, parse_offset
from emulator.model.records import LogRecord
from emulator.view import offset_view, position_table, record_arena
from emulator.view.offset_view import OffsetView


def _keys() -> list[bytes | None]:
    keys: list[bytes | None] = []
    for connector in ("a", "b"):
        for i in range(4):
            keys.append(f'["{connector}",{{"f":{i}}}]'.encode())
            keys.append(f'["{connector}", {{"f": {i}}}]'.encode())  # same partition, other bytes
            keys.append(f'["{connector}",{{"x":1,"y":{i}}}]'.encode())
            keys.append(f'["{connector}",{{"y":{i},"x":1}}]'.encode())  # same partition, other key order
    keys += [b"not json", b'["a"]', b'["a",null]', b'["a",[1]]', None]
    return keys


KEYS = _keys()
VALUES: list[bytes | None] = [b'{"p":1}', b'{"p":2}', None, None, b"", b"garbage{"]


def _offset(value: bytes) -> Any:
    try:
        return parse_offset(value)
    except CodecError:
        return None


class Model:
    """Connect's reader, written plainly: latest value per key, keys grouped by logical partition, the
    value shown picked by ``shown_variant`` from every key's form (tests/compat/test_key_forms.py and
    tests/integration/test_aliased_keys.py check that rule against Java)."""

    def __init__(self) -> None:
        self.data: dict[bytes | None, bytes] = {}
        self.order: list[bytes | None] = []  # live keys, oldest write first

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        if key in self.data:
            self.order.remove(key)
            del self.data[key]
        if value is not None:
            self.data[key] = value
            self.order.append(key)

    def rows(self, connector: str) -> dict[str, tuple[Any, Any, tuple[bytes, ...]]]:
        groups: dict[str, list[bytes]] = {}
        for key in self.order:
            parsed = parse_key(key)
            if isinstance(parsed, KeyProblem) or parsed.connector != connector:
                continue
            groups.setdefault(logical_id(parsed.partition), []).append(key)  # type: ignore[arg-type]
        result = {}
        for lid, keys in groups.items():
            chosen = shown_variant([key_form(key) for key in keys])  # type: ignore[arg-type]  # parsed keys
            shown = keys[-1] if chosen is None else keys[chosen]
            parsed = parse_key(shown)
            assert not isinstance(parsed, KeyProblem)
            result[lid] = (parsed.partition, None if chosen is None else _offset(self.data[shown]), tuple(keys))
        return result


def _listed(view: OffsetView, connector: str) -> dict[str, tuple[Any, Any, tuple[bytes, ...]]]:
    rows = view.offsets(connector)
    listed = {logical_id(r.partition): (r.partition, r.offset, r.keys) for r in rows}
    assert len(listed) == len(rows), "a logical partition is listed twice"
    return listed


@pytest.fixture(params=["real-hash", "one-bucket", "two-buckets", "one-key-hash", "always-compact", "always-resizing"])
def hashing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "one-bucket":
        monkeypatch.setattr(offset_view, "bucket_of", lambda lid: 7)
    elif request.param == "two-buckets":
        monkeypatch.setattr(offset_view, "bucket_of", lambda lid: len(lid) % 2)
    elif request.param == "one-key-hash":
        monkeypatch.setattr(record_arena, "_HASH_MASK", 0)  # raw-key (and logical) hashes all 0
    elif request.param == "always-compact":
        monkeypatch.setattr(record_arena, "_COMPACT_FLOOR", 0)
        monkeypatch.setattr(record_arena, "_STEP_BYTES", 8)  # about a record per change: mostly mid-compaction
    elif request.param == "always-resizing":
        monkeypatch.setattr(position_table, "_MOVE_CELLS", 1)  # a table that grows stays mid-resize for long
        monkeypatch.setattr(record_arena, "_COMPACT_FLOOR", 0)
        monkeypatch.setattr(record_arena, "_STEP_BYTES", 8)
    return str(request.param)


@pytest.mark.parametrize("seed", range(12))
def test_listing_and_finding_match_a_plain_model_of_connects_reader(hashing: str, seed: int) -> None:
    rng = random.Random(seed)
    view, model = OffsetView(), Model()
    offsets = [0] * 3
    for step in range(400):
        key, value = rng.choice(KEYS), rng.choice(VALUES)
        partition = rng.randrange(3)
        view.apply([LogRecord(key, value, partition, offsets[partition], step)])
        offsets[partition] += 1
        model.apply(key, value)
        if step % 20 == 19:
            for connector in ("a", "b"):
                expected = model.rows(connector)
                assert _listed(view, connector) == expected, f"{hashing}, seed {seed}, step {step}"
                assert view.partition_count(connector) == len(expected)
                assert view.extent(connector)[0] == sum(len(keys) for _, _, keys in expected.values())
                for lid, (_, _, keys) in expected.items():
                    assert view.find(connector, lid) == keys
            assert view.live_keys() == len(model.data)
            assert {k: e.value for k, e in view.raw_entries()} == model.data
    assert view.find("a", logical_id({"f": 99})) == ()
    assert view.find("nobody", logical_id({"f": 0})) == ()
    assert view.partition_count("nobody") == 0


def test_an_unparseable_value_is_counted_once_per_record_however_often_it_is_listed() -> None:
    view = OffsetView()
    key = b'["c",{"f":1}]'
    view.apply([LogRecord(key, b"garbage{", 0, 0, 0)])
    assert [r.offset for r in view.offsets("c")] == [None]
    assert view.stats.unparseable_values == 1, "counted at the first listing, which also judges the key's form"
    assert [r.offset for r in view.offsets("c")] == [None]
    assert view.stats.unparseable_values == 1
    entry = view.get_raw(key)
    assert entry is not None and (entry.value, entry.partition, entry.offset) == (b"garbage{", 0, 0)
    view.apply([LogRecord(key, b"garbage{", 0, 1, 0)])
    view.offsets("c")
    assert view.stats.unparseable_values == 2, "a new record with a bad value is counted again"


def test_a_rewrite_of_a_live_key_moves_it_last_among_its_aliases_and_connects_form_is_shown() -> None:
    view = OffsetView()
    compact, spaced = b'["c",{"f":1}]', b'["c", {"f": 1}]'
    view.apply([LogRecord(compact, b'{"p":1}', 0, 0, 0), LogRecord(spaced, b'{"p":2}', 0, 1, 0)])
    assert [(r.keys, r.offset) for r in view.offsets("c")] == [((compact, spaced), {"p": 1})]
    view.apply([LogRecord(compact, b'{"p":3}', 0, 2, 0)])
    assert [(r.keys, r.offset) for r in view.offsets("c")] == [((spaced, compact), {"p": 3})]
    view.apply([LogRecord(spaced, b'{"p":4}', 0, 3, 0)])  # the form is the key's: kept across rewrites
    assert [(r.keys, r.offset) for r in view.offsets("c")] == [((compact, spaced), {"p": 3})]
    view.apply([LogRecord(compact, None, 0, 4, 0)])
    assert [(r.keys, r.offset) for r in view.offsets("c")] == [((spaced,), None)], "no task reads spaced bytes"


def test_connector_names_stay_known_after_their_last_key_is_deleted_and_from_tombstones_alone() -> None:
    view = OffsetView()
    view.apply([LogRecord(b'["c",{"f":1}]', b'{"p":1}', 0, 0, 0), LogRecord(b'["c",{"f":1}]', None, 0, 1, 0)])
    view.apply([LogRecord(b'["ghost",{"f":1}]', None, 0, 2, 0)])
    assert view.connectors() == ["c", "ghost"]
    assert view.offsets("c") == [] and view.offsets("ghost") == []
    assert view.knows("ghost") and not view.knows("other")


def test_a_key_met_in_a_second_kafka_partition_is_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A foreign producer's default partitioner, or a changed partition count, puts one key in two
    partitions: no defined winner for Connect's reader, and a DELETE's tombstone (in murmur2's
    partition) leaves the other copy to come back after a restart. It was seen nowhere (QA on Kafka)."""
    view, key = OffsetView(), b'["c",{"p":1}]'
    view.apply([LogRecord(key, b'{"k":1}', 4, 0, 1), LogRecord(key, b'{"k":2}', 4, 1, 2)])  # one partition: fine
    assert view.stats.keys_in_two_partitions == 0
    with caplog.at_level("WARNING", logger="emulator.view.offset_view"):
        view.apply([LogRecord(key, b'{"k":3}', 9, 0, 3)])  # the same key from partition 9
        view.apply([LogRecord(key, None, 4, 2, 4)])  # a DELETE's tombstone in partition 4
    assert view.stats.keys_in_two_partitions == 2
    assert view.stats.as_dict()["keys_in_two_partitions"] == 2
    (warned,) = [r.getMessage() for r in caplog.records]  # the first only: then every 1,000th
    assert warned.startswith('key ["c",{"p":1}]: a record in Kafka partition 9 while its last record was in partition')
    assert warned.split(" while its last record was in ")[1].startswith("partition 4;")
    assert "a deletion may not last a restart" in warned


def test_a_record_the_view_fails_on_is_skipped_alone_counted_and_logged_at_its_position(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever a record makes the view fail on (a defect of ours: keys nested past Python's recursion
    limit were one), the records around it in the batch are applied, as Connect's reader applies them,
    and the record is counted where skipped keys are (``/status``, the metrics) and logged at its position."""
    real_logical_id = offset_view.logical_id

    def failing_on_poison(partition: dict[str, Any]) -> str:
        if "poison" in partition:
            raise RecursionError("maximum recursion depth exceeded")
        return real_logical_id(partition)

    monkeypatch.setattr(offset_view, "logical_id", failing_on_poison)
    view = OffsetView("kafka://broker:9092/offsets")
    view.apply(
        [
            LogRecord(b'["c",{"before":1}]', b'{"p":1}', 0, 0, 0),
            LogRecord(b'["c",{"poison":1}]', b'{"p":1}', 0, 1, 0),
            LogRecord(b'["c",{"after":1}]', b'{"p":2}', 0, 2, 0),
        ]
    )
    assert sorted(str(row.partition) for row in view.offsets("c")) == ["{'after': 1}", "{'before': 1}"]
    stats = view.stats.as_dict()
    assert stats["records_applied"] == 3
    assert stats["skipped_keys"] == {offset_view.FAILED_RECORD: 1} and stats["skipped_keys_total"] == 1
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1
    assert errors[0].startswith('kafka://broker:9092/offsets: record at partition 0 offset 1 (key ["c",{"poison":1}])')
