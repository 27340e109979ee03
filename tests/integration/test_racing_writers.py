"""Racing writers with commit sequences, on both backends: the sequence check, the write and the
sequence's record are one critical section per connector.

Eight writers share one source descriptor and draw increasing numbers from one counter, then commit
``{"position": n}`` with sequence ``n`` to the same partition at the same time, so their requests
reach the daemon out of order. Read in LOG ORDER (the raw SQLite rows or the raw topic, not the
view), the stored value must never go back; every commit that was not applied must say so in its
own answer (``dropped``); the final value is the highest applied one.

The summary line (commits, dropped, backwards steps) is the measurement quoted in
docs/claims-and-sequences.md: ``pytest tests/integration/test_racing_writers.py -s -p no:cacheprovider``.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from emulator.client.http import Auth, OffsetsClient
from emulator.codec.keys import encode_key
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.integration.raw_log import read_topic

WRITERS = 8
COMMITS_PER_WRITER = 25
PARTITION = {"filename": "/data/racing.txt"}
SOURCE = "racing-run"


@dataclass
class Race:
    """What the writers were told: per sequence number, the daemon's answer."""

    applied: set[int] = field(default_factory=set)
    dropped: dict[int, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def race(url: str, connector: str) -> Race:
    """Eight writers, one descriptor, one counter: numbers increase, arrival order does not."""
    counter = itertools.count(1)
    take = threading.Lock()
    barrier = threading.Barrier(WRITERS)
    result = Race()

    def writer() -> None:
        with OffsetsClient(url, timeout_s=60) as client:
            barrier.wait(30)
            for _ in range(COMMITS_PER_WRITER):
                with take:
                    n = next(counter)
                body = {"offsets": [{"partition": PARTITION, "offset": {"position": n}}]}
                try:
                    answer = client.alter(connector, body, auth=Auth(sequence_source=SOURCE, sequence=n))
                except Exception as exc:  # reported by the test, never swallowed
                    result.errors.append(f"commit {n}: {exc!r}")
                    continue
                if answer.get("dropped"):
                    result.dropped[n] = answer
                else:
                    result.applied.add(n)

    threads = [threading.Thread(target=writer, name=f"racer-{i}") for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(t.is_alive() for t in threads), "a writer did not finish within 120 s"
    return result


def backwards_steps(values: list[int]) -> int:
    return sum(1 for before, after in itertools.pairwise(values) if after < before)


def check(backend: str, race_result: Race, in_log: list[int], final: int) -> None:
    """The promises of docs/claims-and-sequences.md, with the measured figures in every message."""
    seeded, written = in_log[0], in_log[1:]
    summary = (
        f"racing writers ({backend}): {WRITERS * COMMITS_PER_WRITER} commits, {len(race_result.applied)} applied, "
        f"{len(race_result.dropped)} dropped, {backwards_steps(in_log)} backwards step(s) in log order"
    )
    print(summary)
    assert seeded == 0
    assert not race_result.errors, race_result.errors
    assert backwards_steps(in_log) == 0, f"{summary}: {in_log}"
    assert sorted(written) == sorted(race_result.applied), (
        f"{summary}: every commit not applied is listed in its own answer's 'dropped', and nothing else is missing"
    )
    assert set(race_result.dropped).isdisjoint(written), f"{summary}: a commit answered as dropped reached the log"
    assert final == max(race_result.applied) == in_log[-1], summary
    for n, answer in race_result.dropped.items():
        [entry] = answer["dropped"]
        assert entry["partition"] == PARTITION
        assert f"stale sequence {n} from source {SOURCE!r}" in entry["reason"]
        message = answer["message"]
        assert "altered successfully" not in message, f"commit {n} applied nothing but says: {message}"
        assert "dropped" in message and json.dumps(PARTITION, separators=(",", ":")) in message, message


def read_sqlite(db: Path, key: bytes) -> list[int]:
    """Every stored value of ``key`` in log order, straight from the embedded log's file."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT value FROM records WHERE key = ? ORDER BY partition, offset", (key,)).fetchall()
    return [json.loads(value)["position"] for (value,) in rows]


def seed(url: str, connector: str) -> None:
    with OffsetsClient(url) as client:
        body = {"offsets": [{"partition": PARTITION, "offset": {"position": 0}}]}
        client.alter(connector, body, create=True, auth=Auth(sequence_source=SOURCE, sequence=0))


def final_position(url: str, connector: str) -> int:
    with OffsetsClient(url) as client:
        [row] = client.offsets(connector)
        return int(row["offset"]["position"])


@pytest.mark.slow
def test_racing_sequenced_writers_on_the_embedded_log(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    connector = f"race-{uuid.uuid4().hex[:8]}"
    daemon = daemon_factory("--data-dir", str(tmp_path), "--no-history")
    seed(daemon.url, connector)
    result = race(daemon.url, connector)
    in_log = read_sqlite(tmp_path / "connect-offsets.sqlite3", encode_key(connector, PARTITION))
    check("embedded", result, in_log, final_position(daemon.url, connector))


@pytest.mark.slow
@pytest.mark.kafka
def test_racing_sequenced_writers_on_kafka(kafka_broker: TansuBroker, daemon_factory: DaemonFactory) -> None:
    connector = f"race-{uuid.uuid4().hex[:8]}"
    topic = kafka_broker.unique_topic("racing")
    daemon = daemon_factory(
        "--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3"
    )
    seed(daemon.url, connector)
    result = race(daemon.url, connector)
    in_log = read_topic(kafka_broker.bootstrap, topic, 3, encode_key(connector, PARTITION))
    check("kafka", result, in_log, final_position(daemon.url, connector))
