"""Records nested as deep as Jackson reads: the daemon takes every record Java takes, and drops none
around them.

Apache Kafka 4.3.0's ``JsonConverter`` reads keys and values with Jackson's default
``StreamReadConstraints``: up to 1,000 levels of nesting (docs/protocol.md §9.1). A key nested 600
levels is therefore a partition of its connector for Connect (``processPartitionKey`` looks only at
the outer list), while Python's recursion limit (about 1,000 frames, several per level) stopped the
daemon halfway there: the reader's whole batch failed, was retried and dropped, and the valid record
after the deep one was lost (QA D2/D8). Here Java's own ``KafkaOffsetBackingStore`` and
``OffsetStorageReaderImpl`` read the same topic, and what Connect's GET lists is compared with the
daemon's.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from emulator.codec.jackson_reader import loads_lenient
from emulator.codec.jackson_writer import dumps
from tests.fixtures.broker import TansuBroker
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.integration.connect_helpers import eventually, kafka_daemon_args, status, unique
from tests.oracle import JavaOracle

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]


def deep_key(connector: str, depth: int) -> bytes:
    """``[connector, {"a": [[…1…]]}]`` nested ``depth`` levels, the outer list and the map included."""
    inner = depth - 2
    return f'["{connector}",{{"a":'.encode() + b"[" * inner + b"1" + b"]" * inner + b"}]"


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def deep_value(depth: int) -> bytes:
    """``{"pos": [[…]]}`` nested ``depth`` levels, the outer map included."""
    inner = depth - 1
    return b'{"pos":' + b"[" * inner + b"]" * inner + b"}"


@pytest.mark.slow
def test_deeply_nested_records_within_jacksons_limit_drop_nothing_and_list_as_connect_lists(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic = kafka_broker.unique_topic("deep-records")
    kafka_broker.create_topic(topic, 1)
    ok, deep_600, deep_1000, deep_value_1000, too_deep = (
        unique("ok"),
        unique("deep-600"),
        unique("deep-1000"),
        unique("deep-value"),
        unique("too-deep"),
    )
    records = [
        (f'["{ok}",{{"before":1}}]'.encode(), b'{"pos":1}'),
        (deep_key(deep_600, 600), b'{"pos":1}'),
        (f'["{ok}",{{"between":1}}]'.encode(), b'{"pos":2}'),
        (deep_key(deep_1000, 1000), b'{"pos":1}'),  # Jackson's limit exactly
        (f'["{deep_value_1000}",{{"a":1}}]'.encode(), deep_value(1000)),
        (deep_key(too_deep, 1001), b'{"pos":1}'),  # one past it: not JSON for Connect
        (f'["{ok}",{{"after":1}}]'.encode(), b'{"pos":3}'),
    ]
    # All in one Kafka partition, in this order: one batch for the reader, as in the QA's topic.
    kafka_broker.produce_raw(topic, [(k, v, 0) for k, v in records])
    daemon = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, 1))

    view = eventually(lambda: status(daemon.url)["view"], lambda v: v["records_applied"] >= len(records))
    assert view["records_applied"] == len(records), "each record applied once, none retried"
    assert view["skipped_keys"] == {"not-json": 1}, "only the key past Jackson's limit is skipped, as Connect skips it"
    assert status(daemon.url)["reader"]["records_dropped"] == 0

    # Connect's listing, from Java: every key within the limit names a partition of its connector.
    names = [ok, deep_600, deep_1000, deep_value_1000, too_deep]
    java = java_oracle.connect_listing(kafka_broker.bootstrap, topic, names, num_partitions=1)
    assert java[too_deep] == {"partitions": [], "offsets": []}
    assert [len(java[name]["partitions"]) for name in (deep_600, deep_1000, deep_value_1000)] == [1, 1, 1]
    client = daemon.client()
    assert client.connectors() == sorted(names[:4])

    def listed(connector: str) -> list[list[str | None]]:
        """The daemon's GET as sorted ``[partition, offset]`` JSON texts, Java's form."""
        response = httpx.get(f"{daemon.url}/connectors/{connector}/offsets", timeout=30)
        assert response.status_code == 200, response.text[:500]
        rows = loads_lenient(response.content)["offsets"]
        return sorted(
            [dumps(row["partition"]).decode(), None if row["offset"] is None else dumps(row["offset"]).decode()]
            for row in rows
        )

    # Every ok partition is there, the one after the deep keys included, with the value Java reads.
    assert listed(ok) == java[ok]["offsets"]
    assert sorted(offset for _, offset in java[ok]["offsets"]) == ['{"pos":1}', '{"pos":2}', '{"pos":3}']
    # A partition holding a list is one of its connector's, but Connect's reader refuses to look it
    # up (validateFormat), so its GET lists nothing for it; nor does the daemon's.
    for connector in (deep_600, deep_1000):
        assert java[connector]["offsets"] == []
        assert listed(connector) == []
    # A value nested 1,000 levels parses, and validateFormat refuses it: listed with null.
    assert java[deep_value_1000]["offsets"] == []
    assert listed(deep_value_1000) == [['{"a":1}', None]]

    log_text = daemon.log_path.read_text(errors="replace")
    assert "sink failed" not in log_text and "RecursionError" not in log_text


def test_deep_records_imported_into_the_embedded_log_are_listed_exported_and_archived_with_those_around_them(
    embedded_daemon: DaemonProcess,
) -> None:
    ok, deep, deep_value_1000 = unique("ok-embedded"), unique("deep-embedded"), unique("deep-value-embedded")
    records = [
        (f'["{ok}",{{"before":1}}]'.encode(), b'{"pos":1}'),
        (deep_key(deep, 1000), b'{"pos":1}'),
        (f'["{deep_value_1000}",{{"a":1}}]'.encode(), deep_value(1000)),
        (f'["{ok}",{{"after":1}}]'.encode(), b'{"pos":2}'),
    ]
    body = {"records": [{"key": b64(k), "value": b64(v)} for k, v in records]}
    imported = httpx.post(
        f"{embedded_daemon.url}/offsets/records", params={"allow_malformed": "true"}, json=body, timeout=60
    )
    assert imported.status_code == 200, imported.text[:500]
    assert imported.json()["written"] == len(records)
    assert imported.json()["unreadable_values"] == 1  # the value validateFormat refuses

    client = embedded_daemon.client()
    assert {ok, deep, deep_value_1000} <= set(client.connectors())
    assert sorted(dumps(row["partition"]).decode() for row in client.offsets(ok)) == ['{"after":1}', '{"before":1}']
    assert client.offsets(deep) == []  # Connect's reader refuses a partition holding a list
    assert client.offsets(deep_value_1000) == [{"partition": {"a": 1}, "offset": None}]

    exported = httpx.get(f"{embedded_daemon.url}/offsets/records", params={"connector": [ok, deep]}, timeout=60)
    assert exported.status_code == 200, exported.text[:500]
    assert sorted(base64.b64decode(r["key"]) for r in exported.json()["records"]) == sorted(
        k for k, _ in records if not k.startswith(f'["{deep_value_1000}"'.encode())
    )

    # The archive takes the deep records and goes on: the change after them is in the history.
    def history(connector: str) -> httpx.Response:
        return httpx.get(f"{embedded_daemon.url}/connectors/{connector}/offsets/history", timeout=30)

    changes = eventually(lambda: history(ok).json()["changes"], lambda found: len(found) == 2)
    assert sorted(json.dumps(change["partition"]) for change in changes) == ['{"after": 1}', '{"before": 1}']
    assert history(deep).status_code == 200

    # Quoting the deep partition in an audit line, a diff or the CLI's reading of a page takes any depth:
    # a DELETE's dry run answered 500 (RecursionError in the audit's list of partitions), and the CLI's
    # `history` of the connector ended in a traceback.
    dry_run = httpx.delete(f"{embedded_daemon.url}/connectors/{deep}/offsets", params={"dry_run": "true"}, timeout=30)
    assert dry_run.status_code == 200, dry_run.text[:500]
    listed = run_cli("--url", embedded_daemon.url, "history", deep, "--json")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert len(json.loads(listed.stdout)["changes"]) == 1
