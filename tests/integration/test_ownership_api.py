"""One owner per connector over the daemon's API: claims fence older writers (409, nothing written),
unclaimed writes are refused while someone holds the connector, stale sequences are dropped, and two
daemons with two racing writers on one Kafka topic end with exactly one winner and no offset moving back.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from emulator.client.errors import FencedError, NotStoppedError
from emulator.client.http import Auth, OffsetsClient
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory, DaemonProcess

PARTITION = {"filename": "/data/in.txt"}


def body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": PARTITION, "offset": {"position": position}}]}


def position(client: OffsetsClient, name: str) -> int:
    [row] = client.offsets(name)
    return int(row["offset"]["position"])


def test_a_claim_fences_older_writers_and_holds_off_unclaimed_ones(embedded_daemon: DaemonProcess) -> None:
    name = f"own-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(embedded_daemon.url) as client:
        client.alter(name, body(1), create=True)
        first = client.claim(name, "spark-run-1")
        assert client.current_claim(name) == first

        with pytest.raises(NotStoppedError) as held:
            client.alter(name, body(2))
        assert "claimed by 'spark-run-1'" in held.value.message
        with pytest.raises(NotStoppedError, match="claimed by 'spark-run-1'"):
            client.alter(name, body(2), dry_run=True)  # refused by the fail-fast check alone: nothing to append
        with pytest.raises(NotStoppedError, match="claimed by 'spark-run-1'"):
            client.reset(name, dry_run=True)

        client.alter(name, body(3), auth=Auth(claim_epoch=first["epoch"]))
        second = client.claim(name, "spark-run-2")
        assert second["epoch"] == first["epoch"] + 1

        with pytest.raises(FencedError) as fenced:
            client.alter(name, body(4), auth=Auth(claim_epoch=first["epoch"]))
        assert fenced.value.status == 409
        assert position(client, name) == 3, "the fenced commit wrote nothing"

        with pytest.raises(FencedError, match=f"epoch {second['epoch'] + 5} was never issued"):
            client.alter(name, body(5), auth=Auth(claim_epoch=second["epoch"] + 5))  # not a fenced writer
        rollback = httpx.post(
            f"{embedded_daemon.url}/connectors/{name}/offsets/rollback",
            params={"to": "now"},
            headers={"Content-Type": "application/json"},
        )
        assert (rollback.status_code, rollback.headers["X-Connect-Offsets-Error"]) == (400, "claim_held")
        assert "this request takes no claim epoch: release the claim first" in rollback.json()["message"]
        assert "write with claim_epoch" not in rollback.json()["message"], "a rollback cannot present one"

        client.alter(name, body(5), auth=Auth(claim_epoch=second["epoch"]))
        client.release(name, second["epoch"])
        assert client.current_claim(name) is None
        client.alter(name, body(6), dry_run=True)
        client.alter(name, body(6))
        assert position(client, name) == 6


def test_stale_sequences_are_dropped_and_reported(embedded_daemon: DaemonProcess) -> None:
    name = f"seq-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(embedded_daemon.url) as client:
        client.alter(name, body(10), create=True, auth=Auth(sequence_source="run-a", sequence=5))
        replay = client.alter(name, body(7), auth=Auth(sequence_source="run-a", sequence=5))
        assert replay["dropped"] == [
            {"partition": PARTITION, "reason": "stale sequence 5 from source 'run-a': 5 was already applied"}
        ]
        assert position(client, name) == 10, "a replayed batch never moves the offset back"
        client.alter(name, body(12), auth=Auth(sequence_source="run-a", sequence=6))
        client.alter(name, body(13), auth=Auth(sequence_source="run-b", sequence=0))
        assert position(client, name) == 13, "a new source descriptor wins"


def raw_positions(bootstrap: str, topic: str, partitions: int, key: bytes) -> list[int]:
    """Every committed value for ``key``, in log order, as Connect's read_uncommitted reader sees them."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    found: list[int] = []
    deadline = time.monotonic() + 3
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(500, 0.2):
                if message.error() is None and message.key() == key and message.value() is not None:
                    found.append(json.loads(message.value())["position"])
    finally:
        consumer.close()
    return found


@pytest.mark.slow
@pytest.mark.kafka
def test_two_daemons_two_racing_writers_one_winner_nothing_backwards(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic = f"race-{uuid.uuid4().hex[:8]}"
    name = f"race-{uuid.uuid4().hex[:8]}"
    args = ("--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3")
    d1, d2 = daemon_factory(*args), daemon_factory(*args)
    with OffsetsClient(d1.url) as seed:
        seed.alter(name, body(100), create=True)

    barrier = threading.Barrier(2)
    results: dict[str, dict[str, Any]] = {}

    def writer(who: str, url: str) -> None:
        with OffsetsClient(url) as client:
            barrier.wait()
            try:
                claim = client.claim(name, who)
            except FencedError:  # the other claim fenced this one while it was being made
                results[who] = {"epoch": 0, "committed": [], "fenced": True}
                return
            start = position(client, name)  # the claim read the log to its end first
            committed, fenced = [], False
            for step in range(1, 21):
                try:
                    client.alter(name, body(start + step), auth=Auth(claim_epoch=claim["epoch"]))
                    committed.append(start + step)
                except FencedError:
                    fenced = True
                    break
            results[who] = {"epoch": claim["epoch"], "committed": committed, "fenced": fenced}

    threads = [
        threading.Thread(target=writer, args=("w1", d1.url)),
        threading.Thread(target=writer, args=("w2", d2.url)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert set(results) == {"w1", "w2"}, results
    winner = max(results, key=lambda w: results[w]["epoch"])
    loser = min(results, key=lambda w: results[w]["epoch"])
    assert results[winner]["fenced"] is False and len(results[winner]["committed"]) == 20
    assert results[loser]["fenced"] is True or results[loser]["committed"][-1] < results[winner]["committed"][0], (
        "the older writer either was fenced, or finished before the newer one started from its last offset"
    )

    key = f'["{name}",{{"filename":"/data/in.txt"}}]'.encode()
    history = raw_positions(kafka_broker.bootstrap, topic, 3, key)
    assert history == sorted(history), f"an offset moved backwards: {history}"
    assert history[-1] == results[winner]["committed"][-1]
    with OffsetsClient(d2.url) as client:
        assert position(client, name) == results[winner]["committed"][-1]
