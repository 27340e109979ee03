"""Writing offsets in one transaction of a given transactional id: how Connect's leader writes a REST
modification of a source connector's offsets when the cluster runs exactly-once source support.

``Worker.modifySourceConnectorOffsets`` then builds a fresh producer with task 0's transactional id
(``<group.id>-<connector>-0``), calls ``initTransactions`` (the broker bumps the id's epoch: any
zombie task 0 still holding it can no longer produce or commit, and its open transaction is
aborted), writes the offsets and commits (docs/protocol.md §4.7). This module does the same, one
fresh producer per write. Before it, the other task ids of the connector's last fenced generation
(``tasks-fencing-<connector>``) can be fenced the same way, as the leader's zombie fencing does.

Outcomes: the positions of the committed records; ``Conflict`` when a newer producer with the same id
took over meanwhile (Connect's task 0 started: nothing was committed); ``LogWriteError`` when the
broker refused and the transaction was aborted; ``LogTimeout`` when nothing was handed over in time;
``WriteOutcomeUnknown`` when the commit was not answered in time, whose outcome a background thread
settles by committing on until the broker answers.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from emulator.codec.murmur2 import partition_for
from emulator.logs.kafka.claims import _fatal_or_fenced, _needs_abort, _retriable
from emulator.logs.kafka.config import KafkaClientConfig
from emulator.logs.write_timings import WriteTimings
from emulator.model.errors import Conflict, LogTimeout, LogWriteError, WriteOutcomeUnknown
from emulator.model.records import Position

log = logging.getLogger(__name__)

_RESOLVE_S = 300.0
"""How long a commit that timed out keeps being retried in the background (librdkafka's default
``message.timeout.ms``); the connector's next write waits for it (its write section stays taken)."""
_RESOLVE_STEP_S = 5.0
_FENCE_AT_ONCE = 16
"""Transactional ids fenced at the same time (each a producer of its own, one broker round trip)."""


class _Batch:
    """One transaction's records and their delivery reports."""

    def __init__(self, producer: Producer, transactional_id: str, count: int) -> None:
        self.producer = producer
        self.transactional_id = transactional_id
        self.positions: list[Position | None] = [None] * count
        self.errors: list[KafkaError] = []
        self._closed = False

    def close(self) -> None:
        """Close the producer off the caller's thread. ``Producer.close()`` aborts an open transaction
        and flushes with no deadline: on a producer fenced in the middle of a transaction it did not
        return, and the write's outcome (and so the connector's next write) waited on it for good."""
        if self._closed:
            return
        self._closed = True
        producer = self.producer
        with contextlib.suppress(KafkaException, RuntimeError):
            producer.purge()  # nothing left to flush
        threading.Thread(
            target=_close_quietly, args=(producer, self.transactional_id), name="txn-close", daemon=True
        ).start()

    def delivered(self, index: int, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(err)
            return
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None and offset is not None
        self.positions[index] = Position(partition, offset)

    def flushed(self, deadline: float) -> bool:
        """True once every record has its report (errors raise: fenced, or refused)."""
        try:
            unflushed = self.producer.flush(max(deadline - time.monotonic(), 0.0))
        except SystemError as exc:
            # confluent-kafka ran a delivery report with the fenced producer's error still pending
            # (the SystemError names list.append); that error is the outcome.
            if isinstance(exc.__cause__, KafkaException):
                raise exc.__cause__ from None
            raise
        if self.errors:
            first = self.errors[0]
            if first.fatal() or first.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED):
                raise KafkaException(first)
            raise LogWriteError(f"offsets records in transaction {self.transactional_id} not acknowledged: {first}")
        return unflushed == 0 and all(p is not None for p in self.positions)

    def committed(self) -> list[Position]:
        return [p for p in self.positions if p is not None]


# close() of a producer fenced mid-transaction warns that its abort failed: the expected end of a
# producer another holder of the id took over (the write's outcome says so already).
warnings.filterwarnings("ignore", "Producer abort_transaction failed during close", RuntimeWarning)


def _close_quietly(producer: Producer, transactional_id: str) -> None:
    try:
        producer.close()
    except Exception as exc:  # closing is housekeeping: the write's outcome is already known
        log.info("closing the transactional producer of %s: %s", transactional_id, exc)


