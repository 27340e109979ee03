"""The offsets log on a Kafka topic, with the semantics of Connect's ``KafkaOffsetBackingStore``.

Reading follows ``KafkaBasedLog``: assign *every* partition at the beginning (no group, no commits),
take the high watermarks as the end, and count the log as read once every partition's *position* reaches
its end. Positions, not the offset of the last record seen, because compaction gaps and transaction
markers at the end of a partition leave no record to see.

Writing follows the Java producer's placement, not librdkafka's: the partition is computed here with
murmur2 and passed explicitly, otherwise our record and Connect's record for the same key land in
different partitions and compaction never merges them (see ``emulator.codec.murmur2``).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from emulator.codec.murmur2 import partition_for
from emulator.logs.base import OffsetLog, ReadProgress, RecordSink
from emulator.logs.kafka.claims import KafkaClaims
from emulator.logs.kafka.topics import (
    EARLIEST,
    LATEST,
    TopicSpec,
    ensure_topic,
    list_offsets,
    wait_for_partition_count,
)
from emulator.model.claims import Claim, Fence
from emulator.model.errors import InvalidRecord, LogConfigError, LogWriteError
from emulator.model.records import LogRecord, Position

log = logging.getLogger(__name__)
_RDKAFKA_LOG = logging.getLogger(__name__ + ".librdkafka")

DEFAULT_CLIENT_ID = "connect-offsets-emulator"
"""Used as ``client.id`` and consumer ``group.id`` unless ``client_config`` sets them.

The group id is required by librdkafka's consumer but never used: like Connect we assign partitions
and never commit, so no group ever forms."""

_IDLE_POLL_S = 0.2  # how long the reader blocks for the first record of a batch; bounds close()
_RETRY_BACKOFF_S = 1.0
_SINK_ATTEMPTS = 3
_CLOSE_FLUSH_S = 5.0
_METADATA_WAIT_S = 30.0  # KafkaBasedLog.CREATE_TOPIC_TIMEOUT_NS
# fetch.wait.max.ms, unless client_config sets it. Kafka answers a fetch as soon as data exists, so
# these only matter on brokers that hold every fetch until the deadline, as Tansu 0.6 does: there a
# long wait fills each response (replay measured ~2-3x faster at 500 than at 100 ms), and a short one
# bounds how late a tailed record (read-your-writes) arrives. Hence one consumer per phase.
_REPLAY_FETCH_WAIT_MS = "500"  # librdkafka's default, and Java's fetch.max.wait.ms default
_TAIL_FETCH_WAIT_MS = "10"
_REFRESH_TIMEOUT_S = 5.0  # a periodic metadata check must not hold up reading for long


def _forced(config: dict[str, Any], key: str, value: Any, role: str) -> None:
    """Set a setting the log's correctness depends on, telling the user if theirs is overridden."""
    previous = config.get(key)
    if previous is not None and str(previous).lower() != str(value).lower():
        log.warning(
            "Ignoring client setting %s=%s for the offsets log %s: it requires %s=%s",
            key,
            previous,
            role,
            key,
            value,
        )
    config[key] = value


class _PendingAppend:
    """Delivery reports of one ``append`` call, so concurrent appends never wait for each other."""

    __slots__ = ("abandoned", "deadline", "done", "errors", "lock", "positions", "remaining")

    def __init__(self, count: int, deadline: float) -> None:
        self.deadline = deadline
        self.positions: list[Position | None] = [None] * count
        self.errors: list[tuple[int, KafkaError]] = []
        self.remaining = count
        self.abandoned = False
        self.lock = threading.Lock()
        self.done = threading.Event()

    def delivered(self, index: int, err: KafkaError | None, msg: Message) -> None:
        with self.lock:
            if err is not None:
                self.errors.append((index, err))
            else:
                self.positions[index] = Position(msg.partition() or 0, msg.offset() or 0)
            self.remaining -= 1
            if self.remaining <= 0:
                self.done.set()
            abandoned = self.abandoned
        if abandoned:
            # The caller already got a timeout; say what finally happened to that record.
            if err is None:
                log.warning(
                    "Offsets record acknowledged after its append timed out: partition %d offset %d",
                    msg.partition(),
                    msg.offset(),
                )
            else:
                log.warning("Offsets record failed after its append timed out: %s", err)

    def abandon(self) -> None:
        with self.lock:
            self.abandoned = True


