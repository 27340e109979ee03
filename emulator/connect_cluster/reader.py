"""Reading one of Connect's internal topics the way ``KafkaBasedLog`` does, without ever writing to it.

The reading itself is the shared ``emulator.logs.kafka.reader.TopicReader``. What is particular to
these topics is that they belong to the Connect cluster: we never create them (a missing topic is a
startup error naming the setting to check) and never produce to them.

``read_to_end`` is Connect's ``configLog.readToEnd()``: fetch the current end offsets and wait until
the reader has passed them, so a decision taken afterwards sees every record written before it was
asked, e.g. the STOPPED state a user set a moment before PATCHing offsets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from emulator.logs.base import ReadProgress, RecordSink
from emulator.logs.kafka.config import DEFAULT_TAIL_FETCH_WAIT_MS, KafkaClientConfig
from emulator.logs.kafka.reader import TopicReader
from emulator.logs.last_error import LastError
from emulator.model.errors import LogConfigError, LogUnavailable

log = logging.getLogger(__name__)

_BATCH = 5_000


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
        tail_fetch_wait_ms: str = DEFAULT_TAIL_FETCH_WAIT_MS,
        single_partition: bool = False,
    ) -> None:
        """``single_partition``: the topic must have one partition (Connect's config topic: a worker
        refuses to start on more, since only one partition orders every connector's configuration)."""
        if not topic or not topic.strip():
            raise LogConfigError(f"{setting} must name a topic")
        self._single_partition = single_partition
        self._clients = KafkaClientConfig(
            bootstrap, dict(client_config or {}), f"Connect's {what}", tail_fetch_wait_ms=tail_fetch_wait_ms
        )
        self.topic = topic
        self._sink = sink
        self._what = what  # e.g. "config topic"
        self._setting = setting  # e.g. "--config-topic (Connect's config.storage.topic)"
        self._read_committed = read_committed
        self._timeout_s = timeout_s
        self._errors = LastError(f"kafka://{bootstrap}/{topic}", log)
        self._reader: TopicReader | None = None

    @property
    def description(self) -> str:
        return self._errors.description

    @property
    def what(self) -> str:
        return self._what

    @property
    def last_error(self) -> str | None:
        return self._errors.message

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Verify the topic exists; raises ``LogConfigError`` with what to check if it does not."""
        admin = self._clients.create("admin", AdminClient)
        partitions = self._partition_count(admin)
        if self._single_partition and partitions != 1:
            raise LogConfigError(
                f"Connect's {self._what} '{self.topic}' has {partitions} partitions; a Connect worker refuses to start "
                f"on more than one (they would not order the configurations), so this is not its {self._what}: "
                f"check {self._setting}"
            )
        self._reader = TopicReader(
            self._clients,
            self.topic,
            admin,
            errors=self._errors,
            read_committed=self._read_committed,
            timeout_s=self._timeout_s,
            batch=_BATCH,
            # One consumer for replay and tail: these topics are small (and ``refresh`` reads to the
            # end before every modification anyway).
            replay_fetch_wait_ms=self._clients.tail_fetch_wait_ms,
            thread_name=f"connect-{self.topic}",
        )
        log.info("Connect %s %s has %d partition(s)", self._what, self.description, partitions)

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
                        f"Connect's {self._what} '{self.topic}' does not exist on {self._clients.bootstrap}. It "
                        f"belongs to the Connect cluster and is never created by this daemon: check {self._setting}, "
                        "or start the Connect cluster first."
                    )
                last = error or "no partitions in metadata"
            except KafkaException as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise LogConfigError(
                    f"Cannot read Connect's {self._what} '{self.topic}' on {self._clients.bootstrap} within "
                    f"{self._timeout_s:g}s: {last}"
                )
            time.sleep(0.2)

    def start(self) -> None:
        if self._reader is None:
            raise LogConfigError(f"{self.description}: open() first")
        self._reader.start(self._sink)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()

    # ------------------------------------------------------------------ progress

    def progress(self) -> ReadProgress:
        return ReadProgress() if self._reader is None else self._reader.progress()

    def read_to_end(self, timeout_s: float) -> None:
        """Wait until every record present now has been applied; ``LogUnavailable`` if not in time."""
        if self._reader is None:
            raise LogUnavailable(f"{self.description}: open() first")
        self._reader.read_to_end(timeout_s)