class TransactionalAppender:
    """Appends to ``topic`` in transactions, placing records with murmur2 as Connect's producer does."""

    def __init__(
        self,
        clients: KafkaClientConfig,
        topic: str,
        partition_count: Callable[[], int],
        description: str,
        timings: WriteTimings,
    ) -> None:
        self._clients = clients
        self._topic = topic
        self._partition_count = partition_count
        self._description = description
        self._timings = timings

    def _producer(self, transactional_id: str) -> Producer:
        return self._clients.create(
            "transactional producer",
            Producer,
            # Being fenced by a newer holder of the id is an expected outcome, reported to the caller.
            error_cb=lambda err: log.info("transactional producer %s: %s", transactional_id, err),
            transactional_id=transactional_id,
        )

    def fence(self, transactional_ids: Sequence[str], deadline: float) -> None:
        """``initTransactions`` for each id, as ``Admin.fenceProducers`` does for the leader in one call:
        every earlier holder of these ids (zombie tasks) is fenced and its open transaction aborted.
        Up to ``_FENCE_AT_ONCE`` ids at a time: one after another, a connector of 200 tasks took 200
        broker round trips and could not be written within ``--write-timeout``."""
        total = len(transactional_ids)
        if not total:
            return
        with ThreadPoolExecutor(min(_FENCE_AT_ONCE, total), thread_name_prefix="fence") as pool:
            # In waves, the deadline checked between them: the ids of a count read from the config
            # topic may be far more than any broker fences within --write-timeout.
            for start in range(0, total, _FENCE_AT_ONCE):
                if start and time.monotonic() >= deadline:
                    raise self._fencing_timeout(start, total)
                wave = transactional_ids[start : start + _FENCE_AT_ONCE]
                for failure in pool.map(lambda tid: self._fence_one(tid, deadline), wave):
                    if isinstance(failure, LogTimeout) and total > _FENCE_AT_ONCE:
                        raise self._fencing_timeout(start, total) from failure
                    if failure is not None:  # the first is the answer; the others end by the deadline
                        raise failure

    def _fencing_timeout(self, fenced: int, total: int) -> LogTimeout:
        return LogTimeout(
            f"{self._description} did not let the daemon fence the transactional ids of the connector's earlier "
            f"tasks within the write timeout: {fenced} of {total} fenced (its tasks-fencing record counts "
            f"{total + 1} tasks); nothing was written"
        )

    def _fence_one(self, transactional_id: str, deadline: float) -> LogTimeout | Conflict | None:
        producer = self._producer(transactional_id)
        try:
            producer.init_transactions(max(deadline - time.monotonic(), 0.1))
        except KafkaException as exc:
            return self._before_write(transactional_id, exc, "fencing it")
        finally:
            producer.flush(0)
            producer.close()
        return None

    def append(
        self,
        transactional_id: str,
        entries: Sequence[tuple[bytes, bytes | None]],
        timeout_s: float,
        fence_also: Sequence[str] = (),
    ) -> list[Position]:
        """Write ``entries`` in one transaction of ``transactional_id`` (a fresh producer, fencing every
        earlier one), after fencing ``fence_also``; see the module docstring for the outcomes."""
        started = time.monotonic()
        deadline = started + timeout_s
        self.fence(fence_also, deadline)
        producer = self._producer(transactional_id)
        try:
            producer.init_transactions(max(deadline - time.monotonic(), 0.1))
        except KafkaException as exc:
            producer.close()
            raise self._before_write(transactional_id, exc, "initializing its transactions") from exc
        batch = _Batch(producer, transactional_id, len(entries))
        try:
            producer.begin_transaction()
            count = self._partition_count()
            for index, (key, value) in enumerate(entries):
                producer.produce(
                    self._topic,
                    key=key,
                    value=value,  # None is the tombstone
                    partition=partition_for(key, count),
                    on_delivery=functools.partial(batch.delivered, index),
                )
            if batch.flushed(deadline):
                producer.commit_transaction(max(deadline - time.monotonic(), 0.1))
                batch.close()
                committed = batch.committed()
                self._timings.observe(time.monotonic() - started, len(committed))
                return committed
        except KafkaException as exc:
            failure = self._failed(batch, exc)
            if failure is not None:
                raise failure from exc
        except LogWriteError:
            self._abort(batch)
            raise
        # Handed over and not answered in time: keep committing in the background.
        outcome: Future[list[Position]] = Future()
        threading.Thread(
            target=self._resolve, args=(batch, outcome), name=f"txn-resolve-{transactional_id}", daemon=True
        ).start()
        raise WriteOutcomeUnknown(
            f"the offsets transaction of {transactional_id} on {self._description} was not committed within "
            f"{timeout_s:g} s; the daemon keeps committing it and holds the connector's next write until the "
            "broker answers",
            outcome,
        )

    def _before_write(self, transactional_id: str, exc: KafkaException, step: str) -> LogTimeout | Conflict:
        if _retriable(exc):
            return LogTimeout(
                f"{self._description} did not answer in time {step} for transactional id {transactional_id}: "
                f"{exc}; nothing was written"
            )
        return Conflict(f"transactional id {transactional_id} could not be taken over ({step}): {exc}")

    def _failed(self, batch: _Batch, exc: KafkaException) -> Exception | None:
        """What a Kafka error during the transaction means; None: only the broker knows yet."""
        if _fatal_or_fenced(exc):
            batch.close()
            taken_over = Conflict(
                f"a newer producer with transactional id {batch.transactional_id} took over while the daemon was "
                f"writing (is the connector's task running again?): {exc}; nothing was committed"
            )
            taken_over.left_no_records = False  # records of the aborted transaction may be seen uncommitted
            return taken_over
        if _needs_abort(exc) or not _retriable(exc):
            self._abort(batch)
            return LogWriteError(
                f"the offsets transaction of {batch.transactional_id} failed and was aborted: {exc}; "
                "nothing was written"
            )
        return None

    def _abort(self, batch: _Batch) -> None:
        try:
            batch.producer.abort_transaction(10.0)
        except KafkaException as exc:
            log.warning("aborting the offsets transaction of %s failed: %s", batch.transactional_id, exc)
        finally:
            batch.close()

    def _resolve(self, batch: _Batch, outcome: Future[list[Position]]) -> None:
        deadline = time.monotonic() + _RESOLVE_S
        try:
            while True:
                step = time.monotonic() + min(_RESOLVE_STEP_S, max(deadline - time.monotonic(), 0.0))
                try:
                    if batch.flushed(step):
                        batch.producer.commit_transaction(max(step - time.monotonic(), 0.1))
                        batch.close()
                        outcome.set_result(batch.committed())
                        return
                except KafkaException as exc:
                    failure = self._failed(batch, exc)
                    if failure is not None:
                        raise failure from exc
                except LogWriteError:
                    self._abort(batch)
                    raise
                if time.monotonic() >= deadline:
                    raise LogWriteError(
                        f"the offsets transaction of {batch.transactional_id} is still unanswered after "
                        f"{_RESOLVE_S:g} s; a later read shows whether it was committed"
                    )
        except BaseException as exc:  # every outcome is delivered, whatever happened
            outcome.set_exception(exc)
        finally:
            batch.close()
