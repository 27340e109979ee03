"""``connect-kafka``: a Spark streaming source over Kafka topics that resumes from, and commits to,
a Connect sink connector's consumer group ``connect-<connector>`` through the daemon.

Why not Spark's own Kafka source: it never commits to a consumer group (docs/spark.md, "Why not
Spark's own Kafka source"), so a Connect sink task taking over from Spark (or Spark from it) would
not know where the other stopped. Here the group's committed offsets (Kafka's "next offset to read")
are the start of a fresh query, and Spark's end offsets, which mean the same thing, are committed
back as-is.

Offsets are Spark's Kafka shape, ``{"topic": {"partition": next_offset}}``, keys sorted (topic,
then partition number) because Spark compares offsets as JSON strings. ``read`` is a pure function
of ``(start, end)``: it assigns the partition at ``start`` and stops before ``end``.

``commit(end)`` runs one batch late and never for the last batch, and ``stop()`` is not called
(docs/spark.md, "When Spark calls a source"): for an exact handoff add
``ListenerCommitter(targets=[CommitTarget(i, connector, "sink")])`` (it publishes the last
completed batch from the checkpoint) or run ``connect-offsets spark-handoff --kind sink``.
Commits are monotonic (``DaemonOffsets``): an old checkpoint never moves the group back.

Options: ``url`` (daemon), ``connector``, ``topics`` (comma-separated), ``commitOffsets`` (default
true), ``claimEpoch`` (the epoch of the job's claim on the connector: a claimed connector refuses
the group's commits without its current epoch, see docs/spark.md), and ``kafka.*`` (passed to
confluent_kafka without the prefix; ``kafka.bootstrap.servers`` is required). Needs the daemon's
sink support (``--bootstrap-servers``, no ``--config-topic``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import StructType

from emulator.client.errors import ClientError
from emulator.spark.background import committer_for
from emulator.spark.committer import SinkOffsetsUnsupported
from emulator.spark.options import DaemonAccess, OptionError, bool_option, int_option, only_known
from emulator.spark.refusal import reader_or_refusal, refuse_now
from emulator.spark.shapes import kafka_entries, kafka_shaped

log = logging.getLogger(__name__)

SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
METADATA_TIMEOUT_S = 15.0
READ_TIMEOUT_S = 60.0

SparkOffset = dict[str, dict[str, int]]


class ConnectKafkaError(OptionError):
    """Bad options, an unreachable broker or daemon, or a range that cannot be read."""


def kafka_config(options: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options without the prefix (what confluent_kafka expects)."""
    config = {k[len("kafka.") :]: v for k, v in options.items() if k.startswith("kafka.") and len(k) > len("kafka.")}
    if not config.get("bootstrap.servers"):
        raise ConnectKafkaError("option 'kafka.bootstrap.servers' is required")
    return config


def spark_offset(positions: Mapping[tuple[str, int], int]) -> SparkOffset:
    """Spark's Kafka offset JSON shape with a deterministic key order (topic, then partition number)."""
    out: SparkOffset = {}
    for topic, partition in sorted(positions):
        out.setdefault(topic, {})[str(partition)] = positions[(topic, partition)]
    return out


def flatten(offset: Mapping[str, Any]) -> dict[tuple[str, int], int]:
    shaped = kafka_shaped(dict(offset))
    if shaped is None:
        raise ConnectKafkaError(f"not a connect-kafka offset ({{topic: {{partition: offset}}}}): {dict(offset)!r}")
    return {(t, p): o for t, parts in shaped.items() for p, o in parts.items()}


