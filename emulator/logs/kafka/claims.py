"""Claims and fencing on Kafka: a transactional producer per connector, epochs in a claims topic.

Fencing across daemons rests on the broker, not on us: every claim for a connector uses the same
``transactional.id`` (derived from the offsets topic and the connector name), and
``init_transactions`` makes the broker bump that id's producer epoch, after which the previous
holder's produce and commit requests are rejected — wherever that holder runs. This is KIP-618's
zombie fencing, applied to offset writers.

The epoch a client sees is ours: the claims topic (compacted, one partition) holds the latest
claim per connector, written inside the claiming transaction, so two claims racing from two
daemons cannot both commit — the one fenced by the other fails — and the winner's epoch is one
more than the last committed claim. It is read ``read_committed``, so an aborted claim never counts.

One caveat is the broker's, not ours: records of a transaction that is open at the instant another
claim fences it are aborted, and Connect's own reader is ``read_uncommitted`` unless exactly-once
source support is enabled, so such a reader can see them. The window is the time between produce
and commit of one offsets write (milliseconds); committed epochs are never affected.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from emulator.codec.murmur2 import partition_for
from emulator.logs.kafka.topics import LATEST, TopicSpec, ensure_topic, list_offsets
from emulator.model.claims import Claim, Fence, Fenced, fenced_message
from emulator.model.errors import Conflict, LogWriteError
from emulator.model.records import Position

log = logging.getLogger(__name__)


def transactional_id(offsets_topic: str, connector: str) -> str:
    """Stable per (offsets topic, connector), so every daemon's claim fences every other's."""
    return f"connect-offsets-emulator:{offsets_topic}:{connector}"


def _fatal_or_fenced(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError):
        return False
    return bool(err.fatal()) or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)


def _kafka_cause(exc: BaseException) -> BaseException:
    """The ``KafkaException`` behind a ``SystemError`` from a callback, if there is one."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KafkaException):
            return seen
        seen = seen.__context__ or seen.__cause__
    return exc


