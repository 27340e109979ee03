"""A write through the daemon is acknowledged only if a task can read it back; the good offset stays otherwise.

Issue 8 ("An acknowledged poison write"): a PATCH with a 20 MiB string offset answered 200, and the
daemon's own reader then rejected the record: GET showed ``"offset": null`` and the good offset it
replaced was gone. Here such writes are 400s naming Jackson's limit, while values *at* each limit are
written and read back by Apache Kafka 4.3.0's ``OffsetStorageReaderImpl`` (over a standalone file
exported from the daemon, and over the daemon's Kafka topic). Rollback follows the same rule.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.transfer import DaemonLocation, StandaloneLocation, TransferOptions, transfer
from emulator.transfer.progress import Progress
from tests.fixtures.daemon import DaemonProcess, KafkaDaemon
from tests.integration.connect_helpers import from_java, status, unique
from tests.oracle import JavaOracle
from tests.oracle import typed as T

TWENTY_MIB = 20 * 1024 * 1024
MAX_STRING = 20_000_000
NAME_AT_LIMIT = "\u00e9" * 25_000  # 50,000 bytes of UTF-8: Jackson's name limit counts bytes


@pytest.fixture(params=["embedded", "kafka"])
def daemon(request: pytest.FixtureRequest) -> DaemonProcess:
    if request.param == "kafka":
        request.applymarker(pytest.mark.kafka)
    found = request.getfixturevalue(f"{request.param}_daemon")
    assert isinstance(found, DaemonProcess)
    return found


def patch(daemon: DaemonProcess, connector: str, offsets: list[dict[str, Any]], **params: str) -> httpx.Response:
    body = {"offsets": offsets}
    return httpx.patch(
        f"{daemon.url}/connectors/{connector}/offsets", json=body, params={"create": "true", **params}, timeout=120
    )


def post_record(daemon: DaemonProcess, key: bytes, value: bytes, **params: str) -> httpx.Response:
    body = {"records": [{"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}]}
    return httpx.post(f"{daemon.url}/offsets/records", json=body, params=params, timeout=60)


def offsets(daemon: DaemonProcess, connector: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{daemon.url}/connectors/{connector}/offsets", timeout=60)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["offsets"]
    return found


def refused(response: httpx.Response, *words: str) -> None:
    assert response.status_code == 400, response.text[:500]
    for word in words:
        assert word in response.json()["message"], response.json()["message"][:500]


def wrap_long(n: int) -> int:
    """``BigInteger.longValue()``: the low 64 bits, signed (how Connect reads an oversized integer)."""
    n %= 1 << 64
    return n - (1 << 64) if n >= 1 << 63 else n


def test_a_poison_patch_is_a_400_and_the_good_offset_stays(daemon: DaemonProcess) -> None:
    connector = unique("poison")
    good = [{"partition": {"file": "a"}, "offset": {"position": 151}}]
    assert patch(daemon, connector, good).status_code == 200
    unparseable = status(daemon.url)["view"]["unparseable_values"]
    poison = [{"partition": {"file": "a"}, "offset": {"position": "x" * TWENTY_MIB}}]
    refused(
        patch(daemon, connector, poison),
        f"String value length ({TWENTY_MIB}) exceeds the maximum allowed ({MAX_STRING})",
    )
    assert offsets(daemon, connector) == good
    assert status(daemon.url)["view"]["unparseable_values"] == unparseable


@pytest.mark.kafka
def test_on_kafka_a_record_over_the_producers_limit_is_a_400_and_nothing_of_the_patch_is_written(
    kafka_daemon: KafkaDaemon,
) -> None:
    """librdkafka refuses a record over ``message.max.bytes`` (1,000,000) itself; a PATCH whose
    second record was too big wrote its first and answered 503 (outcome unknown), or 500 alone. A dry
    run, and an import of the same record, are refused alike."""
    connector = unique("too-big")
    good = [{"partition": {"file": "a"}, "offset": {"position": 1}}]
    assert patch(kafka_daemon, connector, good).status_code == 200
    two = [
        {"partition": {"file": "a"}, "offset": {"position": 2}},
        {"partition": {"file": "b"}, "offset": {"blob": "x" * 1_000_000}},
    ]
    for dry_run in ("true", "false"):
        refused(
            patch(kafka_daemon, connector, two, dry_run=dry_run),
            f'the record for key ["{connector}",{{"file":"b"}}]',
            "over the producer's message.max.bytes (1000000)",
            "nothing was written",
        )
    key = f'["{connector}",{{"file":"c"}}]'.encode()
    for dry_run in ("true", "false"):
        answer = post_record(kafka_daemon, key, b'{"blob":"' + b"x" * 1_000_000 + b'"}', dry_run=dry_run)
        refused(answer, "over the producer's message.max.bytes (1000000)")
    assert offsets(kafka_daemon, connector) == good


@pytest.mark.jvm
@pytest.mark.slow
def test_values_at_each_limit_are_written_and_javas_reader_reads_them_back(
    embedded_daemon: DaemonProcess, java_oracle: JavaOracle, tmp_path: Path
) -> None:
    connector = unique("at-limit")
    key_3 = f'["{connector}",{{"p":3}}]'.encode()
    longest_number = b'{"n":' + b"7" * 1000 + b"}"
    at_limits = [
        {"partition": {"p": 1}, "offset": {"s": "x" * MAX_STRING}},
        {"partition": {"p": 2}, "offset": {NAME_AT_LIMIT: 1}},
    ]
    for change in at_limits:
        answer = patch(embedded_daemon, connector, [change])
        assert answer.status_code == 200, answer.text[:500]
    assert post_record(embedded_daemon, key_3, longest_number).status_code == 200

    exported = tmp_path / "exported.offsets"
    options = TransferOptions(connectors=frozenset({connector}))
    transfer(DaemonLocation(embedded_daemon.url), StandaloneLocation(exported), options, Progress(enabled=False))
    partitions = [T.jmap({"p": T.long(p)}) for p in (1, 2, 3)]
    read, _ = java_oracle.file_offsets_read(str(exported), connector, partitions)
    assert [from_java(o) for o in read] == [
        {"s": "x" * MAX_STRING},
        {NAME_AT_LIMIT: 1},
        {"n": wrap_long(int("7" * 1000))},
    ]

    # One past each limit: refused by the daemon, and indeed unreadable for Java.
    too_long, name_too_long = java_oracle.json_encode(
        [T.jmap({"s": "x" * (MAX_STRING + 1)}), T.jmap({NAME_AT_LIMIT + "a": T.long(1)})]
    )
    too_many_digits = b'{"n":' + b"7" * 1001 + b"}"
    verdicts = java_oracle.offset_check([too_long, name_too_long, too_many_digits])
    assert [(v["readable"], v["stage"]) for v in verdicts] == [(False, "converter")] * 3
    refused(
        patch(embedded_daemon, connector, [{"partition": {"p": 1}, "offset": {"s": "x" * (MAX_STRING + 1)}}]),
        f"String value length ({MAX_STRING + 1}) exceeds the maximum allowed ({MAX_STRING})",
    )
    refused(
        patch(embedded_daemon, connector, [{"partition": {"p": 2}, "offset": {NAME_AT_LIMIT + "a": 2}}]),
        "Name length (50001) exceeds the maximum allowed (50000)",
    )
    refused(post_record(embedded_daemon, key_3, too_many_digits), "Number value length (1001) exceeds")
    rows = {row["partition"]["p"]: row["offset"] for row in offsets(embedded_daemon, connector)}
    assert rows[2] == {NAME_AT_LIMIT: 1} and rows[3] == {"n": wrap_long(int("7" * 1000))}
    assert len(rows[1]["s"]) == MAX_STRING, "the values at the limits are still there, untouched"


@pytest.mark.jvm
@pytest.mark.kafka
@pytest.mark.slow
def test_a_name_at_the_limit_reaches_javas_kafka_offset_store(
    kafka_daemon: KafkaDaemon, java_oracle: JavaOracle
) -> None:
    connector = unique("kafka-at-limit")
    assert patch(kafka_daemon, connector, [{"partition": {"p": 1}, "offset": {NAME_AT_LIMIT: 7}}]).status_code == 200
    read, _ = java_oracle.offsets_read(
        kafka_daemon.bootstrap, kafka_daemon.offsets_topic, connector, [T.jmap({"p": T.long(1)})], num_partitions=7
    )
    assert [from_java(o) for o in read] == [{NAME_AT_LIMIT: 7}]


def test_a_value_under_a_key_connect_ignores_is_not_counted_as_unreadable(embedded_daemon: DaemonProcess) -> None:
    """Connect never reads a record whose key is not an offsets key, so its value is not judged: an import
    of one such record and one unreadable value under a real key counted 2 unreadable values."""
    connector = unique("ignored-key")
    body = {
        "records": [
            {"key": base64.b64encode(f'["{connector}",{{"p":1}}]'.encode()).decode(), "value": "WzFd"},  # [1]
            {"key": base64.b64encode(f"{connector}-not-a-key".encode()).decode(), "value": "WzFd"},
        ]
    }
    url = f"{embedded_daemon.url}/offsets/records"
    kept = httpx.post(url, json=body, params={"allow_malformed": "true"}, timeout=60)
    assert kept.status_code == 200, kept.text
    assert kept.json()["unreadable_values"] == 1


def test_a_rollback_does_not_write_back_a_value_no_task_can_read(embedded_daemon: DaemonProcess) -> None:
    connector = unique("rollback-poison")
    key = f'["{connector}",{{"p":1}}]'.encode()
    kept = post_record(embedded_daemon, key, b"[1]", allow_malformed="true")  # a bad producer's record, kept
    assert kept.status_code == 200 and kept.json()["unreadable_values"] == 1
    time.sleep(0.02)
    then = time.time_ns() // 1_000_000
    time.sleep(0.02)
    assert patch(embedded_daemon, connector, [{"partition": {"p": 1}, "offset": {"o": 2}}]).status_code == 200
    for dry_run in ("true", "false"):
        answer = httpx.post(
            f"{embedded_daemon.url}/connectors/{connector}/offsets/rollback",
            params={"to": str(then), "dry_run": dry_run},
            headers={"content-type": "application/json"},  # writes need it (a 415 otherwise), bodies or not
            timeout=60,
        )
        refused(answer, f"Rolling back {connector} would write 1 record value(s) Connect cannot read back")
        assert "Offsets must be specified as a Map" in answer.json()["message"]
    assert offsets(embedded_daemon, connector) == [{"partition": {"p": 1}, "offset": {"o": 2}}]
