"""Claims on Kafka: a newer claim made through ANOTHER daemon fences the older writer at the broker.

Two KafkaOffsetLog instances stand for two daemons sharing one offsets topic on the real broker.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from emulator.logs.kafka.offsets_log import KafkaOffsetLog
from emulator.model.claims import Fence, Fenced
from emulator.server.errors import status_of
from tests.fixtures.broker import TANSU_TAIL_FETCH_WAIT_MS, TansuBroker

pytestmark = pytest.mark.kafka


@pytest.fixture
def daemons(kafka_broker: TansuBroker) -> Iterator[Callable[[str], KafkaOffsetLog]]:
    logs: list[KafkaOffsetLog] = []

    def make(topic: str) -> KafkaOffsetLog:
        log = KafkaOffsetLog(kafka_broker.bootstrap, topic, partitions=3, tail_fetch_wait_ms=TANSU_TAIL_FETCH_WAIT_MS)
        log.open()
        logs.append(log)
        return log

    yield make
    for log in logs:
        log.close()


def values_in_topic(broker: TansuBroker, topic: str, settle_s: float = 1.5) -> list[bytes | None]:
    """Every value stored, as a read_uncommitted reader (Connect's default) sees it."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"raw-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    values: list[bytes | None] = []
    deadline = time.monotonic() + settle_s
    try:
        while time.monotonic() < deadline:
            values.extend(m.value() for m in consumer.consume(500, 0.2) if m.error() is None)
    finally:
        consumer.close()
    return values


def key(connector: str) -> bytes:
    return f'["{connector}",{{"filename":"/in.txt"}}]'.encode()


@pytest.mark.slow
def test_a_claim_through_another_daemon_fences_the_older_writer(
    kafka_broker: TansuBroker, daemons: Callable[[str], KafkaOffsetLog]
) -> None:
    topic = f"claims-{uuid.uuid4().hex[:8]}"
    a, b = daemons(topic), daemons(topic)
    old = a.claim("c", "spark-run-1")
    assert old.epoch == 1
    assert len(a.append_fenced(Fence("c", old.epoch), [(key("c"), b'{"position":10}')])) == 1

    new = b.claim("c", "spark-run-2")
    assert new.epoch == 2, "epochs are shared by every daemon on the topic"
    assert a.current_claim("c") == new

    with pytest.raises(Fenced) as fenced:
        a.append_fenced(Fence("c", old.epoch), [(key("c"), b'{"position":5}')])
    assert status_of(fenced.value) == 409, "the API answers a fenced write with 409"
    assert b.append_fenced(Fence("c", new.epoch), [(key("c"), b'{"position":20}')])

    stored = values_in_topic(kafka_broker, topic)
    assert b'{"position":5}' not in stored, "the fenced writer's record never reached the topic"
    assert stored == [b'{"position":10}', b'{"position":20}']


@pytest.mark.slow
def test_a_commit_through_a_daemon_that_does_not_hold_the_claim_is_refused(
    daemons: Callable[[str], KafkaOffsetLog],
) -> None:
    topic = f"claims-{uuid.uuid4().hex[:8]}"
    a, b = daemons(topic), daemons(topic)
    claim = a.claim("c", "x")
    with pytest.raises(Fenced, match="made through another daemon"):
        b.append_fenced(Fence("c", claim.epoch), [(key("c"), b"{}")])


@pytest.mark.slow
def test_release_ends_the_claim_and_epochs_keep_counting(daemons: Callable[[str], KafkaOffsetLog]) -> None:
    topic = f"claims-{uuid.uuid4().hex[:8]}"
    a = daemons(topic)
    assert a.current_claim("c") is None, "no claims topic yet: nobody ever claimed"
    claim = a.claim("c", "x")
    assert a.release(Fence("c", claim.epoch)) is True
    assert a.release(Fence("c", claim.epoch)) is False
    assert a.current_claim("c") is None
    with pytest.raises(Fenced):
        a.append_fenced(Fence("c", claim.epoch), [(key("c"), b"{}")])
    assert a.claim("c", "y").epoch == 2


@pytest.mark.slow
def test_a_restarted_daemon_sees_the_current_claim(daemons: Callable[[str], KafkaOffsetLog]) -> None:
    topic = f"claims-{uuid.uuid4().hex[:8]}"
    first = daemons(topic)
    claim = first.claim("c", "x")
    first.close()
    again = daemons(topic)
    assert again.current_claim("c") == claim
    assert again.claim("c", "z").epoch == claim.epoch + 1
