"""The test kit's helpers (``emulator.testing.OffsetsKit``) against a real daemon on the embedded log.

Specification: ``seed`` writes through the daemon's PATCH with ``create=true`` in the key order
given; ``offsets``/``offset``/``history`` read Connect's shapes (history oldest first);
``assert_offsets`` compares as Connect does (partitions as maps, values type-exact) and explains a
difference per partition; ``wait_for_offset`` returns as soon as the offset matches and, on
timeout, shows the last offset seen and the partition's recent history; ``close`` resets what the
kit named or seeded; ``snapshot``/``restore`` put back a whole log byte for byte. That a real
Connect task resumes from a seeded offset is shown in ``test_plugin_kafka.py`` with Apache Kafka's
FileStreamSourceConnector.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from emulator.client.errors import ApiError, NotFoundError
from emulator.testing import LogSnapshot, OffsetsKit, unique_name
from tests.fixtures.daemon import DaemonFactory, DaemonProcess

FILE = {"filename": "/data/in.txt"}


@pytest.fixture
def kit(embedded_daemon: DaemonProcess, request: pytest.FixtureRequest) -> Iterator[OffsetsKit]:
    with OffsetsKit(embedded_daemon.url, context=request.node.name) as k:
        yield k


def test_seed_writes_new_keys_in_the_given_key_order_and_reads_back_as_connect_lists_them(kit: OffsetsKit) -> None:
    connector = kit.unique_name("jdbc")
    partition = {"table": "orders", "db": "shop"}  # a LinkedHashMap's order, as the connector builds it

    kit.seed(connector, [(partition, {"id": 41})])

    assert kit.offsets(connector) == [{"partition": partition, "offset": {"id": 41}}]
    key = f'["{connector}",{{"table":"orders","db":"shop"}}]'.encode()  # Jackson's compact form, that order
    assert kit.client.records([connector]) == {key: b'{"id":41}'}


@pytest.mark.parametrize(
    "shape",
    [
        [(FILE, {"position": 7})],
        [{"partition": FILE, "offset": {"position": 7}}],
        {"offsets": [{"partition": FILE, "offset": {"position": 7}}]},
    ],
    ids=["pairs", "entries", "patch-body"],
)
def test_seed_takes_pairs_entries_or_connects_patch_body(kit: OffsetsKit, shape: object) -> None:
    connector = kit.unique_name()
    kit.seed(connector, shape)  # type: ignore[arg-type]  # each shape is one of OffsetsInput's
    assert kit.offset(connector, FILE) == {"position": 7}


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ([{"partition": FILE}], 'offsets[0] must have exactly "partition" and "offset"'),
        ([(FILE, 7)], "offsets[0]: an offset is a mapping or None, got 7"),
        ([("file", {"position": 1})], "offsets[0]: a partition is a mapping, got 'file'"),
        ({"partition": FILE}, 'offsets must be {"offsets": [...]}'),
        ("not offsets", 'offsets must be {"offsets": [...]}, a list of'),  # was refused character by character
        ([(FILE, {"position": float("nan")})], 'offsets[0], partition {"filename": "/data/in.txt"}: field '),
    ],
)
def test_a_shape_seed_cannot_use_is_refused_before_anything_is_written(
    kit: OffsetsKit, shape: object, message: str
) -> None:
    connector = kit.unique_name()
    with pytest.raises(ValueError, match=r"^" + message.replace("[", r"\[").replace("(", r"\(").replace("{", r"\{")):
        kit.seed(connector, shape)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        kit.offsets(connector)


@pytest.mark.parametrize(
    ("partition", "offset", "field"),
    [
        (FILE, {"a": {"b": 1}}, "field 'a' of its offset holds a map"),
        (FILE, {"position": 1, "seen": [1, 2]}, "field 'seen' of its offset holds a list"),
        ({"filename": "f", "shard": (0, 1)}, {"position": 1}, "field 'shard' of the partition holds a list"),
    ],
    ids=["map-in-offset", "list-in-offset", "list-in-partition"],
)
def test_a_nested_partition_or_offset_is_refused_before_anything_is_sent(
    kit: OffsetsKit, partition: dict[str, object], offset: dict[str, object], field: str
) -> None:
    """The daemon answered Connect's 500 (OffsetUtils.validateFormat's DataException); the kit names
    where the nesting is, as Connect keeps only flat maps of primitives or null (protocol.md §1.1)."""
    connector = kit.unique_name()
    with pytest.raises(ValueError) as refused:
        kit.seed(connector, [({"filename": "ok"}, {"position": 1}), (partition, offset)])
    assert str(refused.value) == (
        f"offsets[1], partition {json.dumps(partition)}: {field}; Connect's partitions and offsets are flat "
        "maps of primitives or null (OffsetUtils.validateFormat, docs/protocol.md §1.1)"
    )
    with pytest.raises(NotFoundError):  # not even the valid entry was written
        kit.offsets(connector)


def test_flat_maps_of_every_primitive_and_null_are_seeded(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    offset = {"s": "x", "l": 7, "d": 0.5, "b": True, "n": None}
    kit.seed(connector, [({"filename": "f", "shard": 0}, offset)])
    assert kit.offset(connector, {"filename": "f", "shard": 0}) == offset


def test_seeding_none_deletes_a_partition(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    kit.seed(connector, [(FILE, {"position": 1}), ({"filename": "b"}, {"position": 2})])
    kit.seed(connector, [(FILE, None)])
    assert kit.offsets(connector) == [{"partition": {"filename": "b"}, "offset": {"position": 2}}]
    assert kit.offset(connector, FILE) is None


def test_assert_offsets_compares_partitions_as_maps_and_ignores_listing_order(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    kit.seed(connector, [({"a": 1, "b": 2}, {"n": 1}), ({"x": "y"}, {"n": 2})])

    kit.assert_offsets(connector, [({"x": "y"}, {"n": 2}), ({"b": 2, "a": 1}, {"n": 1})])
    kit.assert_offsets(connector, [({"x": "y"}, {"n": 2})], exact=False)
    kit.assert_offsets(connector, [({"x": "y"}, {"n": 2}), ({"gone": True}, None)], exact=False)
    kit.assert_offsets(kit.unique_name("never-seen"), [])  # an unknown connector has no offsets


def test_assert_offsets_explains_each_difference_per_partition(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    kit.seed(connector, [(FILE, {"position": 42}), ({"filename": "extra"}, {"position": 5})])

    with pytest.raises(AssertionError) as failure:
        kit.assert_offsets(connector, [(FILE, {"position": 42.0}), ({"filename": "b"}, {"position": 1})])

    assert str(failure.value).splitlines() == [
        f"offsets of connector {connector!r} differ from the expected ones in 3 partition(s):",
        '  partition {"filename": "/data/in.txt"}:',
        '    expected {"position": 42.0}',
        '    actual   {"position": 42}',
        "    (equal in Python, not in Connect: 1, 1.0 and true are a Long, a Double and a Boolean)",
        '  partition {"filename": "b"}: missing (expected offset {"position": 1})',
        '  partition {"filename": "extra"}: unexpected, offset {"position": 5}',
    ]


def test_assert_offsets_with_none_requires_the_partition_to_be_absent(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    kit.seed(connector, [(FILE, {"position": 3})])
    with pytest.raises(AssertionError, match=r'expected absent, found offset \{"position": 3\}'):
        kit.assert_offsets(connector, [(FILE, None)])


def test_wait_for_offset_returns_as_soon_as_a_later_write_lands(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    later = threading.Timer(0.3, kit.seed, args=(connector, [(FILE, {"position": 99})]))
    later.start()
    try:
        assert kit.wait_for_offset(connector, FILE, {"position": 99}, timeout=20) == {"position": 99}
    finally:
        later.join()


def test_wait_for_offset_takes_a_predicate_over_a_present_offset(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    later = threading.Timer(0.3, kit.seed, args=(connector, [(FILE, {"position": 150})]))
    later.start()
    try:  # asked only once the partition has an offset, so the predicate needs no None check
        found = kit.wait_for_offset(connector, FILE, lambda o: o["position"] >= 100, timeout=20)
    finally:
        later.join()
    assert found == {"position": 150}


def test_wait_for_offset_times_out_showing_the_last_offset_and_the_partitions_history(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    kit.seed(connector, [(FILE, {"position": 10})])
    kit.seed(connector, [(FILE, {"position": 20}), ({"filename": "other"}, {"position": 1})])
    kit.wait_for_offset(connector, FILE, lambda _: len(kit.history(connector, FILE)) == 2, timeout=10)

    with pytest.raises(AssertionError) as failure:
        kit.wait_for_offset(connector, FILE, {"position": 30}, timeout=0.3)

    lines = str(failure.value).splitlines()
    assert lines[0] == (
        f'connector {connector!r} partition {{"filename": "/data/in.txt"}}: the offset did not become '
        '{"position": 30} within 0.3 s'
    )
    assert lines[1] == '  last seen: {"position": 20}'
    assert lines[2] == "recent history of this partition (oldest first, at most 10):"
    assert [line.split()[1:3] + line.split()[-2:] for line in lines[3:]] == [
        ["daemon", "PATCH", '{"position":', "10}"],
        ["daemon", "PATCH", '{"position":', "20}"],
    ]


def test_wait_for_an_offset_python_calls_equal_says_why_it_is_not(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    kit.seed(connector, [(FILE, {"position": 1.0})])
    with pytest.raises(AssertionError) as failure:
        kit.wait_for_offset(connector, FILE, {"position": 1}, timeout=0.2)
    assert str(failure.value).splitlines()[1:3] == [
        '  last seen: {"position": 1.0}',
        "  (equal in Python, not in Connect: 1, 1.0 and true are a Long, a Double and a Boolean)",
    ]


NEGATIVE_ZERO = (
    "(-0.0 reads back as 0.0: Connect's converter reads a fraction as a BigDecimal, which has no negative zero; "
    "expect 0.0)"
)


def test_an_expected_negative_zero_is_explained_as_read_back_as_zero_not_as_long_and_double(kit: OffsetsKit) -> None:
    """-0.0 and 0.0 are both Doubles: the Long/Double hint was not why they differ."""
    connector = kit.unique_name()
    kit.seed(connector, [(FILE, {"position": -0.0})])  # written as -0.0, read back as 0.0

    with pytest.raises(AssertionError) as failure:
        kit.assert_offsets(connector, [(FILE, {"position": -0.0})])
    assert str(failure.value).splitlines()[1:] == [
        '  partition {"filename": "/data/in.txt"}:',
        '    expected {"position": -0.0}',
        '    actual   {"position": 0.0}',
        f"    {NEGATIVE_ZERO}",
    ]

    with pytest.raises(AssertionError) as failure:
        kit.wait_for_offset(connector, FILE, {"position": -0.0}, timeout=0.2)
    assert str(failure.value).splitlines()[1:3] == ['  last seen: {"position": 0.0}', f"  {NEGATIVE_ZERO}"]


def test_a_type_difference_beside_a_negative_zero_gets_both_hints(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    kit.seed(connector, [(FILE, {"position": 1.0, "delta": -0.0})])
    with pytest.raises(AssertionError) as failure:
        kit.assert_offsets(connector, [(FILE, {"position": 1, "delta": -0.0})])
    assert str(failure.value).splitlines()[-2:] == [
        "    (equal in Python, not in Connect: 1, 1.0 and true are a Long, a Double and a Boolean)",
        f"    {NEGATIVE_ZERO}",
    ]


def test_wait_for_an_unknown_connector_says_the_daemon_does_not_know_it(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    with pytest.raises(AssertionError) as failure:
        kit.wait_for_offset(connector, FILE, {"position": 1}, timeout=0.1)
    assert f"last seen: none (the daemon does not know connector {connector!r} (404))" in str(failure.value)
    assert "(no change of this partition in the daemon's history)" in str(failure.value)


def test_history_lists_a_connectors_changes_oldest_first(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    for position in (1, 2, 3):
        kit.seed(connector, [(FILE, {"position": position})])
    kit.wait_for_offset(connector, FILE, lambda _: len(kit.history(connector)) == 3, timeout=10)

    changes = kit.history(connector)

    assert [c["offset"] for c in changes] == [{"position": 1}, {"position": 2}, {"position": 3}]
    assert {(c["origin"], c["operation"]) for c in changes} == {("daemon", "PATCH")}
    assert kit.history(kit.unique_name("never-seen")) == []


def test_unique_names_carry_the_context_and_never_repeat() -> None:
    names = {unique_name("file-src", "test_resume[kafka mode]") for _ in range(200)}
    assert len(names) == 200
    assert all(n.startswith("file-src-test_resume-kafka-mode-") for n in names)


def test_a_prefix_is_cleaned_as_the_context_is_so_the_name_works_in_a_url(kit: OffsetsKit) -> None:
    """ "orders src/1" gave a name the daemon refuses in a URL (an encoded '/')."""
    connector = kit.unique_name("orders src/1")
    assert connector.startswith("orders-src-1-test_a_prefix_is_cleaned"), connector
    kit.seed(connector, [(FILE, {"position": 1})])
    kit.assert_offsets(connector, [(FILE, {"position": 1})])


def test_an_expected_partition_named_twice_is_refused_not_decided_by_the_last(kit: OffsetsKit) -> None:
    """The second entry won and the contradiction passed silently."""
    connector = kit.unique_name()
    kit.seed(connector, [(FILE, {"position": 2})])
    with pytest.raises(ValueError, match=r'expected names partition \{"filename":"/data/in.txt"\} more than once'):
        kit.assert_offsets(connector, [(FILE, {"position": 1}), (FILE, {"position": 2})])


def test_closing_the_kit_resets_every_connector_it_named_or_seeded(embedded_daemon: DaemonProcess) -> None:
    with OffsetsKit(embedded_daemon.url) as kit:
        seeded = kit.unique_name()
        kit.seed(seeded, [(FILE, {"position": 5})])
        named_then_written = kit.unique_name()
        kit.client.alter(named_then_written, {"offsets": [{"partition": FILE, "offset": {"p": 1}}]}, create=True)
        by_hand = unique_name("not-the-kits")
        kit.client.alter(by_hand, {"offsets": [{"partition": FILE, "offset": {"p": 1}}]}, create=True)

    with OffsetsKit(embedded_daemon.url) as after:
        assert after.offsets(seeded) == [] and after.offsets(named_then_written) == []
        assert after.offsets(by_hand) == [{"partition": FILE, "offset": {"p": 1}}]


def _reads_to_the_end(url: str) -> float:
    """How many ``GET /connectors`` the daemon answered, from its own metrics: the kit sends that
    route only to have the daemon read its log to the end before it acts."""
    series = 'connect_offsets_http_requests_total{method="GET",route="/connectors",status="200"} '
    lines = httpx.get(f"{url}/metrics").text.splitlines()
    return next((float(line.removeprefix(series)) for line in lines if line.startswith(series)), 0.0)


def test_resetting_what_the_kit_touched_reads_the_log_to_its_end_once_not_once_per_connector(
    embedded_daemon: DaemonProcess,
) -> None:
    """Each reset read the whole log again before its DELETE; one read before them all sees every
    write acknowledged before the teardown, which is what the resets need."""
    with OffsetsKit(embedded_daemon.url) as kit:
        seeded = [kit.unique_name() for _ in range(3)]
        for connector in seeded:
            kit.seed(connector, [(FILE, {"position": 5})])
        kit.unique_name("named-only")
        before = _reads_to_the_end(embedded_daemon.url)

        assert kit.reset_touched() == []

        assert _reads_to_the_end(embedded_daemon.url) - before == 1
        assert all(kit.offsets(connector) == [] for connector in seeded)


def test_a_connector_that_cannot_be_reset_is_reported_not_raised(embedded_daemon: DaemonProcess) -> None:
    """A teardown must not hide a test's own failure: a claimed connector refuses the reset, and
    closing the kit names it instead of raising."""
    kit = OffsetsKit(embedded_daemon.url)
    claimed = kit.unique_name("claimed")
    kit.seed(claimed, [(FILE, {"position": 1})])
    claim = kit.client.claim(claimed, owner="a-running-job")

    assert kit.close() == [claimed]
    assert list(kit.refusals) == [claimed]  # with the daemon's error, for the teardown's report

    with OffsetsKit(embedded_daemon.url) as after:
        assert after.offset(claimed, FILE) == {"position": 1}
        after.client.release(claimed, claim["epoch"])


def test_the_async_client_reads_what_the_kit_seeded(kit: OffsetsKit) -> None:
    connector = kit.unique_name()
    kit.seed(connector, [(FILE, {"position": 8})])

    async def read() -> list[dict[str, object]]:
        async with kit.async_client() as client:
            return await client.offsets(connector)

    assert asyncio.run(read()) == [{"partition": FILE, "offset": {"position": 8}}]


@pytest.mark.slow  # a daemon of its own: restoring a whole log must not touch the session daemon's
def test_restore_puts_a_whole_log_back_byte_for_byte(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    daemon = daemon_factory()
    with OffsetsKit(daemon.url) as kit:
        kit.seed("kept", [(FILE, {"position": 1}), ({"filename": "b"}, {"position": 2})])
        kit.client.request(  # a key Connect ignores, and a key whose bytes Jackson would not write
            "POST",
            "/offsets/records",
            params={"allow_malformed": "true"},
            json={
                "records": [
                    {"key": base64.b64encode(b"not json").decode(), "value": base64.b64encode(b"{}").decode()},
                    {
                        "key": base64.b64encode(b'[ "kept", {"filename":"c"} ]').decode(),
                        "value": base64.b64encode(b'{"position":3}').decode(),
                    },
                ]
            },
        )
        before = kit.snapshot()
        before.save(tmp_path / "baseline.avro")

        kit.seed("kept", [(FILE, {"position": 100}), ({"filename": "b"}, None)])
        kit.seed("added-later", [(FILE, {"position": 1})])
        written = kit.restore(before)

        assert written == 3  # position 1 back, "b" back, the later connector's key tombstoned
        assert kit.snapshot() == before
        assert len(before) == 4 and before.connectors == {"kept"}
        assert kit.offsets("added-later") == []
        assert LogSnapshot.load(tmp_path / "baseline.avro") == before
        assert kit.restore(before) == 0  # nothing left to change


@pytest.mark.slow  # a daemon of its own: restoring a whole log must not touch the session daemon's
def test_a_restore_is_not_undone_by_the_reset_of_what_the_test_seeded(daemon_factory: DaemonFactory) -> None:
    """docs/testing.md's ``same_offsets_for_every_test``: the restore runs first, then the kit resets
    the connectors the test seeded. That reset deleted a baseline connector the restore had put back."""
    daemon = daemon_factory()
    with OffsetsKit(daemon.url) as kit:
        kit.client.alter("baseline-src", {"offsets": [{"partition": FILE, "offset": {"position": 100}}]}, create=True)
        baseline = kit.snapshot()
        kit.seed("baseline-src", [(FILE, {"position": 500})])  # the test changes a shared connector
        kit.restore(baseline)
        assert kit.reset_touched() == []  # the kit's teardown
        kit.assert_offsets("baseline-src", [(FILE, {"position": 100})])


def test_an_empty_connector_name_is_refused_by_the_kit_not_as_a_wrong_url(kit: OffsetsKit) -> None:
    with pytest.raises(ValueError, match=r"^a connector name is a non-empty string, got ''$"):
        kit.seed("", [(FILE, {"position": 1})])


def test_a_seed_the_daemon_refuses_leaves_nothing_for_the_teardown_to_reset(kit: OffsetsKit) -> None:
    """A 400 wrote nothing: the end of the test used to try to reset it, fail too, and report
    "not reset (running, claimed, or the daemon is gone)", none of which was the cause."""
    with pytest.raises(ApiError) as refused:
        kit.seed(
            kit.unique_name("sink"), [({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 1})], kind="sink"
        )
    assert refused.value.status == 400  # no sink groups on the embedded log
    assert kit.reset_touched() == []
