"""A request's partition names the partition Connect would hold after its converter's round trip.

Connect normalizes a PATCH's partition by serializing it and parsing it back (docs/protocol.md
§4.5), and reads every stored key the same way (§1.6): ``-0.0`` reads back as ``0.0``, a number
beyond a double's range (``1e400``) is an infinite double written as the string ``"Infinity"``. So
a request's ``{"k":-0.0}`` is the stored partition ``{"k":0.0}``: PATCH must write it under that
partition's raw key (not add a second key that no task looks up), a dry run must call the key
existing, and the history filter must find its records. A *new* partition is written as Connect's
PATCH writes it, after that round trip (``{"k":0.0}``): a key holding ``-0.0`` is one Connect's GET,
which looks up what it read back, never finds (``tests/integration/test_unusual_records.py`` checks
the bytes against Java's).
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import httpx
import pytest

from emulator.client.backing_store import DaemonOffsetBackingStore
from tests.fixtures.daemon import DaemonProcess


@pytest.fixture
def name() -> str:
    return f"readback-{uuid.uuid4().hex[:10]}"


def patch(daemon: DaemonProcess, connector: str, raw_body: str, **params: str) -> httpx.Response:
    """The body as text: ``-0.0`` and ``1e400`` must reach the daemon as written here."""
    response = httpx.patch(
        f"{daemon.url}/connectors/{connector}/offsets",
        content=raw_body.encode(),
        headers={"Content-Type": "application/json"},
        params=params,
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response


def one(partition: str, offset: str) -> str:
    return f'{{"offsets":[{{"partition":{partition},"offset":{offset}}}]}}'


def raw_records(daemon: DaemonProcess, connector: str) -> list[tuple[str, str | None]]:
    """The connector's live records in the log, as text."""
    body = httpx.get(f"{daemon.url}/offsets/records", params={"connector": connector}, timeout=30).json()
    return [
        (
            base64.b64decode(r["key"]).decode(),
            None if r["value"] is None else base64.b64decode(r["value"]).decode(),
        )
        for r in body["records"]
    ]


def task_reads(daemon: DaemonProcess, key: str) -> bytes | None:
    """What a task's ``offset(partition)`` reads: a lookup by exact key bytes."""
    store = DaemonOffsetBackingStore(daemon.url)
    store.start()
    try:
        return store.get([key.encode()]).result(30)[key.encode()]
    finally:
        store.stop()


def history(daemon: DaemonProcess, connector: str, partition: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{daemon.url}/connectors/{connector}/offsets/history", params={"partition": partition}, timeout=30
    )
    assert response.status_code == 200, response.text
    changes: list[dict[str, Any]] = response.json()["changes"]
    return changes


def test_negative_zero_rewrites_the_stored_zero_partition(embedded_daemon: DaemonProcess, name: str) -> None:
    patch(embedded_daemon, name, one('{"k":0.0}', '{"v":1}'), create="true")
    patch(embedded_daemon, name, one('{"k":-0.0}', '{"v":2}'))
    key = f'["{name}",{{"k":0.0}}]'
    assert raw_records(embedded_daemon, name) == [(key, '{"v":2}')], "one live key, the one Connect reads"
    assert task_reads(embedded_daemon, key) == b'{"v":2}'
    offsets = httpx.get(f"{embedded_daemon.url}/connectors/{name}/offsets", timeout=30).json()["offsets"]
    assert offsets == [{"partition": {"k": 0.0}, "offset": {"v": 2}}]


def test_a_dry_run_calls_the_zero_key_existing_for_negative_zero(embedded_daemon: DaemonProcess, name: str) -> None:
    patch(embedded_daemon, name, one('{"k":0.0}', '{"v":1}'), create="true")
    [record] = patch(embedded_daemon, name, one('{"k":-0.0}', '{"v":2}'), dry_run="true").json()["records"]
    assert (record["key"], record["value"], record["existing_key"]) == (f'["{name}",{{"k":0.0}}]', '{"v":2}', True)


def test_a_new_negative_zero_is_written_as_connects_patch_writes_it_and_then_found_by_either_zero(
    embedded_daemon: DaemonProcess, name: str
) -> None:
    patch(embedded_daemon, name, one('{"k":-0.0}', '{"v":1}'), create="true")
    key = f'["{name}",{{"k":0.0}}]'  # Connect's PATCH normalizes {k=-0.0} through its converter
    assert raw_records(embedded_daemon, name) == [(key, '{"v":1}')]
    for partition in ('{"k":-0.0}', '{"k":0.0}'):
        [record] = patch(embedded_daemon, name, one(partition, '{"v":2}'), dry_run="true").json()["records"]
        assert (record["key"], record["existing_key"]) == (key, True), partition
    patch(embedded_daemon, name, one('{"k":0.0}', '{"v":3}'))
    assert raw_records(embedded_daemon, name) == [(key, '{"v":3}')]


def test_zero_and_negative_zero_in_one_body_are_one_partition(embedded_daemon: DaemonProcess, name: str) -> None:
    body = '{"offsets":[{"partition":{"k":0.0},"offset":{"v":1}},{"partition":{"k":-0.0},"offset":{"v":2}}]}'
    patch(embedded_daemon, name, body, create="true")
    assert raw_records(embedded_daemon, name) == [(f'["{name}",{{"k":0.0}}]', '{"v":2}')], "the last entry wins"


def test_the_history_filter_finds_zero_by_negative_zero(embedded_daemon: DaemonProcess, name: str) -> None:
    patch(embedded_daemon, name, one('{"k":0.0}', '{"v":1}'), create="true")
    patch(embedded_daemon, name, one('{"k":-0.0}', '{"v":2}'))
    for partition in ('{"k":-0.0}', '{"k":0.0}'):
        changes = history(embedded_daemon, name, partition)
        assert [c["offset"] for c in changes] == [{"v": 2}, {"v": 1}], partition


def test_a_number_beyond_a_double_finds_the_stored_infinity(embedded_daemon: DaemonProcess, name: str) -> None:
    patch(embedded_daemon, name, one('{"k":1e400}', '{"v":1}'), create="true")
    key = f'["{name}",{{"k":"Infinity"}}]'
    assert raw_records(embedded_daemon, name) == [(key, '{"v":1}')]
    for partition in ('{"k":1e400}', '{"k":"Infinity"}'):
        [record] = patch(embedded_daemon, name, one(partition, '{"v":2}'), dry_run="true").json()["records"]
        assert (record["key"], record["existing_key"]) == (key, True), partition
    patch(embedded_daemon, name, one('{"k":1e400}', '{"v":2}'))
    assert raw_records(embedded_daemon, name) == [(key, '{"v":2}')]
    assert [c["offset"] for c in history(embedded_daemon, name, '{"k":1e400}')] == [{"v": 2}, {"v": 1}]


def test_commit_sequences_count_negative_zero_as_zero(embedded_daemon: DaemonProcess, name: str) -> None:
    sequenced = {"sequence_source": "run-a"}
    patch(embedded_daemon, name, one('{"k":0.0}', '{"v":5}'), create="true", sequence="5", **sequenced)
    answer = patch(embedded_daemon, name, one('{"k":-0.0}', '{"v":3}'), sequence="3", **sequenced).json()
    assert [d["partition"] for d in answer["dropped"]] == [{"k": -0.0}], "a stale commit of the same partition"
    assert raw_records(embedded_daemon, name) == [(f'["{name}",{{"k":0.0}}]', '{"v":5}')]
