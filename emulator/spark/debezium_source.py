"""``connect-debezium``: a Spark streaming source that runs a Debezium connector, sharing its offsets
with Kafka Connect through the daemon.

The connector's name is its identity: a fresh query starts where the daemon's offsets for that name
say (what a Connect worker running the same connector committed), and each completed micro-batch's
source offsets go back to the daemon, written as Connect writes them, so the Connect-run connector
resumes right after Spark's last change. Design and semantics: docs/spark-cdc.md.

Where things run: the engine is a JVM in a subprocess (``debezium_jvm``) of Spark's long-lived
driver-side Python worker, which is where ``initialOffset``/``latestOffset``/``partitions``/``commit``
run (docs/spark.md, "When Spark calls a source"). ``partitions`` hands each executor task its changes
inside the partition object, so executors need no access to the database or the engine, and
``read`` is a pure function of its partition.

Options: ``connector``; ``debezium.*`` (the connector's configuration); ``url`` (daemon) and its
credentials (``token``, ``user``/``password``, ``ca``, ``clientCert``/``clientKey``, as every source);
``maxRecordsPerTrigger``; ``commitOffsets`` (default true); ``jsonSchemas`` (default false);
``afterTable`` + ``afterColumns``; ``recordsPerPartition``; engine: ``javaHome``, ``classpath``,
``jvmOptions``, ``engineLogLevel``, ``engineDir``, ``startTimeoutMs``, ``pollTimeoutMs``,
``replayTimeoutMs``, ``engineQueueSize``, ``maxBufferedRecords``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from emulator.client.errors import ClientError
from emulator.spark.debezium_commit import DebeziumCommitter
from emulator.spark.debezium_offsets import DebeziumOffset, Entry, behind_daemon, daemon_position
from emulator.spark.debezium_options import AfterColumns, ConnectDebeziumError, parse_options
from emulator.spark.debezium_rows import ChangeColumns, RowBuilder
from emulator.spark.debezium_stream import ChangeStream
from emulator.spark.refusal import reader_or_refusal, refuse_now

log = logging.getLogger(__name__)


@dataclass
class ChangeBatch(InputPartition):
    """One executor task: consecutive changes of the batch, carried in the partition itself."""

    changes: ChangeColumns


class ConnectDebeziumStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = parse_options(options)
        self.connector = self.options.connector
        self.after: AfterColumns | None = self.options.after
        self._stream: ChangeStream | None = None
        self._committer: DebeziumCommitter | None = None
        self._resume_checked = False  # initialOffset (a new checkpoint) sets it: nothing to compare

    def __getstate__(self) -> dict[str, Any]:
        """The engine and the commit thread stay in the driver's worker (executors only ``read``)."""
        state = dict(self.__dict__)
        state["_stream"] = None
        state["_committer"] = None
        return state

    # -- driver side ------------------------------------------------------------------------------
    def _changes(self) -> ChangeStream:
        if self._stream is None:
            self._stream = ChangeStream(self.options.engine)
        return self._stream

    def _position(self, offset: Mapping[str, Any]) -> DebeziumOffset:
        parsed = DebeziumOffset.parse(dict(offset))
        if parsed is None:
            raise ConnectDebeziumError(f"not a connect-debezium offset: {str(dict(offset))[:300]}")
        if parsed.connector != self.connector:
            raise ConnectDebeziumError(
                f"the checkpoint is for connector {parsed.connector!r}, but option connector is {self.connector!r}; "
                "use a new checkpoint location for another connector"
            )
        return parsed

    def initialOffset(self) -> dict[str, Any]:
        """Where the daemon's offsets for the connector say (none: the connector's first start,
        e.g. its initial snapshot). The engine starts here, seeded with the daemon's exact bytes."""
        self._resume_checked = True  # no checkpoint yet: it starts at the daemon's offsets
        try:
            with self.options.daemon.offsets() as daemon:
                records = daemon.records(self.connector)
        except ClientError as exc:
            raise ConnectDebeziumError(
                f"cannot read connector {self.connector}'s offsets from the daemon at {self.options.daemon.url}: {exc}"
            ) from exc
        position = daemon_position(self.connector, records)
        stream = self._changes()
        if not stream.serves(position):
            stream.start(position, seed=dict(records))
        log.info("connect-debezium %s: starting after the daemon's offsets %s", self.connector, position.spark())
        return position.spark()

    def check_resume(self, start: DebeziumOffset) -> None:
        """A query resumed from its checkpoint starts there, as Spark resumes every source, whatever the
        daemon holds now; when the two differ, what that costs is said once, with what to do, instead
        of without a word: the daemon ahead (Connect ran, or someone altered the offsets) means changes
        emitted again; behind or missing (a rewind or reset since) means the operator's change is
        ignored and overwritten by the query's next commit. Called with the checkpoint's committed
        offset (the first ``latestOffset``/``partitions`` of a reader that ``initialOffset`` did not
        start), before the engine starts from it."""
        self._resume_checked = True
        try:
            with self.options.daemon.offsets() as daemon:
                records = daemon.records(self.connector)
        except ClientError as exc:
            log.info(
                "connect-debezium %s: could not compare the checkpoint with the connector's offsets: %s",
                self.connector,
                exc,
            )
            return
        held = daemon_position(self.connector, records)
        ahead = behind_daemon(start, held)
        if ahead:
            log.warning(
                "connect-debezium %s: the daemon's offsets for the connector moved ahead of this checkpoint's (%s): "
                "Connect processed the changes between them, or someone altered the offsets; this query emits "
                "them again (Spark resumes from its checkpoint). To continue from the daemon's offsets instead, "
                "stop the query and start it with a new checkpoint location: it then starts after them",
                self.connector,
                _compared(ahead, listed_from="daemon"),
            )
            return
        behind = behind_daemon(held, start)  # the checkpoint's partitions the daemon lacks or is behind on
        if behind:
            log.warning(
                "connect-debezium %s: the daemon's offsets for the connector are behind this checkpoint's or "
                "missing (%s): they were rewound or reset since (connect-offsets alter or reset, a PATCH or "
                "DELETE), or this query's last batches were never published (no OffsetCommitListener). The "
                "checkpoint wins: Spark resumes from it, not from the daemon's offsets, and the query's next "
                "commit overwrites the operator's change. To honour the rewind or reset, stop the query and "
                "start it with a new checkpoint location: it then starts from the daemon's offsets (a new "
                "connector's start, a snapshot unless snapshot.mode says otherwise, where there are none)",
                self.connector,
                _compared(behind, listed_from="checkpoint"),
            )

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.options.max_records) if self.options.max_records else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        position = self._position(start)
        if not self._resume_checked:
            self.check_resume(position)
        stream = self._changes()
        stream.ensure(position)
        if stream.last_seq <= position.seq:
            stream.fill(self.options.engine.poll_wait_s)
        else:
            stream.fill(0.0)
        end = stream.last_seq
        if isinstance(limit, ReadMaxRows):
            end = min(end, position.seq + limit.max_rows)
        if end <= position.seq:
            return start  # the very same dict: Spark sees "no new data" by string equality
        return stream.at(end).spark()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = self._position(start), self._position(end)
        if not self._resume_checked:  # a restart replaying its unfinished batch starts here
            self.check_resume(first)
        if last.seq <= first.seq:
            return []
        changes = self._changes().between(first, last)
        size = self.options.records_per_partition
        return [ChangeBatch(ChangeColumns.of(changes[i : i + size])) for i in range(0, len(changes), size)]

    def commit(self, end: dict[str, Any]) -> None:
        """Spark completed everything up to ``end`` (one batch late, may repeat): free the buffer,
        then commit the offsets to the daemon and acknowledge them to the engine, in the background."""
        position = DebeziumOffset.parse(dict(end))
        if position is None or position.connector != self.connector:
            log.warning("connect-debezium %s: not committing an unknown offset %r", self.connector, end)
            return
        stream = self._changes()
        stream.release(position.seq)
        if not self.options.commit_offsets:
            stream.ack(position.seq, stream.generation, commit=False)
            return
        # Also when this worker has not started an engine yet (a restart's first call repeats the
        # last completed batch): the daemon may not hold it; the acknowledgement is then skipped.
        if self._committer is None:
            daemon = self.options.daemon
            self._committer = DebeziumCommitter(
                daemon.url, self.connector, stream.ack, daemon.credentials, self.options.claim_epoch
            )
        self._committer.submit(position, stream.generation)

    def stop(self) -> None:
        """Best effort (Spark does not call it when a query stops; the engine process then closes
        itself when this worker goes away)."""
        if self._committer is not None:
            self._committer.flush(10.0)
        if self._stream is not None:
            self._stream.stop()

    # -- executors --------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        """One Arrow batch per partition (``RowBuilder.batch``)."""
        assert isinstance(partition, ChangeBatch)
        builder = RowBuilder(self.after)
        if len(partition.changes):
            yield builder.batch(partition.changes)
        if builder.mismatched:
            log.warning(
                "connect-debezium %s: %d after field(s) of %s did not fit their afterColumns type and were set to null",
                self.connector,
                builder.mismatched,
                self.after.table if self.after else "?",
            )


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _compared(listed: list[tuple[Entry, dict[str, Any] | None]], listed_from: Literal["checkpoint", "daemon"]) -> str:
    """``behind_daemon``'s answer as the warnings print it, checkpoint first whichever side it lists
    (its entries are ``listed_from``'s, each with the other side's offset or None)."""
    shown = []
    for (partition, offset), other in listed:
        theirs = _json(other) if other is not None else "none"
        checkpoint, daemon = (_json(offset), theirs) if listed_from == "checkpoint" else (theirs, _json(offset))
        shown.append(f"partition {_json(partition)}: checkpoint {checkpoint}, daemon {daemon}")
    return "; ".join(shown)


class ConnectDebeziumDataSource(DataSource):
    """``spark.readStream.format("connect-debezium")``: see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return "connect-debezium"

    def schema(self) -> str:
        """Checks the options first (``parse_options`` checks them all): PySpark asks for the schema at
        ``load()`` (unless one is given), and makes the stream reader only for the first batch
        (``emulator.spark.refusal``)."""
        return refuse_now(lambda: parse_options(self.options)).schema

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return reader_or_refusal(lambda: ConnectDebeziumStreamReader(self.options))
