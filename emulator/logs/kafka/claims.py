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
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from emulator.codec.murmur2 import partition_for
from emulator.logs.kafka.config import KafkaClientConfig
from emulator.logs.kafka.reader import TopicReader
from emulator.logs.kafka.topics import TopicSpec, ensure_topic
from emulator.logs.last_error import LastError
from emulator.model.claims import Claim, Fence, Fenced, fenced_message, held_message, refuse_unless_current
from emulator.model.errors import ClaimHeld, Conflict, LogTimeout, LogUnavailable, LogWriteError, WriteOutcomeUnknown
from emulator.model.records import LogRecord, Position

log = logging.getLogger(__name__)

T = TypeVar("T")

_RESOLVE_S = 300.0
"""How long a transaction whose commit timed out keeps being committed in the background (librdkafka's
``message.timeout.ms`` default); the connector's next write waits for it."""
_RESOLVE_STEP_S = 5.0
_MOVED_ON_CHECK_S = 0.5
""""Did a newer claim fence this writer?" is asked of the claims topic with this bound (a fenced
write's answer must still come within the request's deadline; the flush stops this much earlier)."""


def transactional_id(offsets_topic: str, connector: str) -> str:
    """Stable per (offsets topic, connector), so every daemon's claim fences every other's."""
    return f"connect-offsets-emulator:{offsets_topic}:{connector}"


def _fatal_or_fenced(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError):
        return False
    return bool(err.fatal()) or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)