@dataclass
class TopicPartitionRange(InputPartition):
    """One executor task: records ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


class ConnectKafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        only_known(options, "connect-kafka", ("connector", "topics", "commitOffsets", "claimEpoch"), prefix="kafka.")
        self.daemon = DaemonAccess.of(options)
        connector = options.get("connector")
        if not connector:
            raise ConnectKafkaError("option 'connector' is required: the group is connect-<connector>")
        topics = [t.strip() for t in (options.get("topics") or "").split(",") if t.strip()]
        if not topics:
            raise ConnectKafkaError("option 'topics' is required (comma-separated topic names)")
        self.connector, self.topics = connector, sorted(set(topics))
        self.config = kafka_config(options)
        self.commit_offsets = bool_option(options, "commitOffsets", True)
        self.claim_epoch = int_option(options, "claimEpoch", None, 0)  # the job's claim on the connector, if any
        self._consumer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        """The driver's metadata consumer stays on the driver (it cannot be pickled)."""
        state = dict(self.__dict__)
        state["_consumer"] = None
        return state

    # -- broker metadata (driver) -------------------------------------------------------------
    def _metadata_consumer(self) -> Any:
        """One consumer for the worker's lifetime: watermarks are asked every trigger."""
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(
                {
                    "group.id": f"connect-kafka-meta-{uuid.uuid4().hex[:12]}",
                    **self.config,
                    "enable.auto.commit": False,
                }
            )
        return self._consumer

    def _partitions(self) -> list[tuple[str, int]]:
        consumer = self._metadata_consumer()
        found: list[tuple[str, int]] = []
        for topic in self.topics:
            try:
                meta = consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
            except Exception as exc:  # KafkaException: the broker is unreachable
                raise ConnectKafkaError(f"cannot read metadata of topic {topic!r}: {exc}") from exc
            if meta is None or meta.error is not None or not meta.partitions:
                raise ConnectKafkaError(f"topic {topic!r} is not available: {getattr(meta, 'error', None)}")
            found.extend((topic, p) for p in meta.partitions)
        return sorted(found)

    def _watermarks(self, tps: Sequence[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        from confluent_kafka import TopicPartition

        consumer = self._metadata_consumer()
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for topic, partition in tps:
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S, cached=False
                )
            except Exception as exc:
                raise ConnectKafkaError(f"cannot read the watermarks of {topic}[{partition}]: {exc}") from exc
            out[(topic, partition)] = (int(low), int(high))
        return out

    # -- offsets (driver) ---------------------------------------------------------------------
    def initialOffset(self) -> SparkOffset:
        """The group's committed offsets; partitions without one, or whose offset is past the
        partition's end, start at the earliest offset (the latter with a WARNING)."""
        try:
            with self.daemon.offsets() as daemon:
                rows = daemon.offsets(self.connector, "sink") or []
        except (ClientError, SinkOffsetsUnsupported) as exc:
            raise ConnectKafkaError(
                f"cannot read consumer group connect-{self.connector}'s offsets from the daemon at "
                f"{self.daemon.url}: {exc}"
            ) from exc
        committed: dict[tuple[str, int], int] = {}
        for row in rows:
            partition, offset = row.get("partition") or {}, row.get("offset") or {}
            topic, number, value = (
                partition.get("kafka_topic"),
                partition.get("kafka_partition"),
                offset.get("kafka_offset"),
            )
            if isinstance(topic, str) and isinstance(number, int) and isinstance(value, int) and value >= 0:
                committed[(topic, number)] = value
        tps = self._partitions()
        marks = self._watermarks(tps)
        start = {tp: committed[tp] if tp in committed else marks[tp][0] for tp in tps}
        for tp in tps:
            low, high = marks[tp]
            if tp in committed and committed[tp] > high:
                # Connect's sink consumer gets OffsetOutOfRange here and resets per auto.offset.reset,
                # earliest by default for sink connectors: do the same, and say so.
                log.warning(
                    "connect-kafka %s: consumer group connect-%s's offset %d for %s[%d] is past the "
                    "partition's end %d (topic re-created or truncated?); starting that partition from "
                    "its earliest offset %d, as Connect's sink consumer does (auto.offset.reset=earliest). "
                    "Commits never move the group's offset back, so reset it (connect-offsets alter) "
                    "before a sink task takes over.",
                    self.connector,
                    self.connector,
                    committed[tp],
                    tp[0],
                    tp[1],
                    high,
                    low,
                )
                start[tp] = low
        log.info("connect-kafka %s: starting at %s (committed: %d partitions)", self.connector, start, len(committed))
        return spark_offset(start)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """High watermarks, never behind ``start`` (a committed offset may exceed Tansu's estimate)."""
        begin = flatten(start)
        marks = self._watermarks(self._partitions())
        end = {tp: max(high, begin.get(tp, low)) for tp, (low, high) in marks.items()}
        for tp, offset in begin.items():
            end.setdefault(tp, offset)  # a partition that vanished from metadata keeps its position
        latest = spark_offset(end)
        return start if latest == spark_offset(begin) else dict(latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, finish = flatten(start), flatten(end)
        ranges: list[InputPartition] = []
        for (topic, partition), stop in sorted(finish.items()):
            first = begin.get((topic, partition), 0)  # discovered later: from the start of the log
            if first < stop:
                ranges.append(TopicPartitionRange(topic, partition, first, stop))
        return ranges

    def commit(self, end: dict[str, Any]) -> None:
        """Best effort (one batch late, may repeat): handed to a background thread (``background``)
        so the next batch is not delayed, also not by a daemon that is restarting or waiting for its
        broker; monotonic and idempotent; failures are logged."""
        if not self.commit_offsets:
            return
        shaped = kafka_shaped(dict(end))
        if shaped is None:
            log.warning("connect-kafka %s: not committing an unknown offset %r", self.connector, end)
            return
        committer = committer_for(
            self.daemon.url,
            self.connector,
            self.daemon.credentials,
            kind="sink",
            source="connect-kafka",
            claim_epoch=self.claim_epoch,
        )
        committer.submit(kafka_entries(shaped))

    # -- data (executors) ---------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Records ``[start, end)``; stops early only at the partition's end (compacted or aborted tail)."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        assert isinstance(partition, TopicPartitionRange)
        consumer = Consumer(
            {
                "group.id": f"connect-kafka-read-{uuid.uuid4().hex[:12]}",
                **self.config,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.assign([TopicPartition(partition.topic, partition.partition, partition.start)])
            deadline = time.monotonic() + READ_TIMEOUT_S
            while True:
                if time.monotonic() > deadline:
                    raise ConnectKafkaError(
                        f"{partition.topic}[{partition.partition}]: no record at or after the planned range "
                        f"[{partition.start}, {partition.end}) within {READ_TIMEOUT_S:.0f} s"
                    )
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return  # nothing more in the log: the range's tail is a gap
                    raise ConnectKafkaError(f"{partition.topic}[{partition.partition}]: {error}")
                offset = msg.offset()
                if offset is None or offset >= partition.end:
                    return
                if offset >= partition.start:
                    kind, millis = msg.timestamp()
                    stamp = datetime.fromtimestamp(millis / 1000, tz=UTC) if kind != 0 else None
                    yield (msg.key(), msg.value(), msg.topic(), msg.partition(), offset, stamp)
                if offset + 1 >= partition.end:
                    return
                deadline = time.monotonic() + READ_TIMEOUT_S
        finally:
            consumer.close()


class ConnectKafkaDataSource(DataSource):
    """``spark.readStream.format("connect-kafka")``: see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return "connect-kafka"

    def schema(self) -> str:
        """Checks the options first: PySpark asks for the schema at ``load()`` (unless one is given),
        and makes the stream reader only for the first batch (``emulator.spark.refusal``)."""
        refuse_now(lambda: ConnectKafkaStreamReader(self.options))
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return reader_or_refusal(lambda: ConnectKafkaStreamReader(self.options))
