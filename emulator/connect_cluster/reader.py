"""Reading one of Connect's internal topics the way ``KafkaBasedLog`` does, without ever writing to it.

Assign every partition from the beginning (no group, no commits), take the high watermarks as "the
end", tail forever. Unlike the offsets log, these topics belong to the Connect cluster: we never
create them (a missing topic is a startup error naming the setting to check) and never produce.

``read_to_end`` is Connect's ``configLog.readToEnd()``: fetch the current end offsets and wait until
the reader has passed them, so a decision taken afterwards sees every record written before it was
asked, e.g. the STOPPED state a user set a moment before PATCHing offsets.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from emulator.logs.base import ReadProgress, RecordSink
from emulator.logs.kafka.topics import EARLIEST, LATEST, list_offsets
from emulator.model.errors import LogConfigError
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)
_RDKAFKA_LOG = logging.getLogger(__name__ + ".librdkafka")

_IDLE_POLL_S = 0.2
_RETRY_BACKOFF_S = 1.0
_BATCH = 5_000
_CLIENT_ID = "connect-offsets-emulator"

# Settings our reading depends on win over the user's client config (as for the offsets log).
_FORCED_CONSUMER = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "auto.offset.reset": "earliest",
    "enable.partition.eof": "false",
}


def client_config(
    bootstrap: str, user: Mapping[str, str], role: str, *, read_committed: bool = False
) -> dict[str, Any]:
    """The user's librdkafka settings (SASL, SSL, ...) plus what this role needs, for admin or consumer."""
    config: dict[str, Any] = dict(user)
    config["bootstrap.servers"] = bootstrap
    config.setdefault("client.id", _CLIENT_ID)
    config["logger"] = _RDKAFKA_LOG
    # Never let a metadata lookup create a Connect topic (brokers with auto.create.topics.enable, and
    # Tansu, create any topic a metadata request names): a missing one must stay a startup error.
    config["allow.auto.create.topics"] = "false"
    if role == "consumer":
        config.setdefault("group.id", _CLIENT_ID)  # required by librdkafka, never used: we assign
        config.setdefault("fetch.wait.max.ms", "100")
        forced = {**_FORCED_CONSUMER, "isolation.level": "read_committed" if read_committed else "read_uncommitted"}
        for key, value in forced.items():
            if key in config and str(config[key]).lower() != value:
                log.warning(
                    "Ignoring client setting %s=%s for Connect's internal topics: %s is required",
                    key,
                    config[key],
                    value,
                )
            config[key] = value
    return config