def _needs_abort(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and bool(err.txn_requires_abort())


def _retriable(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and (bool(err.retriable()) or err.code() == KafkaError._TIMED_OUT)


def _kafka_cause(exc: BaseException) -> BaseException:
    """The ``KafkaException`` behind a ``SystemError`` from a callback, if there is one."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KafkaException):
            return seen
        seen = seen.__context__ or seen.__cause__
    return exc


class _Transaction:
    """One fenced write's transaction: its records' delivery reports, flushed and committed in steps."""

    def __init__(self, producer: Producer, fence: Fence, count: int) -> None:
        self.producer = producer
        self.fence = fence
        self.positions: list[Position | None] = [None] * count
        self.errors: list[KafkaError] = []

    def delivered(self, index: int, err: KafkaError | None, msg: Message) -> None:
        # Touch nothing on ``err`` here: after a fatal (fencing) error confluent-kafka calls back
        # with a Python exception pending, and any call on it raises SystemError.
        if err is not None:
            self.errors.append(err)
        else:
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None
            self.positions[index] = Position(partition, offset)

    def flush(self, deadline: float) -> bool:
        """True once every record has its report and none failed (then the commit may follow)."""
        try:
            unflushed = self.producer.flush(max(deadline - time.monotonic(), 0.0))
        except SystemError as exc:  # a fatal error surfaced through a delivery callback
            cause = _kafka_cause(exc)
            if isinstance(cause, KafkaException):
                raise cause from exc
            # confluent-kafka sometimes loses that exception ("returned NULL without setting an
            # exception", seen once in CI right after librdkafka's fatal _FENCED): the producer is
            # past use either way, and nothing of this transaction was committed.
            lost = KafkaError(KafkaError._FATAL, f"the transactional producer failed: {exc}", fatal=True)
            raise KafkaException(lost) from exc
        if self.errors:
            first = self.errors[0]
            if first.fatal() or first.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED):
                raise KafkaException(first)
            return False
        return unflushed == 0 and all(p is not None for p in self.positions)

    def refused(self) -> LogWriteError:
        return LogWriteError(f"offsets write for {self.fence.connector} not acknowledged: {self.errors[0]}")

    def finish(self, timeout_s: float) -> None:
        self.producer.commit_transaction(timeout_s)

    def positions_or_raise(self) -> list[Position]:
        missing = sum(1 for p in self.positions if p is None)
        if missing:
            raise LogWriteError(f"offsets write for {self.fence.connector}: {missing} record(s) unconfirmed")
        return [p for p in self.positions if p is not None]


class KafkaClaims:
    """The claims topic of one offsets topic, read ``read_committed`` by its own reader, and the
    transactional producer of every connector this daemon holds a claim for."""

    def __init__(
        self,
        offsets_topic: str,
        claims_topic: str,
        clients: KafkaClientConfig,
        partition_count: Callable[[], int],
        replication_factor: int = -1,
        timeout_s: float = 30.0,
        *,
        errors_to: LastError | None = None,
    ) -> None:
        """``errors_to``: the offsets log's last error, which keeps this store's errors too (its
        reader's, its admin client's), so that ``/status`` and the metrics show a claims topic that
        could not be read; logged under the claims topic's own description."""
        self._offsets_topic = offsets_topic
        self._claims_topic = claims_topic
        self._clients = clients
        self._partition_count = partition_count
        self._replication_factor = replication_factor
        self._timeout_s = timeout_s
        self._errors = LastError(f"kafka://{clients.bootstrap}/{claims_topic}", log, also=errors_to)
        self._lock = threading.Lock()
        self._claims: dict[str, Claim | None] = {}
        self._last_epoch: dict[str, int] = {}
        self._producers: dict[str, tuple[int, Producer]] = {}
        self._connector_locks: dict[str, threading.Lock] = {}
        self._reader: TopicReader | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def open(self) -> bool:
        """Create or verify the claims topic and start reading it; True if this call created it."""
        admin = self._clients.create("admin", AdminClient, error_cb=lambda err: self._errors.client_error("admin", err))
        created = ensure_topic(admin, TopicSpec(self._claims_topic, 1, self._replication_factor), self._timeout_s)
        reader = TopicReader(
            self._clients,
            self._claims_topic,
            admin,
            errors=self._errors,
            read_committed=True,  # an aborted claim never counts
            timeout_s=self._timeout_s,
            # A handful of records, read on every claim: latency matters, replay speed does not.
            replay_fetch_wait_ms=self._clients.tail_fetch_wait_ms,
            thread_name=f"claims-reader-{self._claims_topic}",
        )
        reader.start(self._apply_all)
        self._reader = reader
        return created

    def close(self) -> None:
        with self._lock:
            producers = list(self._producers.values())
            self._producers.clear()
            reader, self._reader = self._reader, None
        for _, producer in producers:
            producer.flush(5)
        if reader is not None:
            reader.close()

    # -- reading the claims topic ---------------------------------------------------------
    def _read_to_end(self, timeout_s: float | None = None) -> None:
        """Wait until the claims topic is applied up to its current end (waits out open claiming
        transactions: the end is the high watermark, and the reader is ``read_committed``)."""
        reader = self._reader
        if reader is None:
            raise LogWriteError(f"claims topic {self._claims_topic} is not open")
        timeout = self._timeout_s if timeout_s is None else timeout_s
        try:
            reader.read_to_end(timeout)
        except LogUnavailable as exc:
            raise LogTimeout(
                f"claims topic {self._claims_topic} not read to its end within {timeout:g} s (the broker did not "
                f"answer, or an open claiming transaction is stuck): {exc.message}; nothing was written"
            ) from exc

    def _apply_all(self, records: Sequence[LogRecord]) -> None:
        """The reader's sink: the latest claim and the highest epoch per connector."""
        with self._lock:
            for record in records:
                self._apply(record)

    def _apply(self, record: LogRecord) -> None:
        if record.key is None:
            log.warning("claims topic %s: record without key at offset %s skipped", self._claims_topic, record.offset)
            return
        connector = record.key.decode("utf-8", errors="replace")
        try:
            value = json.loads(record.value) if record.value is not None else None
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

    def current(self, connector: str, timeout_s: float | None = None) -> Claim | None:
        """The connector's claim as committed in the topic now (reads the topic to its end first)."""
        self._read_to_end(timeout_s)
        return self.cached(connector)

    def current_many(self, connectors: Collection[str], timeout_s: float | None = None) -> dict[str, Claim]:
        """``current`` for many connectors from one read of the topic to its end."""
        self._read_to_end(timeout_s)
        with self._lock:
            claims = {name: self._claims.get(name) for name in connectors}
        return {name: claim for name, claim in claims.items() if claim is not None}

    def current_all(self, timeout_s: float | None = None) -> dict[str, Claim]:
        """Every connector's current claim, from one read of the topic to its end (a released claim's
        marker leaves none)."""
        self._read_to_end(timeout_s)
        with self._lock:
            return {name: claim for name, claim in self._claims.items() if claim is not None}

    def seen_count(self) -> int | None:
        """How many connectors are claimed as the reader last read the topic, without asking the broker;
        None until its first read to the end (a partial replay would undercount)."""
        reader = self._reader
        if reader is None or not reader.caught_up:
            return None
        with self._lock:
            return sum(1 for claim in self._claims.values() if claim is not None)

    def cached(self, connector: str) -> Claim | None:
        """The connector's claim as last read, without asking the broker."""
        with self._lock:
            return self._claims.get(connector)

    # -- claiming -------------------------------------------------------------------------
    def _connector_lock(self, connector: str) -> threading.Lock:
        with self._lock:
            return self._connector_locks.setdefault(connector, threading.Lock())

    def _new_producer(self, connector: str) -> Producer:
        producer = self._clients.create(
            "transactional producer",
            Producer,
            # Being fenced is this producer's expected end, not the offsets log's producer failing.
            error_cb=functools.partial(self._on_producer_error, connector),
            transactional_id=transactional_id(self._offsets_topic, connector),
        )
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

    # -- writes -------------------------------------------------------------------------
    def append_unclaimed(
        self, connector: str, append: Callable[[], list[Position]], timeout_s: float
    ) -> list[Position]:
        """``append()`` for a writer that presents no claim, refused with ``ClaimHeld`` while the
        connector is claimed (as of the caller's last read of this topic, ``current``).

        Atomic with claims made through this daemon: both hold the connector's lock, and a write
        whose outcome is unknown keeps it until the log answered, so a claim never answers while an
        unclaimed write may still land behind it. A claim made through another daemon in the
        milliseconds between that read and this write is outside what the broker can fence (see
        docs/claims-and-sequences.md).
        """
        lock = self._connector_lock(connector)
        if not lock.acquire(timeout=max(timeout_s, 0.0)):
            raise LogTimeout(
                f"an earlier write or claim of connector {connector} is still waiting for the broker's answer; "
                "nothing was written"
            )
        release_now = True
        try:
            held = self.cached(connector)
            if held is not None:
                raise ClaimHeld(held_message(connector, held))
            return append()
        except WriteOutcomeUnknown as unknown:
            if unknown.outcome is not None:
                release_now = False
                unknown.outcome.add_done_callback(lambda _: lock.release())
            raise
        finally:
            if release_now:
                lock.release()

    def write_fenced(self, fence: Fence, write: Callable[[], T], timeout_s: float) -> T:
        """``write()``, a write outside the offsets topic (a sink connector's consumer group, through
        the admin client), under the connector's lock: refused with ``ClaimHeld`` for a writer without
        a claim epoch while the connector is claimed, with ``Fenced`` for an epoch that is no longer
        the current claim (both as of the caller's last read of this topic, ``current``).

        Atomic with claims made through this daemon, as ``append_unclaimed`` is: ``write()`` runs on
        the caller's thread holding the lock and keeps it until it returns, even after the request's
        deadline passed, so a claim never answers while such a write may still land behind it. The
        epoch's claim may have been made through another daemon (the group needs no producer of
        ours). A claim made through another daemon after that read is outside this lock.
        """
        lock = self._connector_lock(fence.connector)
        if not lock.acquire(timeout=max(timeout_s, 0.0)):
            raise LogTimeout(
                f"an earlier write or claim of connector {fence.connector} is still waiting for the broker's "
                "answer; nothing was written"
            )
        try:
            refuse_unless_current(fence, self.cached(fence.connector))
            return write()
        finally:
            lock.release()

    def append_fenced(
        self, fence: Fence, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float
    ) -> list[Position]:
        """One transaction of the claim's producer: committed, refused (``Fenced``: the claim moved on,
        nothing committed), aborted (``LogWriteError``: nothing committed), or, when the broker does
        not answer within ``timeout_s``, ``WriteOutcomeUnknown`` whose outcome a resolver thread
        settles by finishing the commit; the connector's lock stays held until then."""
        assert fence.epoch is not None, "an unclaimed writer goes through append_unclaimed"
        lock = self._connector_lock(fence.connector)
        if not lock.acquire(timeout=max(timeout_s, 0.0)):
            raise LogTimeout(
                f"an earlier write of connector {fence.connector} is still waiting for the broker's answer; "
                "nothing was written"
            )
        handed_over = False
        try:
            producer, held = self._claim_producer(fence, timeout_s)
            write = _Transaction(producer, fence, len(entries))
            deadline = time.monotonic() + timeout_s
            try:
                producer.begin_transaction()
                count = self._partition_count()
                for index, (key, value) in enumerate(entries):
                    producer.produce(
                        self._offsets_topic,
                        key=key,
                        value=value,
                        partition=partition_for(key, count),
                        on_delivery=functools.partial(write.delivered, index),
                    )
                if write.flush(deadline - _MOVED_ON_CHECK_S):
                    write.finish(max(deadline - time.monotonic(), 0.0))
                    return write.positions_or_raise()
                if write.errors:
                    raise write.refused()
                # Handed over, not acknowledged in time: fenced by a newer claim, or only the broker knows yet.
                moved, current = self._moved_on(fence)
                if moved:
                    raise self._fenced(fence, held, current)
            except KafkaException as exc:
                if _fatal_or_fenced(exc):
                    raise self._fenced(fence, held) from exc
                if _needs_abort(exc):
                    self._abort(producer)
                    raise LogWriteError(
                        f"offsets write for {fence.connector} failed and was aborted: {exc}; nothing was written"
                    ) from exc
                moved, current = self._moved_on(fence)
                if moved:
                    raise self._fenced(fence, held, current) from exc
            except LogWriteError:
                self._abort(producer)
                raise
            outcome: Future[list[Position]] = Future()
            threading.Thread(
                target=self._resolve,
                args=(write, held, lock, outcome),
                name=f"claims-resolve-{fence.connector}",
                daemon=True,
            ).start()
            handed_over = True
            raise WriteOutcomeUnknown(
                f"the offsets transaction for connector {fence.connector} was not committed within "
                f"{timeout_s:g} s; the daemon keeps committing it and holds the connector's next write until "
                "the broker answers",
                outcome,
            )
        finally:
            if not handed_over:
                lock.release()

    def _claim_producer(self, fence: Fence, timeout_s: float) -> tuple[Producer, tuple[int, Producer]]:
        """The transactional producer of ``fence``'s claim, or ``Fenced`` saying why there is none."""
        assert fence.epoch is not None
        with self._lock:
            held = self._producers.get(fence.connector)
        if held is None or held[0] != fence.epoch:
            current = self.current(fence.connector, timeout_s)
            if current is not None and current.epoch == fence.epoch:
                raise Fenced(
                    f"Connector {fence.connector}'s claim with epoch {fence.epoch} was made through another "
                    "daemon, or through this one before it restarted; commit through the daemon that holds it "
                    "(its transactional producer holds the claim), or claim again through this one"
                )
            raise Fenced(fenced_message(fence.connector, fence.epoch, current))
        return held[1], held

    def _fenced(self, fence: Fence, held: tuple[int, Producer], current: Claim | None = None) -> Fenced:
        """The claim's producer was fenced: forget it, and say who holds the connector now.

        Always after the transaction's records were handed to the producer: the broker aborts them,
        but an uncommitted reader may still see them, so the refusal does not say the log holds none
        (``OffsetsError.left_no_records``; a refusal before the transaction began says it does)."""
        assert fence.epoch is not None
        with self._lock:
            if self._producers.get(fence.connector) is held:
                del self._producers[fence.connector]
        if current is None:
            current = self._current_or_cached(fence.connector)
        fenced = Fenced(fenced_message(fence.connector, fence.epoch, current))
        fenced.left_no_records = False
        return fenced

    def _current_or_cached(self, connector: str) -> Claim | None:
        """The claim as the topic says now, or as last read when the broker does not answer soon."""
        try:
            return self.current(connector, timeout_s=_MOVED_ON_CHECK_S)
        except (LogWriteError, LogUnavailable) as lookup:
            log.info(
                "claims topic %s unreadable now (%s); using the claims last read", self._claims_topic, lookup.message
            )
            return self.cached(connector)

    def _moved_on(self, fence: Fence) -> tuple[bool, Claim | None]:
        """Whether a newer claim (or a release) ended ``fence``'s claim, and the claim now. A fenced
        producer's flush or commit may end in a timeout rather than a fencing error."""
        current = self._current_or_cached(fence.connector)
        return current is None or current.epoch != fence.epoch, current

    def _resolve(
        self,
        write: _Transaction,
        held: tuple[int, Producer],
        lock: threading.Lock,
        outcome: Future[list[Position]],
    ) -> None:
        """Finish a transaction whose commit timed out: retry the commit until the broker answers
        (committed, fenced or aborted), for at most ``_RESOLVE_S``; then release the connector."""
        deadline = time.monotonic() + _RESOLVE_S
        try:
            while True:
                step = time.monotonic() + min(_RESOLVE_STEP_S, max(deadline - time.monotonic(), 0.0))
                try:
                    if write.flush(step):
                        write.finish(max(step - time.monotonic(), 0.0))
                        outcome.set_result(write.positions_or_raise())
                        return
                    if write.errors:
                        self._abort(write.producer)
                        raise write.refused()
                except KafkaException as exc:
                    if _fatal_or_fenced(exc):
                        raise self._fenced(write.fence, held) from exc
                    if _needs_abort(exc) or not _retriable(exc):
                        self._abort(write.producer)
                        raise LogWriteError(
                            f"offsets write for {write.fence.connector} failed and was aborted: {exc}; "
                            "nothing was written"
                        ) from exc
                if time.monotonic() >= deadline:
                    raise LogWriteError(
                        f"offsets transaction for {write.fence.connector} still unanswered after {_RESOLVE_S:g} s; "
                        "its outcome is unknown (a later read shows whether it was committed)"
                    )
        except BaseException as exc:  # every outcome is delivered, whatever happened
            outcome.set_exception(exc)
        finally:
            lock.release()

    def _abort(self, producer: Producer) -> None:
        try:
            producer.abort_transaction(self._timeout_s)
        except KafkaException as exc:
            log.warning("aborting an offsets transaction failed: %s", exc)