class KafkaOffsetLog(OffsetLog):
    """Connect's offsets topic, read to the end and tailed, written with Java's placement.

    ``client_config`` takes any librdkafka setting (SASL, SSL, timeouts, ``client.id``, ...) and is
    passed to the producer, consumer and admin client alike, as Connect passes worker settings to all
    three. Settings the log depends on (``acks``, idempotence, ``isolation.level``, auto commit) win
    over it, with a warning.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = "connect-offsets",
        partitions: int = 25,
        replication_factor: int = -1,
        client_config: Mapping[str, str] | None = None,
        read_committed: bool = False,
        *,
        claims_topic: str | None = None,
        operation_timeout_s: float = 30.0,
        metadata_refresh_s: float = 60.0,
        consume_batch: int = 10_000,
    ) -> None:
        if not topic or not topic.strip():
            raise LogConfigError("Offset storage topic must be specified")
        if partitions == 0 or partitions < -1:
            raise LogConfigError(f"offset.storage.partitions must be positive or -1, got {partitions}")
        if replication_factor == 0 or replication_factor < -1:
            raise LogConfigError(f"offset.storage.replication.factor must be positive or -1, got {replication_factor}")
        if not 1 <= consume_batch <= 1_000_000:
            raise LogConfigError(f"consume_batch must be between 1 and 1000000, got {consume_batch}")
        self._bootstrap = bootstrap_servers
        self._spec = TopicSpec(topic, partitions, replication_factor)
        self._client_config: dict[str, str] = dict(client_config or {})
        self._read_committed = read_committed
        self._timeout_s = operation_timeout_s
        self._refresh_s = metadata_refresh_s
        self._consume_batch = consume_batch

        self._lock = threading.Lock()  # guards the mutable state below (not the clients themselves)
        self._producing = 0  # appends between taking the producer and handing over their last record
        self._no_producers = threading.Condition(self._lock)
        self._opened = False
        self._closed = False
        self._partition_count = 0
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self._producer_fatal: str | None = None
        self._poller: threading.Thread | None = None
        self._reader: threading.Thread | None = None
        self._stop = threading.Event()
        self._refresh_requested = threading.Event()

        self._positions: dict[int, int] = {}
        self._end_offsets: dict[int, int] = {}
        self._records_read = 0
        self._caught_up = threading.Event()
        self._records_dropped = 0
        self._last_error: str | None = None
        self._last_error_at: float | None = None
        # Claims (emulator/ownership.py) use their own compacted topic, created on the first claim
        # only, so a daemon that never claims adds nothing to a Connect cluster.
        self._claims_topic = claims_topic or f"{topic}-emulator-claims"
        self._claims: KafkaClaims | None = None
        self._claims_lock = threading.Lock()

    # ---------------------------------------------------------------- description & health

    @property
    def description(self) -> str:
        return f"kafka://{self._bootstrap}/{self._spec.name}"

    @property
    def topic(self) -> str:
        return self._spec.name

    @property
    def partition_count(self) -> int:
        with self._lock:
            return self._partition_count

    @property
    def last_error(self) -> str | None:
        """Most recent client, reader or sink error (kept after recovery, for the health endpoint)."""
        with self._lock:
            return self._last_error

    @property
    def last_error_at(self) -> float | None:
        """Wall-clock time (``time.time()``) of ``last_error``."""
        with self._lock:
            return self._last_error_at

    @property
    def reader_alive(self) -> bool:
        reader = self._reader
        return reader is not None and reader.is_alive()

    @property
    def records_dropped(self) -> int:
        """Records the sink refused ``_SINK_ATTEMPTS`` times in a row: logged, counted, never silent."""
        with self._lock:
            return self._records_dropped

    def _record_error(self, message: str, level: int = logging.WARNING) -> None:
        log.log(level, "%s: %s", self.description, message)
        with self._lock:
            self._last_error = message
            self._last_error_at = time.time()

    def _on_client_error(self, role: str, err: KafkaError) -> None:
        """librdkafka's ``error_cb``: connection loss and the like. Clients retry by themselves,
        except after a fatal idempotent-producer error, which needs a new producer."""
        if err.fatal() and role == "producer":
            with self._lock:
                self._producer_fatal = str(err)
        self._record_error(f"Kafka {role} error: {err}")

    # ---------------------------------------------------------------- client construction

    def _config(self, role: str) -> dict[str, Any]:
        config: dict[str, Any] = dict(self._client_config)
        given = config.get("bootstrap.servers")
        if given is not None and given != self._bootstrap:
            log.warning("client_config bootstrap.servers=%s ignored; using %s", given, self._bootstrap)
        config["bootstrap.servers"] = self._bootstrap
        config.setdefault("client.id", DEFAULT_CLIENT_ID)
        config["logger"] = _RDKAFKA_LOG
        config["error_cb"] = functools.partial(self._on_client_error, role)
        # Connect creates its internal topics explicitly; never let a metadata lookup create one.
        _forced(config, "allow.auto.create.topics", "false", role)
        if role == "producer":
            _forced(config, "acks", "all", role)
            # Per-key order across retries (Connect uses max.in.flight=1 for the same reason).
            _forced(config, "enable.idempotence", "true", role)
            # Every keyed record gets an explicit partition; this only guards against a future caller
            # forgetting it, with the partitioner that agrees with Java's.
            config.setdefault("partitioner", "murmur2_random")
            # Java's producer default, and Connect's: a commit is sent at once, not held for a batch
            # (librdkafka's 5 ms default linger was most of an acknowledged write's latency here).
            config.setdefault("linger.ms", "0")
        elif role == "consumer":
            config.setdefault("group.id", DEFAULT_CLIENT_ID)
            _forced(config, "enable.auto.commit", "false", role)
            _forced(config, "enable.auto.offset.store", "false", role)
            _forced(config, "auto.offset.reset", "earliest", role)
            _forced(config, "enable.partition.eof", "false", role)
            # librdkafka defaults to read_committed; Connect's reader is read_uncommitted unless EOS.
            _forced(
                config,
                "isolation.level",
                "read_committed" if self._read_committed else "read_uncommitted",
                role,
            )
        return config

    def _make(self, role: str, factory: Callable[[dict[str, Any]], Any]) -> Any:
        try:
            return factory(self._config(role))
        except (KafkaException, ValueError, TypeError) as exc:
            raise LogConfigError(f"Invalid Kafka client configuration for the offsets log {role}: {exc}") from exc

    # ---------------------------------------------------------------- lifecycle

    def open(self) -> None:
        with self._lock:
            if self._closed:
                raise LogConfigError(f"{self.description} is closed")
            if self._opened:
                return
        admin: AdminClient = self._make("admin", AdminClient)
        ensure_topic(admin, self._spec, self._timeout_s)
        count = wait_for_partition_count(admin, self._spec.name, _METADATA_WAIT_S)
        producer: Producer = self._make("producer", Producer)
        with self._lock:
            self._admin = admin
            self._producer = producer
            self._partition_count = count
            self._opened = True
        self._poller = threading.Thread(target=self._poll_producer, name=f"offsets-producer-{self.topic}", daemon=True)
        self._poller.start()
        log.info("Opened %s with %d partitions", self.description, count)

    def _require_open(self) -> AdminClient:
        with self._lock:
            if self._closed:
                raise LogWriteError(f"{self.description} is closed")
            if not self._opened or self._admin is None:
                raise LogConfigError(f"{self.description} is not open; call open() first")
            return self._admin

    def refresh_partition_count(self) -> int:
        """Re-read the partition count from metadata (writes follow it at once, the reader shortly).

        Connect's producer always places by the *current* count; so must we, or after partitions
        are added our writes and Connect's for the same key diverge.
        """
        admin = self._require_open()
        count = wait_for_partition_count(admin, self._spec.name, self._timeout_s)
        with self._lock:
            changed = count != self._partition_count
            self._partition_count = count
        if changed:
            log.warning("%s now has %d partitions", self.description, count)
            self._refresh_requested.set()
        return count

    # ---------------------------------------------------------------- ownership

    def _claims_store(self, create: bool) -> KafkaClaims | None:
        with self._claims_lock:
            if self._claims is None:
                admin = self._require_open()
                if not create:
                    topics = admin.list_topics(self._claims_topic, timeout=self._timeout_s).topics
                    found = topics.get(self._claims_topic)
                    if found is None or found.error is not None:
                        return None  # nobody ever claimed on this topic
                claims = KafkaClaims(
                    self.topic, self._claims_topic, self._config, lambda: self.partition_count,
                    self._spec.replication_factor, self._timeout_s,
                )
                claims.open()
                self._claims = claims
            return self._claims

    def claim(self, connector: str, owner: str) -> Claim:
        store = self._claims_store(create=True)
        assert store is not None
        return store.claim(connector, owner)

    def current_claim(self, connector: str) -> Claim | None:
        store = self._claims_store(create=False)
        return None if store is None else store.current(connector)

    def release(self, fence: Fence) -> bool:
        store = self._claims_store(create=False)
        return False if store is None else store.release(fence)

    def append_fenced(
        self, fence: Fence, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float = 30.0
    ) -> list[Position]:
        store = self._claims_store(create=True)
        assert store is not None
        return store.append_fenced(fence, [self._checked(i, e) for i, e in enumerate(entries)], timeout_s)

    def close(self) -> None:
        with self._claims_lock:
            claims, self._claims = self._claims, None
        if claims is not None:
            claims.close()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # A producer must not be closed under a thread that is still handing it records.
            self._no_producers.wait_for(lambda: self._producing == 0, timeout=_CLOSE_FLUSH_S)
        self._stop.set()
        reader = self._reader
        if reader is not None:
            reader.join(timeout=_IDLE_POLL_S + 10.0)
            if reader.is_alive():
                log.warning("%s: reader thread did not stop within 10s", self.description)
        poller = self._poller
        if poller is not None:
            poller.join(timeout=2.0)  # before close(): polling a closed producer is use-after-free
        producer = self._producer
        if producer is not None:
            unsent = producer.flush(_CLOSE_FLUSH_S)
            if unsent:
                log.warning("%s: %d offsets records unacknowledged at close; purging", self.description, unsent)
                producer.purge()
                producer.flush(1.0)  # serve the purged records' delivery reports
            producer.close()

    def _poll_producer(self) -> None:
        """Serves delivery reports, so an appender wakes the moment its own records are acknowledged."""
        while not self._stop.is_set():
            producer = self._producer
            if producer is None:
                return
            try:
                producer.poll(0.1)
            except Exception as exc:  # a raising callback must not end delivery for everyone else
                self._record_error(f"producer poll failed: {exc!r}", logging.ERROR)

    # ---------------------------------------------------------------- writing

    def _writer(self) -> tuple[Producer, int]:
        """The producer and partition count for one append; pair every call with ``_done_producing``."""
        stale: Producer | None = None
        with self._lock:
            if self._closed:
                raise LogWriteError(f"{self.description} is closed")
            if not self._opened or self._producer is None:
                raise LogConfigError(f"{self.description} is not open; call open() first")
            if self._producer_fatal is not None:
                # An idempotent producer that hit a fatal error refuses everything from then on.
                log.warning("%s: replacing the producer after: %s", self.description, self._producer_fatal)
                self._producer_fatal = None
                stale, self._producer = self._producer, self._make("producer", Producer)
            producer, count = self._producer, self._partition_count
            self._producing += 1
        if stale is not None:  # outside the lock: the purged records' callbacks take it
            stale.purge()
            stale.flush(1.0)
        return producer, count

    def _done_producing(self) -> None:
        with self._lock:
            self._producing -= 1
            if self._producing == 0:
                self._no_producers.notify_all()

    @staticmethod
    def _checked(index: int, entry: tuple[bytes, bytes | None]) -> tuple[bytes, bytes | None]:
        try:
            key, value = entry
        except (TypeError, ValueError):
            raise InvalidRecord(f"entry {index}: expected a (key, value) pair, got {entry!r}") from None
        if not isinstance(key, bytes | bytearray | memoryview):
            raise InvalidRecord(f"entry {index}: key must be bytes, got {type(key).__name__}")
        if value is not None and not isinstance(value, bytes | bytearray | memoryview):
            raise InvalidRecord(f"entry {index}: value must be bytes or None, got {type(value).__name__}")
        return bytes(key), (None if value is None else bytes(value))

    def append(self, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float = 30.0) -> list[Position]:
        checked = [self._checked(i, entry) for i, entry in enumerate(entries)]
        if not checked:
            return []
        producer, count = self._writer()
        try:
            pending = self._produce_all(producer, count, checked, timeout_s)
        finally:
            self._done_producing()
        return self._await_acks(pending, len(checked), timeout_s)

    def _produce_all(
        self, producer: Producer, count: int, checked: list[tuple[bytes, bytes | None]], timeout_s: float
    ) -> _PendingAppend:
        """Hand every record to the producer (non-blocking unless its local queue is full)."""
        deadline = time.monotonic() + timeout_s
        pending = _PendingAppend(len(checked), deadline)
        for index, (key, value) in enumerate(checked):
            callback = functools.partial(pending.delivered, index)
            while True:
                try:
                    # value=None is the tombstone; b"" would be a live empty entry to Connect.
                    producer.produce(
                        self._spec.name,
                        value=value,
                        key=key,
                        partition=partition_for(key, count),
                        on_delivery=callback,
                    )
                    break
                except BufferError:  # local queue full: wait for the broker to drain it
                    if time.monotonic() >= deadline:
                        pending.abandon()
                        raise LogWriteError(
                            f"Timed out after {timeout_s:g}s queueing offsets records to {self.description}: "
                            f"{index} of {len(checked)} were handed to the producer and may still be written"
                        ) from None
                    time.sleep(0.01)
                except KafkaException as exc:
                    pending.abandon()
                    raise LogWriteError(
                        f"Could not produce to {self.description}: {exc.args[0] if exc.args else exc}; "
                        f"{index} of {len(checked)} records were handed to the producer and may still "
                        "be written"
                    ) from exc
        return pending

    def _await_acks(self, pending: _PendingAppend, total: int, timeout_s: float) -> list[Position]:
        if not pending.done.wait(max(pending.deadline - time.monotonic(), 0.0)):
            pending.abandon()
            with pending.lock:
                acked = sum(1 for p in pending.positions if p is not None)
            raise LogWriteError(
                f"Timed out after {timeout_s:g}s waiting for {self.description} to acknowledge "
                f"{total} offsets records ({acked} acknowledged); the rest may still be written"
            )
        if pending.errors:
            index, err = pending.errors[0]
            acked = sum(1 for p in pending.positions if p is not None)
            raise LogWriteError(
                f"{len(pending.errors)} of {total} offsets records were not acknowledged by "
                f"{self.description} (first: entry {index}: {err.name()}: {err.str()}); {acked} were written"
            )
        return [p for p in pending.positions if p is not None]

    # ---------------------------------------------------------------- reading

    def start_reading(self, sink: RecordSink) -> None:
        self._require_open()
        with self._lock:
            if self._reader is not None:
                raise LogConfigError(f"{self.description}: start_reading() was already called")
        consumer = self._new_consumer(_REPLAY_FETCH_WAIT_MS)  # config errors surface here, not in a thread
        reader = threading.Thread(
            target=self._read_loop, args=(consumer, sink), name=f"offsets-reader-{self.topic}", daemon=True
        )
        with self._lock:
            self._reader = reader
        reader.start()

    def progress(self) -> ReadProgress:
        with self._lock:
            return ReadProgress(
                positions=dict(self._positions),
                end_offsets=dict(self._end_offsets),
                records_read=self._records_read,
                caught_up=self._caught_up.is_set(),
            )

    def wait_caught_up(self, timeout_s: float | None = None) -> bool:
        """Block until the initial read-to-end finished; False on timeout."""
        return self._caught_up.wait(timeout_s)

    def end_offsets(self, timeout_s: float | None = None) -> dict[int, int]:
        """Current high watermarks per partition, as ``TopicAdmin.endOffsets`` (``READ_UNCOMMITTED``).

        For Connect's "read to end before answering" on demand: wait until ``progress().positions``
        reach these.
        """
        admin = self._require_open()
        return list_offsets(admin, self.topic, list(range(self.partition_count)), LATEST, timeout_s or self._timeout_s)

    def _reader_admin(self) -> AdminClient:
        """The admin client, for the reader thread (which may still run while ``close()`` proceeds)."""
        admin = self._admin
        assert admin is not None, "start_reading() requires open()"
        return admin

    def _new_consumer(self, fetch_wait_ms: str) -> Consumer:
        def factory(config: dict[str, Any]) -> Consumer:
            config.setdefault("fetch.wait.max.ms", fetch_wait_ms)
            return Consumer(config)

        consumer: Consumer = self._make("consumer", factory)
        return consumer

    def _tail_consumer(self, replay: Consumer, assigned: list[TopicPartition]) -> Consumer:
        """Swap the replay consumer for one tuned for latency, continuing at the exact positions."""
        if "fetch.wait.max.ms" in self._client_config:
            return replay  # the user chose one setting for both phases
        positions = replay.position(assigned)
        try:
            tail = self._new_consumer(_TAIL_FETCH_WAIT_MS)
            tail.assign(
                [
                    TopicPartition(self.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                    for tp in positions
                ]
            )
        except Exception as exc:
            self._record_error(f"cannot start the tailing consumer, keeping the replay one: {exc!r}")
            return replay
        replay.close()
        return tail

    def _read_loop(self, consumer: Consumer, sink: RecordSink) -> None:
        try:
            assigned = self._assign_all(consumer)
            if assigned is None:
                return
            started = time.monotonic()
            next_refresh = started + self._refresh_s
            replaying = True
            while not self._stop.is_set():
                try:
                    if replaying and self._caught_up.is_set():
                        replaying = False
                        consumer = self._tail_consumer(consumer, assigned)
                    messages = self._fetch(consumer)
                    if messages:
                        self._deliver(sink, messages)
                    self._update_positions(consumer, assigned, len(messages), started)
                    if self._refresh_requested.is_set() or time.monotonic() >= next_refresh:
                        self._refresh_requested.clear()
                        next_refresh = time.monotonic() + self._refresh_s
                        self._assign_new_partitions(consumer, assigned)
                except Exception as exc:  # never die silently: log, remember, back off, go on
                    self._record_error(f"reader error: {exc!r}", logging.ERROR)
                    self._stop.wait(_RETRY_BACKOFF_S)
        finally:
            try:
                consumer.close()
            except Exception as exc:
                log.warning("%s: closing the consumer failed: %r", self.description, exc)

    def _assign_all(self, consumer: Consumer) -> list[TopicPartition] | None:
        """Assign every partition from its beginning and capture where "the end" is, retrying until done."""
        admin = self._reader_admin()
        while not self._stop.is_set():
            try:
                count = wait_for_partition_count(admin, self.topic, self._timeout_s)
                partitions = list(range(count))
                starts = list_offsets(admin, self.topic, partitions, EARLIEST, self._timeout_s)
                ends = list_offsets(admin, self.topic, partitions, LATEST, self._timeout_s)
            except Exception as exc:
                self._record_error(f"cannot read the end offsets of {self.topic}: {exc!r}; retrying")
                self._stop.wait(_RETRY_BACKOFF_S)
                continue
            assigned = [TopicPartition(self.topic, p) for p in partitions]
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions])
            with self._lock:
                self._partition_count = max(self._partition_count, count)
                # Before the first record arrives a position is "invalid"; the reader then stands at
                # the log start, which is where an empty (or fully compacted) partition already ends.
                self._positions = {p: starts[p] for p in partitions}
                self._end_offsets = dict(ends)
            log.info(
                "%s: reading %d partitions to end offsets totalling %d",
                self.description,
                count,
                sum(ends.values()),
            )
            self._check_caught_up(time.monotonic())
            return assigned
        return None

    def _fetch(self, consumer: Consumer) -> list[Message]:
        """A batch of whatever is already fetched, else wait briefly for the first record.

        ``consume(n, timeout)`` waits until it has all ``n`` or the timeout passes, which would delay a
        lone tailed record by the whole timeout; ``poll`` returns the moment one arrives.
        """
        messages: list[Message] = consumer.consume(self._consume_batch, timeout=0)
        if messages:
            return messages
        first = consumer.poll(_IDLE_POLL_S)
        if first is None:
            return []
        rest: list[Message] = consumer.consume(self._consume_batch - 1, timeout=0) if self._consume_batch > 1 else []
        return [first, *rest]

    def _deliver(self, sink: RecordSink, messages: list[Message]) -> None:
        records: list[LogRecord] = []
        append = records.append
        for m in messages:
            err = m.error()
            if err is not None:
                self._record_error(f"consume error on {self.topic}[{m.partition()}]: {err}")
                continue
            ts_type, ts = m.timestamp()
            partition, offset = m.partition(), m.offset()
            assert partition is not None and offset is not None  # always set on a consumed record
            append(LogRecord(m.key(), m.value(), partition, offset, -1 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts))
        if not records:
            return
        for attempt in range(1, _SINK_ATTEMPTS + 1):
            try:
                sink(records)
                return
            except Exception as exc:
                if attempt < _SINK_ATTEMPTS:
                    log.warning(
                        "%s: sink failed on %d records (attempt %d): %r",
                        self.description,
                        len(records),
                        attempt,
                        exc,
                    )
                    self._stop.wait(_RETRY_BACKOFF_S * attempt)
                    continue
                first, last = records[0], records[-1]
                self._record_error(
                    f"sink failed {attempt} times; skipped {len(records)} records from "
                    f"{first.partition}@{first.offset} to {last.partition}@{last.offset}: {exc!r}",
                    logging.ERROR,
                )
                with self._lock:
                    self._records_dropped += len(records)

    def _update_positions(
        self, consumer: Consumer, assigned: list[TopicPartition], delivered: int, started: float
    ) -> None:
        current = consumer.position(assigned)
        with self._lock:
            self._records_read += delivered
            for tp in current:
                if tp.offset >= 0 and tp.offset > self._positions.get(tp.partition, -1):
                    self._positions[tp.partition] = tp.offset
        if not self._caught_up.is_set():
            self._check_caught_up(started)

    def _check_caught_up(self, started: float) -> None:
        with self._lock:
            done = all(self._positions.get(p, 0) >= end for p, end in self._end_offsets.items())
            records = self._records_read
        if done and not self._caught_up.is_set():
            elapsed = time.monotonic() - started
            self._caught_up.set()
            log.info(
                "%s: finished reading to the end: %d records in %.3fs (%.0f records/s)",
                self.description,
                records,
                elapsed,
                records / elapsed if elapsed > 0 else 0.0,
            )

    def _assign_new_partitions(self, consumer: Consumer, assigned: list[TopicPartition]) -> None:
        """Pick up partitions added to the topic since we started (Connect would need a restart)."""
        admin = self._reader_admin()
        admin.poll(0)  # serve the admin client's queued log lines
        count = wait_for_partition_count(admin, self.topic, _REFRESH_TIMEOUT_S)
        if count <= len(assigned):
            return
        new = list(range(len(assigned), count))
        starts = list_offsets(admin, self.topic, new, EARLIEST, self._timeout_s)
        ends = list_offsets(admin, self.topic, new, LATEST, self._timeout_s)
        consumer.incremental_assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in new])
        assigned.extend(TopicPartition(self.topic, p) for p in new)
        with self._lock:
            self._partition_count = max(self._partition_count, count)
            for p in new:
                self._positions[p] = starts[p]
                self._end_offsets[p] = ends[p]
        log.warning("%s: now reading %d partitions (added %s)", self.description, count, new)
