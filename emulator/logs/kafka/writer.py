"""Writing offsets records to the topic: Java's placement, acknowledged writes, concurrent appends.

Placement follows the Java producer, not librdkafka: the partition is computed here with murmur2 and
passed explicitly, otherwise our record and Connect's record for the same key land in different
partitions and compaction never merges them (see ``emulator.codec.murmur2``).

An append returns only once the broker acknowledged every one of its records (``acks=all``,
idempotent producer); each call waits for its own delivery reports only, so concurrent appends never
wait for each other, and a dedicated thread serves the reports the moment they arrive.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from emulator.codec.murmur2 import partition_for
from emulator.logs.base import record_too_large
from emulator.logs.kafka.config import KafkaClientConfig
from emulator.logs.last_error import LastError
from emulator.logs.write_timings import WriteTimings
from emulator.model.errors import InvalidRecord, LogConfigError, LogWriteError, WriteOutcomeUnknown
from emulator.model.records import Position

log = logging.getLogger(__name__)

_CLOSE_FLUSH_S = 5.0
_START_QUEUE_ROOM = 10_000
"""``start`` hands records over only while the producer's local queue holds fewer than this many
(librdkafka refuses more at ``queue.buffering.max.messages``, 100,000 by default): a queue that full
means a broker that does not keep up, and the blocking path waits for room instead."""


def checked_entry(
    index: int, entry: tuple[bytes, bytes | None], max_bytes: int | None = None
) -> tuple[bytes, bytes | None]:
    """One ``(key, value-or-None)`` pair as bytes, or ``InvalidRecord`` naming the entry: checked before
    anything is written, so a bad entry never leaves half an append behind.

    ``max_bytes``: the producer's ``message.max.bytes``. librdkafka refuses a bigger record itself
    (``MSG_SIZE_TOO_LARGE``), which reached the client as a 500 and the log as an ERROR: it is the
    request's to fix, as a 400. Key and value alone are counted, so a record librdkafka would take is
    never refused here (it adds a few dozen bytes of framing and may refuse one just under)."""
    try:
        key, value = entry
    except (TypeError, ValueError):
        raise InvalidRecord(f"entry {index}: expected a (key, value) pair, got {entry!r}") from None
    if not isinstance(key, bytes | bytearray | memoryview):
        raise InvalidRecord(f"entry {index}: key must be bytes, got {type(key).__name__}")
    if value is not None and not isinstance(value, bytes | bytearray | memoryview):
        raise InvalidRecord(f"entry {index}: value must be bytes or None, got {type(value).__name__}")
    if max_bytes is not None:
        problem = record_too_large(len(key) + (0 if value is None else len(value)), max_bytes)
        if problem is not None:
            raise InvalidRecord(f"entry {index}: {problem}")
    return bytes(key), (None if value is None else bytes(value))


class _PendingAppend:
    """Delivery reports of one ``append`` call, so concurrent appends never wait for each other.

    ``outcome`` completes once every record handed to the producer has its report: with the
    positions, or with a ``LogWriteError`` naming what was not written. An append that timed out
    hands it to its caller (``WriteOutcomeUnknown``), which learns the outcome from it later.
    """

    __slots__ = (
        "abandoned",
        "deadline",
        "description",
        "errors",
        "lock",
        "outcome",
        "positions",
        "remaining",
        "started",
        "timings",
    )

    def __init__(self, count: int, deadline: float, description: str, timings: WriteTimings) -> None:
        self.started = time.monotonic()
        self.timings = timings
        self.deadline = deadline
        self.description = description
        self.positions: list[Position | None] = [None] * count
        self.errors: list[tuple[int, KafkaError]] = []
        self.remaining = count
        self.abandoned = False
        self.lock = threading.Lock()
        self.outcome: Future[list[Position]] = Future()
        self.outcome.set_running_or_notify_cancel()  # records with the producer cannot be taken back

    def delivered(self, index: int, err: KafkaError | None, msg: Message) -> None:
        with self.lock:
            if err is not None:
                self.errors.append((index, err))
            else:
                self.positions[index] = Position(msg.partition() or 0, msg.offset() or 0)
            self.remaining -= 1
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
        self._complete_if_done()

    def handed_over(self, count: int) -> None:
        """Only the first ``count`` records reached the producer: expect reports for those only."""
        with self.lock:
            self.remaining -= len(self.positions) - count
            del self.positions[count:]
        self._complete_if_done()

    def _complete_if_done(self) -> None:
        with self.lock:
            if self.remaining > 0 or self.outcome.done():
                return
            positions, errors = list(self.positions), list(self.errors)
        total = len(positions)
        if errors:
            index, err = errors[0]
            acked = sum(1 for p in positions if p is not None)
            self.outcome.set_exception(
                LogWriteError(
                    f"{len(errors)} of {total} offsets records were not acknowledged by {self.description} "
                    f"(first: entry {index}: {err.name()}: {err.str()}); {acked} were written"
                )
            )
        else:
            self.timings.observe(time.monotonic() - self.started, total)
            self.outcome.set_result([p for p in positions if p is not None])

    def abandon(self) -> None:
        with self.lock:
            self.abandoned = True


class OffsetsWriter:
    """The offsets log's producer, its delivery-report thread, and the appends in flight.

    ``partition_count`` gives the count to place by at the moment of each append (no metadata lookup
    on the write path: the log refreshes it).
    """

    def __init__(
        self,
        clients: KafkaClientConfig,
        topic: str,
        errors: LastError,
        partition_count: Callable[[], int],
        timings: WriteTimings,
    ) -> None:
        self._clients = clients
        self._topic = topic
        self._errors = errors
        self._partition_count = partition_count
        self._timings = timings
        self._lock = threading.Lock()  # guards the state below (not the producer itself)
        self._producing = 0  # appends between taking the producer and handing over their last record
        self._no_producers = threading.Condition(self._lock)
        self._producer: Producer | None = None
        self._fatal: str | None = None
        self._closed = False
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    @property
    def description(self) -> str:
        return self._errors.description

    def open(self) -> None:
        """Create the producer (a refused setting raises ``LogConfigError``) and its report thread."""
        producer = self._new_producer()
        with self._lock:
            self._producer = producer
        self._poller = threading.Thread(target=self._poll, name=f"offsets-producer-{self._topic}", daemon=True)
        self._poller.start()

    def _new_producer(self) -> Producer:
        return self._clients.create("producer", Producer, error_cb=self._on_error)

    def _on_error(self, err: KafkaError) -> None:
        """librdkafka's ``error_cb``: clients retry by themselves, except after a fatal
        idempotent-producer error, which needs a new producer."""
        if err.fatal():
            with self._lock:
                self._fatal = str(err)
        self._errors.client_error("producer", err)

    def _poll(self) -> None:
        """Serves delivery reports, so an appender wakes the moment its own records are acknowledged."""
        while not self._stop.is_set():
            producer = self._producer
            if producer is None:
                return
            try:
                producer.poll(0.1)
            except Exception as exc:  # a raising callback must not end delivery for everyone else
                self._errors.record(f"producer poll failed: {exc!r}", logging.ERROR)

    def close(self) -> None:
        """Refuse new appends, let those handing over records finish, then flush (purging what the
        broker does not take within ``_CLOSE_FLUSH_S``). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # A producer must not be closed under a thread that is still handing it records.
            self._no_producers.wait_for(lambda: self._producing == 0, timeout=_CLOSE_FLUSH_S)
        self._stop.set()
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

    # ---------------------------------------------------------------- appending

    def append(self, checked: list[tuple[bytes, bytes | None]], timeout_s: float) -> list[Position]:
        """Write already checked entries; blocks until every one is acknowledged, ``LogWriteError``
        (nothing unacknowledged is reported written), or, after ``timeout_s`` with records handed to
        the producer, ``WriteOutcomeUnknown`` whose ``outcome`` says later what became of them."""
        if not checked:
            return []
        taken = self._take_producer(wait=True)
        assert taken is not None
        producer, count = taken
        try:
            pending = self._produce_all(producer, count, checked, timeout_s)
        finally:
            self._done_producing()
        return self._await_acks(pending, len(checked), timeout_s)

    def start(self, checked: list[tuple[bytes, bytes | None]]) -> Future[list[Position]] | None:
        """``append`` without waiting for the acknowledgements, for a caller that must not block (the
        event loop): the outcome, completed on the delivery-report thread, or None when the records
        cannot be handed over at once (the producer is busy being replaced or its local queue is
        filling up: the caller falls back to ``append``). Never blocks."""
        taken = self._take_producer(wait=False)
        if taken is None:
            return None
        producer, count = taken
        try:
            if len(producer) + len(checked) > _START_QUEUE_ROOM:
                return None
            pending = _PendingAppend(len(checked), float("inf"), self.description, self._timings)
            for index, (key, value) in enumerate(checked):
                if not self._hand(producer, count, pending, index, key, value):
                    if index == 0:  # nothing handed over: the blocking path waits for room
                        return None
                    raise self._partly_handed(
                        pending, index, len(checked), f"the local queue of {self.description}'s producer is full"
                    )
        finally:
            self._done_producing()
        return pending.outcome

    def _take_producer(self, *, wait: bool) -> tuple[Producer, int] | None:
        """The producer and partition count for one append; pair every call with ``_done_producing``.
        ``wait=False`` (the event loop): None instead of waiting for the lock or replacing a producer."""
        stale: Producer | None = None
        count = self._partition_count()
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            if self._closed:
                raise LogWriteError(f"{self.description} is closed")
            if self._producer is None:
                raise LogConfigError(f"{self.description} is not open; call open() first")
            if self._fatal is not None:
                if not wait:
                    return None
                # An idempotent producer that hit a fatal error refuses everything from then on.
                log.warning("%s: replacing the producer after: %s", self.description, self._fatal)
                self._fatal = None
                stale, self._producer = self._producer, self._new_producer()
            producer = self._producer
            self._producing += 1
        finally:
            self._lock.release()
        if stale is not None:  # outside the lock: the purged records' callbacks take it
            stale.purge()
            stale.flush(1.0)
        return producer, count

    def _done_producing(self) -> None:
        with self._lock:
            self._producing -= 1
            if self._producing == 0:
                self._no_producers.notify_all()

    def _produce_all(
        self, producer: Producer, count: int, checked: Sequence[tuple[bytes, bytes | None]], timeout_s: float
    ) -> _PendingAppend:
        """Hand every record to the producer (waiting while its local queue is full, until ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        pending = _PendingAppend(len(checked), deadline, self.description, self._timings)
        for index, (key, value) in enumerate(checked):
            while not self._hand(producer, count, pending, index, key, value):
                if time.monotonic() >= deadline:
                    raise self._partly_handed(
                        pending,
                        index,
                        len(checked),
                        f"Timed out after {timeout_s:g}s queueing offsets records to {self.description}",
                    )
                time.sleep(0.01)  # local queue full: wait for the broker to drain it
        return pending

    def _hand(
        self,
        producer: Producer,
        count: int,
        pending: _PendingAppend,
        index: int,
        key: bytes,
        value: bytes | None,
    ) -> bool:
        """Hand one record to the producer: False when its local queue is full (nothing handed)."""
        try:
            # value=None is the tombstone; b"" would be a live empty entry to Connect.
            producer.produce(
                self._topic,
                value=value,
                key=key,
                partition=partition_for(key, count),
                on_delivery=functools.partial(pending.delivered, index),
            )
        except BufferError:
            return False
        except KafkaException as exc:
            raise self._partly_handed(
                pending,
                index,
                len(pending.positions),
                f"Could not produce to {self.description}: {exc.args[0] if exc.args else exc}",
            ) from exc
        return True

    @staticmethod
    def _partly_handed(
        pending: _PendingAppend, index: int, total: int, why: str
    ) -> LogWriteError | WriteOutcomeUnknown:
        """Records ``0..index-1`` are with the producer and may still be written; the rest are not."""
        pending.abandon()
        pending.handed_over(index)
        if index == 0:
            refused = LogWriteError(f"{why}; nothing was written")
            refused.left_no_records = True  # not one record reached the producer
            return refused
        return WriteOutcomeUnknown(
            f"{why}: {index} of {total} records were handed to the producer and may still be written",
            pending.outcome,
        )

    def _await_acks(self, pending: _PendingAppend, total: int, timeout_s: float) -> list[Position]:
        """The positions, ``LogWriteError`` (the broker refused), or ``WriteOutcomeUnknown`` carrying
        the outcome that completes when the last report arrives (librdkafka's ``message.timeout.ms``
        bounds that: every handed record gets a report)."""
        if not pending.outcome.done():
            try:
                return pending.outcome.result(max(pending.deadline - time.monotonic(), 0.0))
            except FutureTimeout:
                pending.abandon()
                with pending.lock:
                    acked = sum(1 for p in pending.positions if p is not None)
                raise WriteOutcomeUnknown(
                    f"{self.description} did not acknowledge {total} offsets records within {timeout_s:g}s "
                    f"({acked} acknowledged); the rest may still be written",
                    pending.outcome,
                ) from None
        return pending.outcome.result()
