"""Reading a topic the way Connect's ``KafkaBasedLog`` does: every partition from its beginning, then tail.

Assign *every* partition at the beginning (no group, no commits), take the high watermarks as the
end, and count the topic as read once every partition's *position* reaches its end. Positions, not
the offset of the last record seen, because compaction gaps and transaction markers at the end of a
partition leave no record to see.

One reader serves the offsets log, the claims topic and Connect's config and status topics, so they
share one policy for whatever goes wrong while reading:

- a sink that raises is retried ``_SINK_ATTEMPTS`` times with a growing backoff; then each record of
  the batch is handed over alone, and only one the sink still fails on is counted as dropped and
  logged at ERROR with its position (``KafkaBasedLog`` skips the whole poll batch its callback throws
  on, good records with the bad one; we skip the bad one alone, never silently);
- any other error is logged, kept as ``last_error`` and retried after a backoff: the thread never
  dies of it;
- partitions added to the topic are picked up (Connect would need a restart).

``read_to_end`` is Connect's ``readToEnd()``: fetch the current end offsets and wait, on a condition
variable the reader signals after every batch, until the positions pass them. Whatever was written
before the call has then been delivered to the sink.

Once caught up, the end offsets in ``progress()`` follow the log: each turn takes the high watermark
every fetch response carries (librdkafka caches it per partition, so this costs no request), never
below the position. ``end - position`` is then the reader's lag, for ``/status`` and the metrics.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator, Mapping

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from emulator.logs.base import ReadProgress, RecordSink
from emulator.logs.kafka.config import RECEIVE_MESSAGE_MAX_BYTES, KafkaClientConfig
from emulator.logs.kafka.topics import EARLIEST, LATEST, list_offsets, wait_for_partition_count
from emulator.logs.last_error import LastError
from emulator.model.errors import LogConfigError, LogTimeout, LogUnavailable
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)

_IDLE_POLL_S = 0.2  # how long the reader blocks for the first record of a batch; bounds close()
_RETRY_BACKOFF_S = 1.0
_SINK_ATTEMPTS = 3
_REFRESH_TIMEOUT_S = 5.0  # a periodic metadata check must not hold up reading for long
_JOIN_S = _IDLE_POLL_S + 10.0

# fetch.wait.max.ms, unless the user's settings name it. Kafka answers a fetch as soon as data exists,
# so these only matter on brokers that hold every fetch until the deadline, as Tansu 0.6 does: there
# a long wait fills each response (replay measured ~2-3x faster at 500 than at 100 ms), and a short
# one bounds how late a tailed record (read-your-writes) arrives. Hence one consumer per phase when
# the tail's wait (``KafkaClientConfig.tail_fetch_wait_ms``, ``--tail-fetch-wait``) differs.
REPLAY_FETCH_WAIT_MS = "500"  # librdkafka's default, and Java's fetch.max.wait.ms default


_OVERSIZED = re.compile(r"Invalid response size (\d+) \(0\.\.(\d+)\)")
"""librdkafka's words for a response over ``receive.message.max.bytes``: ``Receive failed: Invalid response
size 2000174 (0..1000000): increase receive.message.max.bytes`` (a ``_BAD_MSG`` error)."""


def _timed_out(exc: BaseException) -> bool:
    """A request the broker did not answer in time (as opposed to one it refused)."""
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if isinstance(err, KafkaError):
        return err.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.REQUEST_TIMED_OUT)
    return isinstance(exc, TimeoutError)


class TopicReader:
    """Replays one topic from the beginning and tails it, delivering batches to a sink on a thread.

    ``admin`` is the owner's admin client (end offsets, partition counts); ``errors`` is where
    client and reader errors are logged and kept, shared with the owner's other clients.
    """

    def __init__(
        self,
        clients: KafkaClientConfig,
        topic: str,
        admin: AdminClient,
        *,
        errors: LastError | None = None,
        read_committed: bool = False,
        timeout_s: float = 30.0,
        refresh_s: float = 60.0,
        batch: int = 10_000,
        replay_fetch_wait_ms: str = REPLAY_FETCH_WAIT_MS,
        tail_fetch_wait_ms: str | None = None,
        thread_name: str | None = None,
    ) -> None:
        self._clients = clients
        self.topic = topic
        self._admin = admin
        self._errors = errors or LastError(f"kafka://{clients.bootstrap}/{topic}")
        self._read_committed = read_committed
        self._timeout_s = timeout_s
        self._refresh_s = refresh_s
        self._batch = batch
        self._replay_wait = replay_fetch_wait_ms
        self._tail_wait = clients.tail_fetch_wait_ms if tail_fetch_wait_ms is None else tail_fetch_wait_ms
        self._thread_name = thread_name or f"reader-{topic}"

        self._cond = threading.Condition()  # guards the state below; notified whenever it changes
        self._thread: threading.Thread | None = None
        self._finished = False  # the thread ended (closed, or a failure it could not retry)
        self._partition_count = 0
        self._positions: dict[int, int] = {}
        self._end_offsets: dict[int, int] = {}
        self._records_read = 0
        self._records_dropped = 0
        self._caught_up = False
        self._last_poll_at: float | None = None
        self._last_records_at: float | None = None
        self._oversized: tuple[str, float] | None = None
        """The last fetch response librdkafka refused for its size (``_consumer_error``): its message,
        and when (``time.time()``)."""
        self._stop = threading.Event()
        self._refresh_requested = threading.Event()

    # ---------------------------------------------------------------- state

    @property
    def description(self) -> str:
        return self._errors.description

    @property
    def partition_count(self) -> int:
        """Partitions the reader has assigned (0 until it started)."""
        with self._cond:
            return self._partition_count

    @property
    def alive(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    @property
    def records_dropped(self) -> int:
        """Records the sink refused ``_SINK_ATTEMPTS`` times in a row: logged, counted, never silent."""
        with self._cond:
            return self._records_dropped

    @property
    def last_error(self) -> str | None:
        return self._errors.message

    def blocked(self) -> str | None:
        """Why the reader cannot go on now, though the cluster answers: librdkafka refuses a fetch
        response larger than ``receive.message.max.bytes`` (``_consumer_error``), and retries it for
        ever, so a record that large stops the reader at its partition for good; or ``None``.

        Without this the daemon stayed unready saying nothing but "reading the log" (QA D6: a
        114 MB value, which Java's consumer reads, under librdkafka's 100 MB default). Counted as
        blocked while records remain to read and none has been delivered since the last refusal.
        """
        with self._cond:
            if self._oversized is None:
                return None
            message, at = self._oversized
            if self._last_records_at is not None and self._last_records_at > at:
                return None
            behind = sorted(p for p, end in self._end_offsets.items() if self._positions.get(p, 0) < end)
            if not behind:
                return None
            where = ", ".join(f"{p} at offset {self._positions.get(p, 0)}" for p in behind[:5])
        more = f" and {len(behind) - 5} more" if len(behind) > 5 else ""
        return f"{self.description}: the reader cannot go on in partition {where}{more}: {message}"

    def _consumer_error(self, err: KafkaError) -> None:
        """The reader's consumers' ``error_cb``: every error as the log's other clients report theirs,
        and a refused fetch response (``Invalid response size``) kept for ``blocked``."""
        self._errors.client_error("consumer", err)
        found = _OVERSIZED.search(err.str())
        if found is None:
            return
        size, limit = int(found[1]), int(found[2])
        message = (
            f"librdkafka refuses a fetch response of {size:,} bytes, more than receive.message.max.bytes "
            f"({limit:,}): a record there is about that large, and Connect's Java consumer reads it. Set "
            f"--kafka-config receive.message.max.bytes to more than {size} (at most {RECEIVE_MESSAGE_MAX_BYTES}, "
            "and at least fetch.max.bytes + 512) and restart"
        )
        with self._cond:
            self._oversized = (message, time.time())

    def progress(self) -> ReadProgress:
        alive = self.alive
        last_error, last_error_at = self._errors.message, self._errors.at
        with self._cond:
            return ReadProgress(
                positions=dict(self._positions),
                end_offsets=dict(self._end_offsets),
                records_read=self._records_read,
                caught_up=self._caught_up,
                records_dropped=self._records_dropped,
                alive=alive,
                last_poll_at=self._last_poll_at,
                last_records_at=self._last_records_at,
                last_error=last_error,
                last_error_at=last_error_at,
            )

    @property
    def caught_up(self) -> bool:
        """``progress().caught_up`` without the snapshot (a bool read needs no lock)."""
        return self._caught_up

    def wait_caught_up(self, timeout_s: float | None = None) -> bool:
        """Block until the initial read-to-end finished; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._caught_up, timeout_s)

    def request_refresh(self) -> None:
        """Look for added partitions at the next turn of the loop, not at the next periodic check."""
        self._refresh_requested.set()

    # ---------------------------------------------------------------- lifecycle

    def start(self, sink: RecordSink) -> None:
        """Start the reader thread; a refused client setting raises ``LogConfigError`` here."""
        with self._cond:
            if self._thread is not None:
                raise LogConfigError(f"{self.description}: start_reading() was already called")
        consumer = self._new_consumer(self._replay_wait)  # config errors surface here, not in a thread
        thread = threading.Thread(target=self._run, args=(consumer, sink), name=self._thread_name, daemon=True)
        with self._cond:
            self._thread = thread
        thread.start()

    def close(self) -> None:
        """Stop the thread (it finishes the batch at hand) and close its consumer. Idempotent."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=_JOIN_S)
            if thread.is_alive():
                log.warning("%s: reader thread did not stop within 10s", self.description)

    # ---------------------------------------------------------------- read to end on demand

    def end_offsets(self, timeout_s: float | None = None, partitions: int | None = None) -> dict[int, int]:
        """Current high watermarks of the first ``partitions`` partitions (default: the assigned ones),
        as ``TopicAdmin.endOffsets`` (``READ_UNCOMMITTED``)."""
        timeout = timeout_s or self._timeout_s
        count = partitions if partitions is not None else self.partition_count
        if count <= 0:  # not assigned yet: ask the broker how many there are
            count = wait_for_partition_count(self._admin, self.topic, timeout)
        return list_offsets(self._admin, self.topic, list(range(count)), LATEST, timeout)

    def read_to_end(self, timeout_s: float, partitions: int | None = None) -> None:
        """Return once every record in the topic now has been delivered to the sink.

        Raises ``LogUnavailable`` when that takes longer than ``timeout_s`` (e.g. a transaction left
        open on a ``read_committed`` reader), when the end offsets cannot be fetched, or when the
        reader is not running.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            if self._thread is None:
                raise LogUnavailable(f"{self.description} is not being read; call start_reading() first")
        try:
            ends = self.end_offsets(timeout_s, partitions)
        except Exception as exc:
            self._errors.record(f"cannot read the end offsets of {self.topic}: {exc!r}")
            unavailable = LogTimeout if _timed_out(exc) else LogUnavailable
            raise unavailable(f"{self.description} cannot be read to its end: no end offsets: {exc}") from exc
        with self._cond:
            if len(ends) > self._partition_count:
                self._refresh_requested.set()
            self._cond.wait_for(lambda: self._finished or self._passed(ends), max(deadline - time.monotonic(), 0.0))
            if self._passed(ends):
                return
            finished = self._finished
            behind = {p: (self._positions.get(p, 0), end) for p, end in ends.items() if not self._passed({p: end})}
        if finished:
            raise LogUnavailable(f"{self.description} cannot be read to its end: its reader stopped")
        raise LogTimeout(
            f"{self.description} was not read to its end within {timeout_s:g} s "
            f"(partition: (position, end offset) still behind: {behind})"
        )

    def wait_passed(self, ends: dict[int, int], timeout_s: float) -> bool:
        """Wait until the positions reach ``ends`` (offsets this process knows); no broker request."""
        with self._cond:
            self._cond.wait_for(lambda: self._finished or self._passed(ends), timeout_s)
            return self._passed(ends)

    def _passed(self, ends: dict[int, int]) -> bool:
        """Connect's rule, per partition: ``position >= end``. The caller holds ``_cond``.

        A partition the reader has no position for yet counts from 0, so an empty one is done.
        """
        return all(self._positions.get(p, 0) >= end for p, end in ends.items())

    # ---------------------------------------------------------------- read again

    def reread(self, ranges: Mapping[int, tuple[int, int]], timeout_s: float) -> Iterator[list[LogRecord]]:
        """``OffsetLog.reread``: a consumer of its own, assigned at each range's start, read until its
        position passes each range's stop (a compacted range ends at the next record after it). A
        client error is ``LogUnavailable``, as the interface promises, for the caller to retry."""
        wanted = {p: (start, stop) for p, (start, stop) in ranges.items() if stop > start}
        if not wanted:
            return
        try:
            consumer = self._new_consumer(self._replay_wait)
        except KafkaException as exc:
            raise LogUnavailable(f"{self.description} cannot be read again: {exc}") from exc
        try:
            yield from self._reread(consumer, wanted, timeout_s)
        except KafkaException as exc:
            raise LogUnavailable(f"{self.description} could not be read again: {exc}") from exc
        finally:
            consumer.close()

    def _reread(
        self, consumer: Consumer, wanted: Mapping[int, tuple[int, int]], timeout_s: float
    ) -> Iterator[list[LogRecord]]:
        consumer.assign([TopicPartition(self.topic, p, start) for p, (start, _) in wanted.items()])
        unfinished = set(wanted)
        progressed = time.monotonic()
        while unfinished:
            if self._stop.is_set():
                raise LogUnavailable(f"{self.description} is closing; it was not read again")
            messages: list[Message] = consumer.consume(self._batch, timeout=_IDLE_POLL_S)
            records = [r for r in self._records(messages) if r.offset < wanted[r.partition][1]]
            if records:
                progressed = time.monotonic()
                yield records
            for tp in consumer.position([TopicPartition(self.topic, p) for p in unfinished]):
                if tp.offset >= wanted[tp.partition][1]:
                    unfinished.discard(tp.partition)
                    progressed = time.monotonic()
            if unfinished and time.monotonic() - progressed > timeout_s:
                raise LogTimeout(
                    f"{self.description} was not read again within {timeout_s:g} s "
                    f"(partitions still unread: {sorted(unfinished)})"
                )

    # ---------------------------------------------------------------- the reader thread

    def _new_consumer(self, fetch_wait_ms: str) -> Consumer:
        return self._clients.create(
            "consumer",
            Consumer,
            error_cb=self._consumer_error,
            read_committed=self._read_committed,
            fetch_wait_ms=fetch_wait_ms,
        )

    def _run(self, consumer: Consumer, sink: RecordSink) -> None:
        try:
            assigned = self._assign_all(consumer)
            if assigned is None:
                return
            started = time.monotonic()
            next_refresh = started + self._refresh_s
            replaying = True
            while not self._stop.is_set():
                try:
                    if replaying and self._caught_up:
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
                    self._errors.record(f"reader error: {exc!r}", logging.ERROR)
                    self._stop.wait(_RETRY_BACKOFF_S)
        except Exception as exc:  # not retriable (e.g. assign refused): say so, and wake the waiters
            self._errors.record(f"reader stopped: {exc!r}", logging.ERROR)
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()
            try:
                consumer.close()
            except Exception as exc:
                log.warning("%s: closing the consumer failed: %r", self.description, exc)

    def _assign_all(self, consumer: Consumer) -> list[TopicPartition] | None:
        """Assign every partition from its beginning and capture where "the end" is, retrying until done."""
        while not self._stop.is_set():
            try:
                count = wait_for_partition_count(self._admin, self.topic, self._timeout_s)
                partitions = list(range(count))
                starts = list_offsets(self._admin, self.topic, partitions, EARLIEST, self._timeout_s)
                ends = list_offsets(self._admin, self.topic, partitions, LATEST, self._timeout_s)
            except Exception as exc:
                self._errors.record(f"cannot read the end offsets of {self.topic}: {exc!r}; retrying")
                self._stop.wait(_RETRY_BACKOFF_S)
                continue
            assigned = [TopicPartition(self.topic, p) for p in partitions]
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions])
            with self._cond:
                self._partition_count = count
                # Before the first record arrives a position is "invalid"; the reader then stands at
                # the log start, which is where an empty (or fully compacted) partition already ends.
                self._positions = {p: starts[p] for p in partitions}
                self._end_offsets = dict(ends)
                self._cond.notify_all()
            log.info(
                "%s: reading %d partitions to end offsets totalling %d",
                self.description,
                count,
                sum(ends.values()),
            )
            self._check_caught_up(time.monotonic())
            return assigned
        return None

    def _tail_consumer(self, replay: Consumer, assigned: list[TopicPartition]) -> Consumer:
        """Swap the replay consumer for one tuned for latency, continuing at the exact positions."""
        if self._clients.user_sets("fetch.wait.max.ms") or self._tail_wait == self._replay_wait:
            return replay  # one setting for both phases
        positions = replay.position(assigned)
        try:
            tail = self._new_consumer(self._tail_wait)
            tail.assign(
                [
                    TopicPartition(self.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                    for tp in positions
                ]
            )
        except Exception as exc:
            self._errors.record(f"cannot start the tailing consumer, keeping the replay one: {exc!r}")
            return replay
        replay.close()
        return tail

    def _fetch(self, consumer: Consumer) -> list[Message]:
        """A batch of whatever is already fetched, else wait briefly for the first record.

        ``consume(n, timeout)`` waits until it has all ``n`` or the timeout passes, which would delay a
        lone tailed record by the whole timeout; ``poll`` returns the moment one arrives.
        """
        messages: list[Message] = consumer.consume(self._batch, timeout=0)
        if messages:
            return messages
        first = consumer.poll(_IDLE_POLL_S)
        if first is None:
            return []
        rest: list[Message] = consumer.consume(self._batch - 1, timeout=0) if self._batch > 1 else []
        return [first, *rest]

    def _records(self, messages: list[Message]) -> list[LogRecord]:
        """The records among ``messages``; an error in their place is logged and kept."""
        records: list[LogRecord] = []
        append = records.append
        for m in messages:
            err = m.error()
            if err is not None:
                self._errors.record(f"consume error on {self.topic}[{m.partition()}]: {err}")
                continue
            ts_type, ts = m.timestamp()
            partition, offset = m.partition(), m.offset()
            assert partition is not None and offset is not None  # always set on a consumed record
            append(LogRecord(m.key(), m.value(), partition, offset, -1 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts))
        return records

    def _deliver(self, sink: RecordSink, messages: list[Message]) -> None:
        records = self._records(messages)
        if not records:
            return
        for attempt in range(1, _SINK_ATTEMPTS + 1):
            try:
                sink(records)
                return
            except Exception as exc:
                if attempt == _SINK_ATTEMPTS:
                    failure = exc
                    break
                log.warning(
                    "%s: sink failed on %d records (attempt %d): %r",
                    self.description,
                    len(records),
                    attempt,
                    exc,
                )
                self._stop.wait(_RETRY_BACKOFF_S * attempt)
        if len(records) == 1:
            self._drop(records[0], _SINK_ATTEMPTS, failure)
            return
        # One record a sink cannot take must not cost the records around it (Connect's reader takes
        # them): each is handed over alone, once, and only those the sink still fails on are dropped.
        log.warning(
            "%s: sink failed %d times on %d records from %d@%d to %d@%d; handing them over one at a time: %r",
            self.description,
            _SINK_ATTEMPTS,
            len(records),
            records[0].partition,
            records[0].offset,
            records[-1].partition,
            records[-1].offset,
            failure,
        )
        for record in records:
            try:
                sink([record])
            except Exception as exc:
                self._drop(record, _SINK_ATTEMPTS + 1, exc)

    def _drop(self, record: LogRecord, attempts: int, exc: Exception) -> None:
        """Skip a record the sink failed on ``attempts`` times: logged at ERROR with its position, kept
        as the last error, counted in ``records_dropped``."""
        self._errors.record(
            f"sink failed {attempts} times; skipped the record at {record.partition}@{record.offset}: {exc!r}",
            logging.ERROR,
        )
        with self._cond:
            self._records_dropped += 1

    def _update_positions(
        self, consumer: Consumer, assigned: list[TopicPartition], delivered: int, started: float
    ) -> None:
        current = consumer.position(assigned)
        watermarks = self._watermarks(consumer, assigned) if self._caught_up else {}
        now = time.time()
        with self._cond:
            self._records_read += delivered
            self._last_poll_at = now
            if delivered:
                self._last_records_at = now
            for tp in current:
                if tp.offset >= 0 and tp.offset > self._positions.get(tp.partition, -1):
                    self._positions[tp.partition] = tp.offset
            for p, high in watermarks.items():
                # Never below the position: a broker that under-reports its end (Tansu after a
                # multi-record batch) must not show a reader ahead of the log.
                self._end_offsets[p] = max(high, self._positions.get(p, 0))
            self._cond.notify_all()
        if not self._caught_up:
            self._check_caught_up(started)

    @staticmethod
    def _watermarks(consumer: Consumer, assigned: list[TopicPartition]) -> dict[int, int]:
        """The high watermark of each partition from the last fetch response (no request is made);
        partitions not fetched yet are left out."""
        found: dict[int, int] = {}
        for tp in assigned:
            try:
                marks = consumer.get_watermark_offsets(tp, cached=True)
            except KafkaException:  # not known to the client (yet): the next turn will tell
                continue
            if marks is not None and marks[1] >= 0:
                found[tp.partition] = marks[1]
        return found

    def _check_caught_up(self, started: float) -> None:
        with self._cond:
            if self._caught_up or not self._passed(self._end_offsets):
                return
            self._caught_up = True
            records = self._records_read
            self._cond.notify_all()
        elapsed = time.monotonic() - started
        log.info(
            "%s: finished reading to the end: %d records in %.3fs (%.0f records/s)",
            self.description,
            records,
            elapsed,
            records / elapsed if elapsed > 0 else 0.0,
        )

    def _assign_new_partitions(self, consumer: Consumer, assigned: list[TopicPartition]) -> None:
        """Pick up partitions added to the topic since we started (Connect would need a restart)."""
        self._admin.poll(0)  # serve the admin client's queued log lines
        count = wait_for_partition_count(self._admin, self.topic, _REFRESH_TIMEOUT_S)
        if count <= len(assigned):
            return
        new = list(range(len(assigned), count))
        starts = list_offsets(self._admin, self.topic, new, EARLIEST, self._timeout_s)
        ends = list_offsets(self._admin, self.topic, new, LATEST, self._timeout_s)
        consumer.incremental_assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in new])
        assigned.extend(TopicPartition(self.topic, p) for p in new)
        with self._cond:
            self._partition_count = count
            for p in new:
                self._positions[p] = starts[p]
                self._end_offsets[p] = ends[p]
            self._cond.notify_all()
        log.warning("%s: now reading %d partitions (added %s)", self.description, count, new)
