"""The offsets log on a Kafka topic, with the semantics of Connect's ``KafkaOffsetBackingStore``.

A small composition of the jobs it needs, each in its own module: the topic is created or verified
as Connect's worker does (``topics``), read to the end and tailed as ``KafkaBasedLog`` reads it
(``reader``), written with the Java producer's placement (``writer``), and claimed through
transactional producers (``claims``). Every client is configured by ``config``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka.admin import AdminClient

from emulator.logs.base import OffsetLog, ReadProgress, RecordSink
from emulator.logs.kafka.claims import KafkaClaims
from emulator.logs.kafka.config import DEFAULT_TAIL_FETCH_WAIT_MS, ErrorCallback, KafkaClientConfig
from emulator.logs.kafka.reader import TopicReader
from emulator.logs.kafka.topics import (
    LATEST,
    TopicSpec,
    ensure_topic,
    list_offsets,
    wait_for_partition_count,
    wait_for_topic,
)
from emulator.logs.kafka.transactional import TransactionalAppender
from emulator.logs.kafka.watch import BrokerWatch, wait_for_cluster
from emulator.logs.kafka.writer import OffsetsWriter, checked_entry
from emulator.logs.last_error import LastError
from emulator.logs.own_writes import OwnWrites
from emulator.logs.write_timings import WriteTimings
from emulator.model.claims import Claim, Fence, Fenced, fenced_message
from emulator.model.errors import LogConfigError, LogTimeout, LogUnavailable, LogWriteError, WriteOutcomeUnknown
from emulator.model.records import LogRecord, Position

log = logging.getLogger(__name__)

T = TypeVar("T")

_METADATA_WAIT_S = 30.0  # KafkaBasedLog.CREATE_TOPIC_TIMEOUT_NS


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
        startup_timeout_s: float | None = None,
        claims: bool = True,
        tail_fetch_wait_ms: str = DEFAULT_TAIL_FETCH_WAIT_MS,
        on_startup_wait: Callable[[str], None] | None = None,
        before_create: Callable[[], None] | None = None,
        settings: tuple[str, str] = ("--bootstrap-servers", "--startup-timeout"),
    ) -> None:
        """``startup_timeout_s``: how long ``open`` waits for the cluster to answer at all (None: as
        long as it takes, with a progress line every few seconds); ``on_startup_wait`` hears why,
        at every attempt. ``before_create``: called once the cluster answers and before the topic
        is created if missing; what it raises stops ``open`` with nothing created (the daemon checks
        the Connect cluster's topics there). ``claims=False``: no claims and no
        broker watch (a connector's own offsets topic: claims live with the worker's topic).
        ``tail_fetch_wait_ms``: the tailing readers' fetch wait (``DEFAULT_TAIL_FETCH_WAIT_MS``)."""
        if not topic or not topic.strip():
            raise LogConfigError("Offset storage topic must be specified")
        if partitions == 0 or partitions < -1:
            raise LogConfigError(f"offset.storage.partitions must be positive or -1, got {partitions}")
        if replication_factor == 0 or replication_factor < -1:
            raise LogConfigError(f"offset.storage.replication.factor must be positive or -1, got {replication_factor}")
        if not 1 <= consume_batch <= 1_000_000:
            raise LogConfigError(f"consume_batch must be between 1 and 1000000, got {consume_batch}")
        self._clients = KafkaClientConfig(
            bootstrap_servers, dict(client_config or {}), "the offsets log", tail_fetch_wait_ms=tail_fetch_wait_ms
        )
        self._max_record_bytes = self._clients.producer_max_message_bytes()
        self._spec = TopicSpec(topic, partitions, replication_factor)
        self._read_committed = read_committed
        self._timeout_s = operation_timeout_s
        self._refresh_s = metadata_refresh_s
        self._consume_batch = consume_batch
        self._startup_timeout_s = startup_timeout_s
        self._on_startup_wait = on_startup_wait
        self._before_create = before_create
        self._settings = settings  # named in "cannot reach the Kafka cluster" (``wait_for_cluster``)
        self._errors = LastError(f"kafka://{bootstrap_servers}/{topic}", log)
        self._write_timings = WriteTimings(self._errors.description, "the broker's acknowledgement")
        self._writer = OffsetsWriter(
            self._clients, topic, self._errors, lambda: self.partition_count, self._write_timings
        )
        self._transactions = TransactionalAppender(
            dataclasses.replace(self._clients, purpose=f"transactional writes to {topic}"),
            topic,
            lambda: self.partition_count,
            self.description,
            self._write_timings,
        )
        self._with_claims = claims

        self._lock = threading.Lock()  # guards the state below
        self._opened = False
        self._closed = False
        self._partition_count = 0
        self._cluster_id: str | None = None
        self._admin: AdminClient | None = None
        self._reader: TopicReader | None = None
        self._own_writes = OwnWrites()
        # Claims (emulator/model/claims.py) use their own compacted topic, created on the first claim
        # only, so a daemon that never claims adds nothing to a Connect cluster. Whether it exists
        # is learned by the watch in the background, never by a lookup on the write path.
        self._claims_topic = claims_topic or f"{topic}-emulator-claims"
        self._claims: KafkaClaims | None = None
        self._claims_lock = threading.Lock()
        self._watch: BrokerWatch | None = None
        # Unclaimed writes begun while there was no claims store, per connector (a source's records,
        # ``append_fenced`` / ``start_append_fenced``; a sink's group, ``write_fenced``): they hold no
        # connector lock, so the claim that opens the store waits for them instead (``_storeless``).
        # Counted under _claims_lock together with the check that there is no store; their own lock,
        # so that a write ending on the producer's delivery-report thread never waits for
        # _claims_lock, which opening the store holds across broker calls.
        self._storeless_writes: dict[str, int] = {}
        self._storeless_done = threading.Condition(threading.Lock())

    # ---------------------------------------------------------------- description & health

    @property
    def description(self) -> str:
        return self._errors.description

    @property
    def archive_identity(self) -> str:
        """``kafka-cluster://`` the cluster's id and the topic: the same whichever brokers or names
        ``--bootstrap-servers`` lists. A broker that gives no cluster id (Kafka always has one since
        0.10.1) leaves the description, bootstrap string and all: nothing steadier is known."""
        with self._lock:
            if not self._opened:
                raise LogConfigError(f"{self.description} is not open; its archive identity is read at open()")
            cluster_id = self._cluster_id
        return self.description if cluster_id is None else f"kafka-cluster://{cluster_id}/{self._spec.name}"

    @property
    def write_timings(self) -> WriteTimings:
        """One observation per append: from handing its first record to the producer to its last
        acknowledgement (a transactional append: from its producer's start to the commit)."""
        return self._write_timings

    @property
    def topic(self) -> str:
        return self._spec.name

    @property
    def partition_count(self) -> int:
        """The count writes are placed by: from metadata at open and refresh, or more if the reader
        found partitions added since."""
        reader = self._reader
        seen = reader.partition_count if reader is not None else 0
        with self._lock:
            return max(self._partition_count, seen)

    @property
    def last_error(self) -> str | None:
        """Most recent client, reader or sink error (kept after recovery, for the health endpoint)."""
        return self._errors.message

    @property
    def last_error_at(self) -> float | None:
        """Wall-clock time (``time.time()``) of ``last_error``."""
        return self._errors.at

    @property
    def reader_alive(self) -> bool:
        reader = self._reader
        return reader is not None and reader.alive

    @property
    def records_dropped(self) -> int:
        """Records the sink refused repeatedly (see ``emulator.logs.kafka.reader``): logged, counted."""
        reader = self._reader
        return 0 if reader is None else reader.records_dropped

    # ---------------------------------------------------------------- lifecycle

    def open(self) -> None:
        with self._lock:
            if self._closed:
                raise LogConfigError(f"{self.description} is closed")
            if self._opened:
                return
        admin = self._clients.create("admin", AdminClient, error_cb=self._client_error("admin"))
        wait_for_cluster(
            admin,
            self._clients.bootstrap,
            self._spec.name,
            self._startup_timeout_s,
            self._on_startup_wait,
            self._settings,
        )
        if self._before_create is not None:
            self._before_create()
        ensure_topic(admin, self._spec, self._timeout_s)
        count, cluster_id = wait_for_topic(admin, self._spec.name, _METADATA_WAIT_S)
        with self._lock:
            self._admin = admin
            self._partition_count = count
            self._cluster_id = cluster_id
        self._writer.open()
        if not self._with_claims:
            with self._lock:
                self._opened = True
            log.info("Opened %s with %d partitions", self.description, count)
            return
        watch = BrokerWatch(
            admin, self._clients.bootstrap, self._claims_topic, on_topic=self._claims_topic_found, errors=self._errors
        )
        with self._lock:
            self._opened = True
            self._watch = watch
        watch.probe()  # a daemon starting on a topic someone claimed on knows it before serving
        watch.start()
        log.info("Opened %s with %d partitions", self.description, count)

    def _client_error(self, role: str) -> ErrorCallback:
        return lambda err: self._errors.client_error(role, err)

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
            reader = self._reader
            if reader is not None:
                reader.request_refresh()
        return count

    def reachability(self) -> str | None:
        """Why the topic cannot be read now: the cluster does not answer (the broker watch), or it
        answers but the reader cannot fetch what is there (``TopicReader.blocked``: a record larger
        than ``receive.message.max.bytes``); ``None`` when neither."""
        watch, reader = self._watch, self._reader
        unreachable = None if watch is None else watch.unreachable()
        if unreachable is None and reader is not None:
            return reader.blocked()
        return unreachable

    def close(self) -> None:
        watch = self._watch
        if watch is not None:
            watch.close()
        with self._claims_lock:
            claims, self._claims = self._claims, None
        if claims is not None:
            claims.close()
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._writer.close()
        reader = self._reader
        if reader is not None:
            reader.close()

    @property
    def max_record_bytes(self) -> int | None:
        return self._max_record_bytes

    # ---------------------------------------------------------------- writing

    def append(self, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float = 30.0) -> list[Position]:
        return self._noted(self._writer.append(self._checked(entries), timeout_s))

    def _checked(self, entries: Sequence[tuple[bytes, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
        return [checked_entry(i, entry, self._max_record_bytes) for i, entry in enumerate(entries)]

    def _noted(self, positions: list[Position]) -> list[Position]:
        self._own_writes.note(positions)
        return positions

    def own_write_ends(self) -> dict[int, int]:
        return self._own_writes.ends()

    def read_own_writes(self, timeout_s: float) -> bool:
        reader = self._reader
        return reader is not None and reader.wait_passed(self._own_writes.ends(), timeout_s)

    def reread(self, ranges: Mapping[int, tuple[int, int]], timeout_s: float) -> Iterator[list[LogRecord]]:
        reader = self._reader
        if reader is None:
            raise LogUnavailable(f"{self.description} is not being read; call start_reading() first")
        return reader.reread(ranges, timeout_s)

    def append_transactional(
        self,
        transactional_id: str,
        entries: Sequence[tuple[bytes, bytes | None]],
        timeout_s: float = 30.0,
        fence_also: Sequence[str] = (),
    ) -> list[Position]:
        checked = self._checked(entries)
        self._require_open()
        return self._noted(self._transactions.append(transactional_id, checked, timeout_s, fence_also))

    # ---------------------------------------------------------------- reading

    def start_reading(self, sink: RecordSink) -> None:
        admin = self._require_open()
        reader = TopicReader(
            self._clients,
            self.topic,
            admin,
            errors=self._errors,
            read_committed=self._read_committed,
            timeout_s=self._timeout_s,
            refresh_s=self._refresh_s,
            batch=self._consume_batch,
            thread_name=f"offsets-reader-{self.topic}",
        )
        with self._lock:
            if self._reader is not None:
                raise LogConfigError(f"{self.description}: start_reading() was already called")
            self._reader = reader
        try:
            reader.start(sink)
        except BaseException:
            with self._lock:
                self._reader = None
            raise

    def progress(self) -> ReadProgress:
        reader = self._reader
        return ReadProgress() if reader is None else reader.progress()

    def serving(self) -> bool:
        reader = self._reader
        return reader is not None and reader.caught_up

    def wait_caught_up(self, timeout_s: float | None = None) -> bool:
        """Block until the initial read-to-end finished; False on timeout (at once if not reading)."""
        reader = self._reader
        return reader is not None and reader.wait_caught_up(timeout_s)

    def end_offsets(self, timeout_s: float | None = None) -> dict[int, int]:
        """Current high watermarks per partition, as ``TopicAdmin.endOffsets`` (``READ_UNCOMMITTED``)."""
        admin = self._require_open()
        return list_offsets(admin, self.topic, list(range(self.partition_count)), LATEST, timeout_s or self._timeout_s)

    def read_to_end(self, timeout_s: float) -> None:
        self._require_open()
        reader = self._reader
        if reader is None:
            raise LogUnavailable(f"{self.description} is not being read; call start_reading() first")
        reader.read_to_end(timeout_s, partitions=self.partition_count)

    # ---------------------------------------------------------------- ownership

    def _claims_store(self, create: bool) -> KafkaClaims | None:
        """The claims store: opened when this daemon claims (``create``) or once the watch has seen
        the topic; None while nobody ever claimed on this offsets topic. Never a broker lookup."""
        settle_s = 0.0
        with self._claims_lock:
            if self._claims is None:
                self._require_open()
                watch = self._watch
                if not create and (watch is None or not watch.topic_exists):
                    return None  # nobody ever claimed on this topic, as of the watch's last answer
                claims = KafkaClaims(
                    self.topic,
                    self._claims_topic,
                    dataclasses.replace(self._clients, purpose="the claims of the offsets log"),
                    lambda: self.partition_count,
                    self._spec.replication_factor,
                    self._timeout_s,
                    errors_to=self._errors,
                )
                created = claims.open()
                self._claims = claims
                if watch is not None:
                    watch.saw_topic()
                    if created:
                        settle_s = watch.interval_s + 0.25
            store = self._claims
        if settle_s:
            # Every other daemon on this topic learns of the new claims topic from its watch within
            # one probe interval; until then it would let an unclaimed write through. Waiting that
            # long once, before the first claim answers, keeps "a claim made through daemon A is
            # respected by daemon B" without a lookup per write.
            time.sleep(settle_s)
        return store

    def _claims_topic_found(self) -> None:
        """The watch saw the claims topic (another daemon claimed): open the store off the write path."""
        try:
            self._claims_store(create=False)
        except Exception as exc:  # retried by the next write that needs it
            self._errors.record(f"cannot open the claims topic {self._claims_topic}: {exc!r}")

    def claim(self, connector: str, owner: str, timeout_s: float | None = None) -> Claim:
        """The first claim on the topic opens the claims store, then waits for the connector's writes
        begun without one (``_storeless``) until they were answered, as long as ``timeout_s`` (the
        request's deadline; None: the log's operation timeout) allows, and refuses with ``LogTimeout``
        when they were not: such a write may land until the producer's ``message.timeout.ms`` (300 s
        by default), longer than any request waits, and a claim answered before it would have it
        land behind the claim. Refused at the deadline, nothing is claimed later either: a claim the
        request gave up on used to wait on for the log's 30 s and then be made with nobody told."""
        waited_s = self._timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + waited_s
        store = self._claims_store(create=True)
        assert store is not None
        # A write of the connector (its records or its group) that began before there was a store held
        # no connector lock: wait until it was answered, as a claim waits for a write holding the lock
        # (every later one takes it). No new one can begin: the store exists from here on.
        with self._storeless_done:
            if not self._storeless_done.wait_for(
                lambda: connector not in self._storeless_writes, max(deadline - time.monotonic(), 0.0)
            ):
                raise LogTimeout(
                    f"a write of connector {connector} begun before this claim (before the first claim on "
                    f"{self.topic}) was not answered by the broker within {waited_s:g} s, and may still land "
                    f"until the producer's message.timeout.ms ({self._clients.producer_message_timeout_s():g} s) "
                    "has passed; nothing was claimed (claim again once it was answered)"
                )
        return store.claim(connector, owner)

    def current_claim(self, connector: str, timeout_s: float | None = None) -> Claim | None:
        store = self._claims_store(create=False)
        return None if store is None else store.current(connector, timeout_s)

    def current_claims(self, connectors: Collection[str], timeout_s: float | None = None) -> dict[str, Claim]:
        store = self._claims_store(create=False)
        return {} if store is None else store.current_many(connectors, timeout_s)

    def current_all(self, timeout_s: float | None = None) -> dict[str, Claim]:
        """No claims while the watch has not seen a claims topic (nobody ever claimed on this offsets
        topic, as ``current_claim`` says too); else the claims topic read to its end."""
        store = self._claims_store(create=False)
        return {} if store is None else store.current_all(timeout_s)

    def claims_seen(self) -> int | None:
        """As the claims reader last read the topic; none while the watch has not seen a claims topic
        (as ``may_be_claimed``), None while it has but the store is not open and caught up yet. Reads
        the attributes without ``_claims_lock``: opening the store holds it across broker calls, and
        ``/status`` asks on the event loop."""
        store, watch = self._claims, self._watch
        if store is None:
            return None if watch is not None and watch.topic_exists else 0
        return store.seen_count()

    def release(self, fence: Fence) -> bool:
        store = self._claims_store(create=False)
        return False if store is None else store.release(fence)

    def may_be_claimed(self, connector: str) -> bool:
        """Whenever the claims topic exists (as far as the watch knows), only a read of it can tell."""
        with self._claims_lock:
            if self._claims is not None:
                return True
            watch = self._watch
            return watch is not None and watch.topic_exists

    def append_fenced(
        self, fence: Fence, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float = 30.0
    ) -> list[Position]:
        """A writer without a claim epoch: appended at once while nobody ever claimed on this topic
        (the claim that opens the store waits until it was answered, ``_unclaimed``), else under the
        store's connector lock (``KafkaClaims.append_unclaimed``); with an epoch, in the claim's
        transaction."""
        checked = self._checked(entries)
        if fence.epoch is None:
            return self._noted(
                self._unclaimed(
                    fence.connector,
                    lambda: self._writer.append(checked, timeout_s),
                    lambda store: store.append_unclaimed(
                        fence.connector, lambda: self._writer.append(checked, timeout_s), timeout_s
                    ),
                )
            )
        store = self._claims_store(create=False)
        if store is None:  # a claim epoch, but nobody ever claimed on this topic
            raise Fenced(fenced_message(fence.connector, fence.epoch, None))
        return self._noted(store.append_fenced(fence, checked, timeout_s))

    def write_fenced(self, fence: Fence, write: Callable[[], T], timeout_s: float = 30.0) -> T:
        """Under the claims store's connector lock (``KafkaClaims.write_fenced``). While nobody ever
        claimed on this topic there is no store: a write without a claim epoch runs at once, and the
        claim that opens the store waits until it returned (``_unclaimed``)."""
        if fence.epoch is not None:
            store = self._claims_store(create=False)
            if store is None:  # a claim epoch, but nobody ever claimed on this topic
                raise Fenced(fenced_message(fence.connector, fence.epoch, None))
            return store.write_fenced(fence, write, timeout_s)
        return self._unclaimed(fence.connector, write, lambda store: store.write_fenced(fence, write, timeout_s))

    def start_append_fenced(
        self, fence: Fence, entries: Sequence[tuple[bytes, bytes | None]]
    ) -> Future[list[Position]] | None:
        """Only a write without a claim epoch while nobody ever claimed on this topic (the common
        case, and the one ``append_fenced`` appends with no claims lookup): anything else needs the
        claims store's lock or a transaction, both blocking. Counted as a store-less write until its
        records were answered, as ``append_fenced`` counts it."""
        if fence.epoch is not None:
            return None
        checked = self._checked(entries)
        if not self._claims_lock.acquire(blocking=False):  # the store is being opened: wait in a worker
            return None
        try:
            storeless = self._begin_storeless(fence.connector)
        finally:
            self._claims_lock.release()
        if not storeless:
            return None
        return self._storeless(fence.connector, lambda: self._noting(self._writer.start(checked)), lambda s: s)

    # ---------------------------------------------------------------- writes begun without a claims store

    def _unclaimed(self, connector: str, write: Callable[[], T], under_store: Callable[[KafkaClaims], T]) -> T:
        """A write presenting no claim epoch: ``write()`` at once, counted as store-less, while nobody
        ever claimed on this topic; else ``under_store(store)``, which checks it under the store's
        connector lock."""
        while True:
            with self._claims_lock:
                storeless = self._begin_storeless(connector)
            if storeless:
                return self._storeless(connector, write)
            store = self._claims_store(create=False)
            if store is not None:
                return under_store(store)
            # The store was dropped meanwhile (``close``, on a log without a watch): decide again.

    def _begin_storeless(self, connector: str) -> bool:
        """True, with ``connector``'s write counted in ``_storeless_writes``, when there is no claims
        store and the watch has seen no claims topic; False when writes go through the store. The
        caller holds ``_claims_lock``: the check and the count are one step, so the claim that opens
        the store either finds the write counted or the write finds the store."""
        watch = self._watch
        if self._claims is not None or (watch is not None and watch.topic_exists):
            return False
        with self._storeless_done:
            self._storeless_writes[connector] = self._storeless_writes.get(connector, 0) + 1
        return True

    def _storeless(
        self,
        connector: str,
        write: Callable[[], T],
        pending: Callable[[T], Future[Any] | None] = lambda _: None,
    ) -> T:
        """``write()``, counted (``_begin_storeless`` returned True) until it was answered: when it
        returns or raises, or later, once an outcome still open then is known (``pending(result)``:
        a started write's future; the outcome of a ``WriteOutcomeUnknown``: records with the producer,
        unacknowledged by the deadline, which may still land). Like the connector lock a write keeps
        until the broker answered (``KafkaClaims.append_unclaimed``), so a claim never answers while
        such a write may still land behind it."""
        outcome: Future[Any] | None = None
        try:
            result = write()
            outcome = pending(result)
            return result
        except WriteOutcomeUnknown as unknown:
            outcome = unknown.outcome
            raise
        finally:
            if outcome is None:
                self._end_storeless(connector)
            else:
                outcome.add_done_callback(lambda _: self._end_storeless(connector))

    def _end_storeless(self, connector: str) -> None:
        """A counted write was answered (on its own thread, or the producer's delivery-report thread)."""
        with self._storeless_done:
            left = self._storeless_writes.pop(connector) - 1
            if left:
                self._storeless_writes[connector] = left
            self._storeless_done.notify_all()

    def _noting(self, started: Future[list[Position]] | None) -> Future[list[Position]] | None:
        """Notes a started write's positions once written, before the caller's callbacks run."""
        if started is not None:
            started.add_done_callback(self._noted_when_written)
        return started

    def _noted_when_written(self, done: Future[list[Position]]) -> None:
        if not done.cancelled() and done.exception() is None:
            self._noted(done.result())