class KafkaClaims:
    def __init__(
        self,
        offsets_topic: str,
        claims_topic: str,
        config: Callable[[str], dict[str, Any]],
        partition_count: Callable[[], int],
        replication_factor: int = -1,
        timeout_s: float = 30.0,
    ) -> None:
        self._offsets_topic = offsets_topic
        self._claims_topic = claims_topic
        self._config = config
        self._partition_count = partition_count
        self._replication_factor = replication_factor
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._claims: dict[str, Claim | None] = {}
        self._last_epoch: dict[str, int] = {}
        self._position = 0
        self._producers: dict[str, tuple[int, Producer]] = {}
        self._connector_locks: dict[str, threading.Lock] = {}
        self._admin: AdminClient | None = None
        self._consumer: Consumer | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def open(self) -> None:
        admin = AdminClient(self._config("admin"))
        ensure_topic(admin, TopicSpec(self._claims_topic, 1, self._replication_factor), self._timeout_s)
        consumer_config = self._config("consumer")
        consumer_config["isolation.level"] = "read_committed"  # an aborted claim never counts
        consumer = Consumer(consumer_config)
        consumer.assign([TopicPartition(self._claims_topic, 0, 0)])
        self._admin, self._consumer = admin, consumer

    def close(self) -> None:
        with self._lock:
            producers = list(self._producers.values())
            self._producers.clear()
            consumer, self._consumer = self._consumer, None
        for _, producer in producers:
            producer.flush(5)
        if consumer is not None:
            consumer.close()

    # -- reading the claims topic ---------------------------------------------------------
    def _read_to_end(self) -> None:
        """Read the claims topic up to its current end (waits out open claiming transactions)."""
        with self._lock:
            admin, consumer = self._admin, self._consumer
            if admin is None or consumer is None:
                raise LogWriteError(f"claims topic {self._claims_topic} is not open")
            end = list_offsets(admin, self._claims_topic, [0], LATEST, self._timeout_s)[0]
            deadline = time.monotonic() + self._timeout_s
            while True:
                position = consumer.position([TopicPartition(self._claims_topic, 0)])[0].offset
                if position >= end or (position < 0 and end == 0):
                    return
                if time.monotonic() > deadline:
                    raise LogWriteError(
                        f"claims topic {self._claims_topic} not read to its end ({position}/{end}) within "
                        f"{self._timeout_s:g} s; an open claiming transaction may be stuck"
                    )
                for message in consumer.consume(500, 0.2):
                    self._apply(message)

    def _apply(self, message: Message) -> None:
        if message.error() is not None:
            log.warning("claims topic %s: %s", self._claims_topic, message.error())
            return
        raw_key, raw_value = message.key(), message.value()
        if raw_key is None:
            log.warning(
                "claims topic %s: record without key at offset %s skipped", self._claims_topic, message.offset()
            )
            return
        connector = raw_key.decode("utf-8", errors="replace")
        try:
            value = json.loads(raw_value) if raw_value is not None else None
            claim = (
                None
                if value is None or value.get("released")
                else Claim(connector, str(value["owner"]), int(value["epoch"]), int(value["claimed_at_ms"]))
            )
            epoch = int(value["epoch"]) if value is not None else 0
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("claims topic %s: malformed claim for %r skipped: %s", self._claims_topic, connector, exc)
            return
        self._claims[connector] = claim
        self._last_epoch[connector] = max(self._last_epoch.get(connector, 0), epoch)

    def current(self, connector: str) -> Claim | None:
        self._read_to_end()
        with self._lock:
            return self._claims.get(connector)

    # -- claiming -------------------------------------------------------------------------
    def _connector_lock(self, connector: str) -> threading.Lock:
        with self._lock:
            return self._connector_locks.setdefault(connector, threading.Lock())

    def _new_producer(self, connector: str) -> Producer:
        config = self._config("producer")
        config["transactional.id"] = transactional_id(self._offsets_topic, connector)
        # Being fenced is this producer's expected end, not the offsets log's producer failing.
        config["error_cb"] = functools.partial(self._on_producer_error, connector)
        producer = Producer(config)
        producer.init_transactions(self._timeout_s)  # the broker fences every older holder here
        return producer

    @staticmethod
    def _on_producer_error(connector: str, err: KafkaError) -> None:
        log.info("claim producer for connector %s: %s", connector, err)

    def claim(self, connector: str, owner: str) -> Claim:
        with self._connector_lock(connector):
            producer = self._new_producer(connector)
            try:
                self._read_to_end()
                with self._lock:
                    epoch = self._last_epoch.get(connector, 0) + 1
                claim = Claim(connector, owner, epoch, time.time_ns() // 1_000_000)
                self._write_claim(producer, connector, claim.as_dict())
            except KafkaException as exc:
                producer.flush(1)
                if _fatal_or_fenced(exc):
                    raise Conflict(f"a newer claim for connector {connector} was made concurrently: {exc}") from exc
                raise LogWriteError(f"claiming connector {connector} failed: {exc}") from exc
            with self._lock:
                previous = self._producers.pop(connector, None)
                self._producers[connector] = (epoch, producer)
            if previous is not None:
                previous[1].flush(1)  # fenced already; nothing of it may write again
            self._read_to_end()
            return claim

    def _write_claim(self, producer: Producer, connector: str, value: Mapping[str, object]) -> None:
        producer.begin_transaction()
        producer.produce(self._claims_topic, key=connector.encode(), value=json.dumps(value).encode(), partition=0)
        producer.commit_transaction(self._timeout_s)

    def release(self, fence: Fence) -> bool:
        with self._connector_lock(fence.connector):
            current = self.current(fence.connector)
            if current is None or current.epoch != fence.epoch:
                return False
            with self._lock:
                held = self._producers.pop(fence.connector, None)
            producer = held[1] if held is not None and held[0] == fence.epoch else self._new_producer(fence.connector)
            marker = {**current.as_dict(), "released": True}
            try:
                self._write_claim(producer, fence.connector, marker)
            except KafkaException as exc:
                if _fatal_or_fenced(exc):
                    return False
                raise LogWriteError(f"releasing connector {fence.connector} failed: {exc}") from exc
            self._read_to_end()
            return True

    # -- fenced writes --------------------------------------------------------------------
    def append_fenced(
        self, fence: Fence, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float
    ) -> list[Position]:
        with self._connector_lock(fence.connector):
            with self._lock:
                held = self._producers.get(fence.connector)
            if held is None or held[0] != fence.epoch:
                current = self.current(fence.connector)
                if current is not None and current.epoch == fence.epoch:
                    raise Fenced(
                        f"Connector {fence.connector}'s claim with epoch {fence.epoch} was made through another "
                        "daemon; commit through that daemon (its transactional producer holds the claim)"
                    )
                raise Fenced(fenced_message(fence.connector, fence.epoch, current))
            producer = held[1]
            count = self._partition_count()
            positions: list[Position | None] = [None] * len(entries)
            errors: list[KafkaError] = []

            def delivered(index: int, err: KafkaError | None, msg: Message) -> None:
                # Touch nothing on ``err`` here: after a fatal (fencing) error confluent-kafka calls
                # back with a Python exception pending, and any call on it raises SystemError.
                if err is not None:
                    errors.append(err)
                else:
                    partition, offset = msg.partition(), msg.offset()
                    assert partition is not None and offset is not None
                    positions[index] = Position(partition, offset)

            try:
                producer.begin_transaction()
                for index, (key, value) in enumerate(entries):
                    producer.produce(
                        self._offsets_topic,
                        key=key,
                        value=value,
                        partition=partition_for(key, count),
                        on_delivery=functools.partial(delivered, index),
                    )
                try:
                    producer.flush(timeout_s)
                except SystemError as exc:  # a fatal error surfaced through a delivery callback
                    raise _kafka_cause(exc) from exc
                if errors:
                    first = errors[0]
                    if first.fatal() or first.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED):
                        raise KafkaException(first)
                    raise LogWriteError(f"offsets write for {fence.connector} not acknowledged: {first}")
                producer.commit_transaction(timeout_s)
            except KafkaException as exc:
                if _fatal_or_fenced(exc):
                    with self._lock:
                        if self._producers.get(fence.connector) is held:
                            del self._producers[fence.connector]
                    raise Fenced(fenced_message(fence.connector, fence.epoch, self.current(fence.connector))) from exc
                self._abort(producer)
                raise LogWriteError(f"offsets write for {fence.connector} failed and was aborted: {exc}") from exc
            except LogWriteError:
                self._abort(producer)
                raise
            missing = [i for i, p in enumerate(positions) if p is None]
            if missing:
                raise LogWriteError(f"offsets write for {fence.connector}: {len(missing)} record(s) unconfirmed")
            return [p for p in positions if p is not None]

    def _abort(self, producer: Producer) -> None:
        try:
            producer.abort_transaction(self._timeout_s)
        except KafkaException as exc:
            log.warning("aborting an offsets transaction failed: %s", exc)