class InternalTopicReader:
    """Replays and tails one Connect-owned topic into ``sink`` on a daemon thread."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        sink: RecordSink,
        *,
        what: str,
        setting: str,
        client_config: Mapping[str, str] | None = None,
        read_committed: bool = False,
        timeout_s: float = 30.0,
    ) -> None:
        if not topic or not topic.strip():
            raise LogConfigError(f"{setting} must name a topic")
        self._bootstrap = bootstrap
        self.topic = topic
        self._sink = sink
        self._what = what  # e.g. "config topic"
        self._setting = setting  # e.g. "--config-topic (Connect's config.storage.topic)"
        self._user_config = dict(client_config or {})
        self._read_committed = read_committed
        self._timeout_s = timeout_s
        self._admin: AdminClient | None = None
        self._partitions = 0
        self._lock = threading.Condition()
        self._positions: dict[int, int] = {}
        self._end_offsets: dict[int, int] = {}
        self._records_read = 0
        self._caught_up = False
        self._last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def description(self) -> str:
        return f"kafka://{self._bootstrap}/{self.topic}"

    @property
    def what(self) -> str:
        return self._what

    @property
    def last_error(self) -> str | None:
        with self._lock:
            return self._last_error

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Verify the topic exists; raises ``LogConfigError`` with what to check if it does not."""
        admin = AdminClient(client_config(self._bootstrap, self._user_config, "admin"))
        self._partitions = self._partition_count(admin)
        self._admin = admin
        log.info("Connect %s %s has %d partition(s)", self._what, self.description, self._partitions)

    def _partition_count(self, admin: AdminClient) -> int:
        deadline = time.monotonic() + self._timeout_s
        last: object = None
        while True:
            try:
                metadata = admin.list_topics(topic=self.topic, timeout=max(min(deadline - time.monotonic(), 5.0), 0.5))
                found = metadata.topics.get(self.topic)
                if found is not None and found.error is None and found.partitions:
                    return len(found.partitions)
                error = found.error if found is not None else None
                if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise LogConfigError(
                        f"Connect's {self._what} '{self.topic}' does not exist on {self._bootstrap}. It belongs to "
                        f"the Connect cluster and is never created by this daemon: check {self._setting}, or start "
                        "the Connect cluster first."
                    )
                last = error or "no partitions in metadata"
            except KafkaException as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise LogConfigError(
                    f"Cannot read Connect's {self._what} '{self.topic}' on {self._bootstrap} within "
                    f"{self._timeout_s:g}s: {last}"
                )
            time.sleep(0.2)

    def start(self) -> None:
        if self._admin is None:
            raise LogConfigError(f"{self.description}: open() first")
        try:
            consumer = Consumer(
                client_config(self._bootstrap, self._user_config, "consumer", read_committed=self._read_committed)
            )
        except (KafkaException, ValueError, TypeError) as exc:
            raise LogConfigError(f"Invalid Kafka client configuration for Connect's {self._what}: {exc}") from exc
        self._thread = threading.Thread(target=self._run, args=(consumer,), name=f"connect-{self.topic}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=_IDLE_POLL_S + 10.0)

    # ------------------------------------------------------------------ progress

    def progress(self) -> ReadProgress:
        with self._lock:
            return ReadProgress(
                positions=dict(self._positions),
                end_offsets=dict(self._end_offsets),
                records_read=self._records_read,
                caught_up=self._caught_up,
            )

    def read_to_end(self, timeout_s: float) -> bool:
        """Wait until every record present now has been applied; False on timeout or failure to ask."""
        if self._admin is None:
            return False
        deadline = time.monotonic() + timeout_s
        try:
            ends = list_offsets(self._admin, self.topic, list(range(self._partitions)), LATEST, timeout_s)
        except Exception as exc:
            self._record_error(f"cannot read the end offsets of {self.topic}: {exc!r}")
            return False
        with self._lock:
            while not all(self._positions.get(p, -1) >= end for p, end in ends.items()):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stop.is_set():
                    return False
                self._lock.wait(min(remaining, 0.5))
        return True

    def _record_error(self, message: str) -> None:
        log.warning("%s: %s", self.description, message)
        with self._lock:
            self._last_error = message

    # ------------------------------------------------------------------ the reader thread

    def _run(self, consumer: Consumer) -> None:
        try:
            assigned = self._assign(consumer)
            while assigned and not self._stop.is_set():
                try:
                    messages = self._fetch(consumer)
                    self._deliver(messages)
                    self._advance(consumer.position(assigned), len(messages))
                except Exception as exc:  # never die silently: log, remember, back off, go on
                    self._record_error(f"reader error: {exc!r}")
                    self._stop.wait(_RETRY_BACKOFF_S)
        finally:
            try:
                consumer.close()
            except Exception as exc:
                log.warning("%s: closing the consumer failed: %r", self.description, exc)

    def _assign(self, consumer: Consumer) -> list[TopicPartition]:
        assert self._admin is not None
        partitions = list(range(self._partitions))
        while not self._stop.is_set():
            try:
                starts = list_offsets(self._admin, self.topic, partitions, EARLIEST, self._timeout_s)
                ends = list_offsets(self._admin, self.topic, partitions, LATEST, self._timeout_s)
            except Exception as exc:
                self._record_error(f"cannot read the end offsets of {self.topic}: {exc!r}; retrying")
                self._stop.wait(_RETRY_BACKOFF_S)
                continue
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions])
            with self._lock:
                self._positions = dict(starts)
                self._end_offsets = dict(ends)
            log.info("%s: reading %d partition(s) up to %s", self.description, len(partitions), ends)
            self._advance([], 0)
            return [TopicPartition(self.topic, p) for p in partitions]
        return []

    @staticmethod
    def _fetch(consumer: Consumer) -> list[Any]:
        """What is already fetched, else wait briefly for one record (``poll`` returns the moment it comes)."""
        messages: list[Any] = consumer.consume(_BATCH, timeout=0)
        if messages:
            return messages
        first = consumer.poll(_IDLE_POLL_S)
        return [] if first is None else [first]

    def _deliver(self, messages: list[Any]) -> None:
        records: list[LogRecord] = []
        for m in messages:
            err = m.error()
            if err is not None:
                self._record_error(f"consume error on {self.topic}[{m.partition()}]: {err}")
                continue
            ts_type, ts = m.timestamp()
            records.append(
                LogRecord(
                    m.key(), m.value(), m.partition(), m.offset(), -1 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts
                )
            )
        if records:
            try:
                self._sink(records)
            except Exception as exc:  # the state is tolerant by design; a bug there must not stop reading
                log.exception("%s: applying %d records failed", self.description, len(records))
                self._record_error(f"applying records failed: {exc!r}")

    def _advance(self, positions: list[TopicPartition], delivered: int) -> None:
        with self._lock:
            self._records_read += delivered
            for tp in positions:
                if tp.offset >= 0 and tp.offset > self._positions.get(tp.partition, -1):
                    self._positions[tp.partition] = tp.offset
            if not self._caught_up and all(self._positions.get(p, 0) >= e for p, e in self._end_offsets.items()):
                self._caught_up = True
                log.info("%s: read to the end (%d records)", self.description, self._records_read)
            self._lock.notify_all()
