"""The one Kafka topic reader (offsets log, claims, Connect's topics), against the session's Tansu.

``read_to_end`` is Connect's ``readToEnd()``: it returns only once every record that was in the
topic when it was called has been *applied* by the sink, and a reader that cannot get there in time
is a ``LogUnavailable`` that says so, never a hang. A sink that keeps failing on a batch is retried,
then given its records one at a time; those it still fails on are counted as dropped and logged at
ERROR with their coordinates.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

import emulator.logs.kafka.reader as kafka_reader
from emulator.logs.kafka.config import DEFAULT_TAIL_FETCH_WAIT_MS, KafkaClientConfig
from emulator.logs.kafka.reader import TopicReader
from emulator.model.errors import LogUnavailable
from emulator.model.records import LogRecord
from tests.fixtures.broker import TANSU_TAIL_FETCH_WAIT_MS, TansuBroker

pytestmark = pytest.mark.kafka

WAIT_S = 15.0


class GatedSink:
    """Applies batches only while the gate is open, so a test controls when records are applied."""

    def __init__(self) -> None:
        self.applied: list[LogRecord] = []
        self.gate = threading.Event()
        self.gate.set()
        self._lock = threading.Lock()

    def __call__(self, batch: Sequence[LogRecord]) -> None:
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        with self._lock:
            self.applied.extend(batch)

    def keys(self) -> list[bytes | None]:
        with self._lock:
            return [r.key for r in self.applied]


@pytest.fixture
def make_reader(kafka_broker: TansuBroker) -> Iterator[Callable[..., TopicReader]]:
    """Readers on the session broker, each closed after the test."""
    readers: list[TopicReader] = []

    def make(topic: str, **kwargs: object) -> TopicReader:
        clients = KafkaClientConfig(
            kafka_broker.bootstrap, {}, "a reader test", tail_fetch_wait_ms=TANSU_TAIL_FETCH_WAIT_MS
        )
        reader = TopicReader(clients, topic, clients.create("admin", AdminClient), **kwargs)
        readers.append(reader)
        return reader

    yield make
    for reader in readers:
        reader.close()


@pytest.mark.slow
def test_read_to_end_returns_only_once_a_record_written_before_the_call_is_applied(
    kafka_broker: TansuBroker, make_reader: Callable[..., TopicReader], topic_name: str
) -> None:
    kafka_broker.create_topic(topic_name, 2, {"cleanup.policy": "compact"})
    sink = GatedSink()
    reader = make_reader(topic_name)
    reader.start(sink)
    assert reader.wait_caught_up(WAIT_S)

    sink.gate.clear()  # the next batch is fetched but not applied until the gate opens
    kafka_broker.produce_raw(topic_name, [(b"late", b"1", 1)])
    returned = threading.Event()
    failures: list[BaseException] = []

    def read_to_end() -> None:
        try:
            reader.read_to_end(WAIT_S)
            returned.set()
        except BaseException as exc:
            failures.append(exc)

    waiter = threading.Thread(target=read_to_end)
    waiter.start()
    assert not returned.wait(1.0), "read_to_end returned before the record was applied"
    assert sink.keys() == []

    sink.gate.set()
    waiter.join(WAIT_S)
    assert failures == []
    assert returned.is_set()
    assert sink.keys() == [b"late"]  # applied by the time read_to_end returned
    assert reader.progress().positions == {0: 0, 1: 1}


def tail_delays(broker: TansuBroker, reader: TopicReader, topic: str, count: int = 4) -> list[float]:
    """Seconds from producing each record to its delivery, one record at a time."""
    sink = GatedSink()
    reader.start(sink)
    assert reader.wait_caught_up(WAIT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, key=b"warm-up", value=b"v", partition=0)  # metadata and connection first
    assert producer.flush(WAIT_S) == 0
    while not sink.keys():
        time.sleep(0.002)
    delays = []
    for n in range(count):
        key, started = b"d%d-%d" % (n, time.monotonic_ns()), time.monotonic()
        producer.produce(topic, key=key, value=b"v", partition=0)
        assert producer.flush(WAIT_S) == 0
        while sink.keys().count(key) == 0:
            assert time.monotonic() - started < WAIT_S, "the record was never delivered"
            time.sleep(0.002)
        delays.append(time.monotonic() - started)
    return sorted(delays)


@pytest.mark.slow
def test_the_tail_waits_at_the_broker_as_long_as_its_clients_say(
    kafka_broker: TansuBroker, make_reader: Callable[..., TopicReader], topic_name: str
) -> None:
    """Tansu holds every fetch for its whole wait, so there the wait shows as delivery delay: by
    default half a second (a Kafka broker answers at once; the wait only spaces an idle reader's
    fetches, as Connect's workers space theirs), 10 ms as the tests' daemons are told."""
    kafka_broker.create_topic(topic_name, 1, {"cleanup.policy": "compact"})
    short = tail_delays(kafka_broker, make_reader(topic_name), topic_name)
    default_clients = KafkaClientConfig(kafka_broker.bootstrap, {}, "a reader test")
    assert default_clients.tail_fetch_wait_ms == DEFAULT_TAIL_FETCH_WAIT_MS == "500"
    reader = TopicReader(default_clients, topic_name, default_clients.create("admin", AdminClient))
    try:
        patient = tail_delays(kafka_broker, reader, topic_name)
    finally:
        reader.close()
    assert short[len(short) // 2] < 0.1, f"10 ms tail: delivered after {short} s"
    assert patient[len(patient) // 2] > 0.15, f"default tail: delivered after {patient} s"  # 0.25 s measured


@pytest.mark.slow
def test_read_to_end_on_a_tailing_reader_sees_what_was_just_written(
    kafka_broker: TansuBroker, make_reader: Callable[..., TopicReader], topic_name: str
) -> None:
    kafka_broker.create_topic(topic_name, 3, {"cleanup.policy": "compact"})
    sink = GatedSink()
    reader = make_reader(topic_name)
    reader.start(sink)
    assert reader.wait_caught_up(WAIT_S)
    for n in range(3):
        key = b"k%d" % n
        kafka_broker.produce_raw(topic_name, [(key, b"v", n % 3)])
        reader.read_to_end(WAIT_S)
        assert sink.keys()[-1] == key  # no sleep, no retry: read-your-writes


@pytest.mark.slow
def test_read_to_end_times_out_with_a_clear_error_when_an_open_transaction_blocks_the_reader(
    kafka_broker: TansuBroker, make_reader: Callable[..., TopicReader], topic_name: str
) -> None:
    """A ``read_committed`` reader cannot pass an open transaction; the end is the high watermark."""
    kafka_broker.create_topic(topic_name, 1, {"cleanup.policy": "compact"})
    producer = Producer(
        {"bootstrap.servers": kafka_broker.bootstrap, "transactional.id": f"tx-{topic_name}", "batch.num.messages": 1}
    )
    try:
        producer.init_transactions(10)
        sink = GatedSink()
        reader = make_reader(topic_name, read_committed=True)
        reader.start(sink)
        assert reader.wait_caught_up(WAIT_S)
        producer.begin_transaction()
        producer.produce(topic_name, key=b"open", value=b"v", partition=0)
        assert producer.flush(10) == 0  # written, transaction still open

        started = time.monotonic()
        with pytest.raises(LogUnavailable) as timed_out:
            reader.read_to_end(1.0)
        waited = time.monotonic() - started
        assert 1.0 <= waited < 1.0 + WAIT_S / 3
        assert timed_out.value.message.startswith(
            f"kafka://{kafka_broker.bootstrap}/{topic_name} was not read to its end within 1 s"
        )
        assert sink.keys() == []

        producer.commit_transaction(10)
        reader.read_to_end(WAIT_S)
        assert sink.keys() == [b"open"]
    finally:
        producer.close()  # a producer left behind logs connection failures once the broker stops


def test_read_to_end_before_start_or_after_close_fails_at_once(
    kafka_broker: TansuBroker, make_reader: Callable[..., TopicReader], topic_name: str
) -> None:
    kafka_broker.create_topic(topic_name, 1, {"cleanup.policy": "compact"})
    reader = make_reader(topic_name)
    with pytest.raises(LogUnavailable, match="is not being read; call start_reading"):
        reader.read_to_end(WAIT_S)

    reader.start(GatedSink())
    assert reader.wait_caught_up(WAIT_S)
    reader.close()
    kafka_broker.produce_raw(topic_name, [(b"unread", b"v", 0)])
    started = time.monotonic()
    with pytest.raises(LogUnavailable, match="its reader stopped"):
        reader.read_to_end(WAIT_S)
    assert time.monotonic() - started < WAIT_S / 3  # no waiting for a reader that is gone


@pytest.mark.slow
def test_a_sink_failing_on_one_record_of_a_batch_loses_that_record_alone_logged_at_its_position(
    kafka_broker: TansuBroker,
    make_reader: Callable[..., TopicReader],
    topic_name: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Connect's reader takes the records around one its callback throws on (it loses the rest of
    that poll batch only); so the reader hands a failed batch over again one record at a time."""
    monkeypatch.setattr(kafka_reader, "_RETRY_BACKOFF_S", 0.05)
    kafka_broker.create_topic(topic_name, 1, {"cleanup.policy": "compact"})
    kafka_broker.produce_raw(topic_name, [(b"before", b"1", 0), (b"poison", b"2", 0), (b"after", b"3", 0)])
    batches: list[list[bytes | None]] = []
    applied: list[bytes | None] = []

    def failing_on_poison(batch: Sequence[LogRecord]) -> None:
        batches.append([record.key for record in batch])
        if any(record.key == b"poison" for record in batch):
            raise RuntimeError("cannot take the poison record")
        applied.extend(record.key for record in batch)

    reader = make_reader(topic_name)
    with caplog.at_level(logging.WARNING):
        reader.start(failing_on_poison)
        assert reader.wait_caught_up(WAIT_S)
    assert [b"before", b"poison", b"after"] in batches, "the three records came in one batch"
    assert applied == [b"before", b"after"]
    assert reader.records_dropped == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "skipped the record at 0@1" in errors[0] and "poison" in errors[0]


@pytest.mark.slow
def test_a_failing_sink_is_retried_then_its_records_are_counted_and_logged_with_coordinates(
    kafka_broker: TansuBroker,
    make_reader: Callable[..., TopicReader],
    topic_name: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The policy every user of the reader shares (the offsets log and Connect's topics alike)."""
    monkeypatch.setattr(kafka_reader, "_RETRY_BACKOFF_S", 0.05)
    kafka_broker.create_topic(topic_name, 1, {"cleanup.policy": "compact"})
    kafka_broker.produce_raw(topic_name, [(b"a", b"1", 0), (b"b", b"2", 0)])
    calls: list[int] = []

    def failing(batch: Sequence[LogRecord]) -> None:
        calls.append(len(batch))
        raise RuntimeError("state exploded")

    reader = make_reader(topic_name)
    with caplog.at_level(logging.WARNING):
        reader.start(failing)
        assert reader.wait_caught_up(WAIT_S)  # a failing sink never stalls readiness
    # Each record offered in its batch every attempt, then (in a batch of two) alone once more.
    assert sum(calls) in (2 * kafka_reader._SINK_ATTEMPTS, 2 * kafka_reader._SINK_ATTEMPTS + 2)
    assert reader.records_dropped == 2
    assert reader.alive
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and "skipped" in errors[-1].getMessage() and "0@1" in errors[-1].getMessage()
    assert reader.last_error is not None and "state exploded" in reader.last_error
