"""Locations that are offsets logs: a Kafka topic and an embedded log.

Reading is Connect's startup read: every partition to its end offset, applied to an ``OffsetView``
exactly as the daemon materializes it. Writing appends the records the diff marks as changes in
chunks, placed by murmur2 over the log's *current* partition count, each durable on its own and
waited for at most ``--timeout``: a chunk refused after others were written says how many are in
effect (``WritePartlyApplied``), one the log does not answer is of unknown outcome
(``WriteOutcomeUnknown``), as the daemon answers its own chunked writes. A direct write cannot check
Connect's STOPPED rule (no cluster is consulted): a warning says so; importing through a daemon
has it enforced.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from emulator.formats.diff import compute_diff
from emulator.formats.model import Loaded, RawRecord
from emulator.logs.base import OffsetLog
from emulator.model.errors import (
    LogUnavailable,
    OffsetsError,
    WriteOutcomeUnknown,
    partly_unknown,
    partly_written,
)
from emulator.model.records import LogRecord, Position
from emulator.transfer.errors import LocationError, TransferInterrupted
from emulator.transfer.locations.base import Location
from emulator.transfer.options import TransferContext
from emulator.transfer.report import ApplyResult
from emulator.transfer.selection import with_tombstones
from emulator.view.offset_view import OffsetView

_WRITE_CHUNK = 10_000
_OVERRUN_S = 2.0
"""As the daemon's ``emulator.service.writer._OVERRUN_S``: a log call gets ``--timeout`` as its own
timeout; one that overruns it by this much is still running, and its outcome is unknown."""
RUN_AGAIN = "running the same command again"
"""How a direct write that was refused after some of its chunks says the rest gets written
(``emulator.model.errors.partly_written``): the diff then finds only the rest to write."""


class LogLocation(Location):
    store = True

    @abc.abstractmethod
    def exists(self, ctx: TransferContext) -> bool: ...

    @abc.abstractmethod
    def make_log(self, ctx: TransferContext) -> OffsetLog: ...

    def read(self, ctx: TransferContext) -> Loaded:
        if not self.exists(ctx):
            raise LocationError(f"{self.description} does not exist")
        log = self.make_log(ctx)
        try:
            log.open()
            view = _read_to_end(log, ctx)
        finally:
            log.close()
        return _view_records(view)

    def apply(self, incoming: list[RawRecord], ctx: TransferContext) -> ApplyResult:
        if ctx.options.dry_run and not self.exists(ctx):
            incoming = with_tombstones(incoming, (), ctx)
            diff = compute_diff(lambda _k: None, incoming, ctx.keys)
            return ApplyResult(
                diff.as_dict(ctx.options.diff_limit),
                0,
                [f"{self.description} does not exist yet"],
                ctx.count_unreadable(diff.records_to_write(ctx.options.write_all)),
            )
        log = self.make_log(ctx)
        writes = _BoundedWrites(log, ctx.options.timeout_s)
        try:
            log.open()
            view = _read_to_end(log, ctx)
            incoming = with_tombstones(incoming, _view_records(view).records if ctx.prune else (), ctx)
            diff = compute_diff(lambda k: e.value if (e := view.get_raw(k)) else None, incoming, ctx.keys)
            to_write = diff.records_to_write(ctx.options.write_all)
            unreadable = ctx.count_unreadable(to_write)
            if ctx.options.dry_run or not to_write:
                return ApplyResult(diff.as_dict(ctx.options.diff_limit), 0, unreadable_values=unreadable)
            ctx.progress.note(
                f"warning: writing directly to {self.description}: Connect's STOPPED rule is not checked here; "
                "the connectors involved must be stopped (or import through a daemon, which checks it)"
            )
            written = 0
            ctx.writing = True
            for start in range(0, len(to_write), _WRITE_CHUNK):
                chunk = to_write[start : start + _WRITE_CHUNK]
                try:
                    writes.append([(r.key, r.value) for r in chunk])
                except _Interrupted as stop:
                    landed = len(chunk) if stop.landed else 0
                    raise TransferInterrupted(
                        _interrupted(
                            self.description,
                            written + landed,
                            len(to_write),
                            chunk_unknown=len(chunk) if stop.landed is None else 0,
                        )
                    ) from None
                except KeyboardInterrupt:  # between chunks: none under way
                    raise TransferInterrupted(_interrupted(self.description, written, len(to_write))) from None
                except WriteOutcomeUnknown as unknown:
                    if not written:
                        raise
                    unwritten = len(to_write) - written - len(chunk)
                    message = partly_unknown(unknown.message, written, len(chunk), unwritten, RUN_AGAIN)
                    raise WriteOutcomeUnknown(message, unknown.outcome) from unknown
                except OffsetsError as error:
                    if not written:
                        raise
                    raise partly_written(error, written, len(to_write), RUN_AGAIN) from error
                written += len(chunk)
                ctx.progress.report(f"writing {self.description}", written, len(to_write))
            return ApplyResult(diff.as_dict(ctx.options.diff_limit), written, unreadable_values=unreadable)
        finally:
            if writes.unfinished:
                # The chunk still inside the log (a commit whose fsync has not come back) holds the log's
                # writing lock, which closing waits for: close once that write is done, and answer now.
                threading.Thread(target=log.close, name="close after an unanswered write", daemon=True).start()
            else:
                log.close()


class KafkaLocation(LogLocation):
    kind = "kafka"

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic

    @property
    def description(self) -> str:
        return f"kafka://{self.bootstrap}/{self.topic}"

    def exists(self, ctx: TransferContext) -> bool:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient

        from emulator.logs.kafka.config import KafkaClientConfig

        admin = KafkaClientConfig(self.bootstrap, ctx.kafka_config, "a transfer").create("admin", AdminClient)
        try:
            # All topics, not ``topic=``: a metadata request naming a missing topic auto-creates it on
            # brokers that ignore the request's allow-auto-create flag (Tansu does), and a dry run or a
            # read must never create anything.
            waited = min(ctx.options.timeout_s, 30.0)
            metadata = admin.list_topics(timeout=waited)
        except KafkaException as exc:  # worded as a destination that never answers (``wait_for_cluster``)
            why = exc.args[0] if exc.args else exc
            raise LocationError(
                f"cannot reach the Kafka cluster at {self.bootstrap} (--{ctx.role}) within {waited:g} s (--timeout): "
                f"{why}"  # the command adds "nothing was written"
            ) from exc
        found = metadata.topics.get(self.topic)
        if found is None:
            return False
        if found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        if found.error is not None:
            raise LocationError(f"{self.description}: {found.error}")
        return True

    def make_log(self, ctx: TransferContext) -> OffsetLog:
        from emulator.logs.kafka.offsets_log import KafkaOffsetLog

        return KafkaOffsetLog(
            self.bootstrap,
            topic=self.topic,
            partitions=ctx.options.partitions,
            replication_factor=ctx.options.replication_factor,
            client_config=ctx.kafka_config,
            startup_timeout_s=ctx.options.timeout_s,  # a destination that never answers ends the transfer
            settings=(f"--{ctx.role}", "--timeout"),
        )


class EmbeddedLocation(LogLocation):
    kind = "embedded"

    def __init__(self, data_dir: Path, name: str) -> None:
        self.data_dir = data_dir
        self.name = name

    @property
    def description(self) -> str:
        return f"embedded:{self.data_dir / (self.name + '.sqlite3')}"

    def exists(self, ctx: TransferContext) -> bool:
        return (self.data_dir / f"{self.name}.sqlite3").is_file()

    def make_log(self, ctx: TransferContext) -> OffsetLog:
        """``--partitions`` is the destination's count when it is created; a source opens with its own."""
        from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
        from emulator.logs.embedded.storage import stored_partition_count

        partitions = ctx.options.partitions
        if ctx.role == "from":
            partitions = stored_partition_count(self.data_dir / f"{self.name}.sqlite3") or partitions
        return EmbeddedOffsetLog(self.data_dir, partitions=partitions, name=self.name)


def _interrupted(description: str, written: int, total: int, chunk_unknown: int = 0) -> str:
    """What a Ctrl-C during a direct write leaves (completes "interrupted: `import` …"): the chunks
    written are durable and in effect, a chunk still under way (``chunk_unknown`` records) may land or
    not, the rest was never sent; the same command writes what differs."""
    said = f"had written {written:,} of its {total:,} records to {description}, which are in effect"
    if chunk_unknown:
        said += f"; the next {chunk_unknown:,} were being written and may or may not have been"
    rest = total - written - chunk_unknown
    if rest:
        said += f"; the other {rest:,} were not written"
    if chunk_unknown:
        return f"{said}: see what the destination holds (the same command with --dry-run) before running it again"
    return f"{said} ({RUN_AGAIN} writes the rest)" if rest else said


class _Interrupted(Exception):
    """Ctrl-C while a chunk was being appended: ``landed`` says whether that chunk was written (True),
    refused (False) or is of unknown outcome (None: it did not finish within ``_SETTLE_S``)."""

    def __init__(self, landed: bool | None) -> None:
        super().__init__(landed)
        self.landed = landed


_SETTLE_S = 3.0
"""How long a Ctrl-C waits for the chunk under way to finish, so that it can say how many records
were written (a chunk of 10,000 records commits in well under a second); a second Ctrl-C stops the wait."""


class _BoundedWrites:
    """Each chunk appended in a thread of its own and waited for at most ``--timeout`` (+ the overrun):
    the embedded log bounds its wait for the write lock but not a commit already under way, so a
    commit whose fsync never came back held the command (an import, a migrate) without end. Past the
    deadline the chunk's outcome is unknown, as the daemon answers (``write_outcome_unknown``): the
    command exits 4 and the write may still land."""

    def __init__(self, log: OffsetLog, timeout_s: float) -> None:
        self._log = log
        self._timeout_s = timeout_s
        self.unfinished = False
        """True once a chunk's append outlived its deadline: its thread still runs inside the log."""

    def append(self, entries: list[tuple[bytes, bytes | None]]) -> list[Position]:
        outcome: Future[list[Position]] = Future()
        outcome.set_running_or_notify_cancel()

        def run() -> None:
            try:
                outcome.set_result(self._log.append(entries, self._timeout_s))
            except BaseException as exc:  # handed back to the waiting command, or to ``outcome``'s reader
                outcome.set_exception(exc)

        try:
            # Started inside the ``try``: a Ctrl-C landing while ``start`` waits for the thread to run
            # finds the append already under way.
            threading.Thread(target=run, name=f"append to {self._log.description}", daemon=True).start()
            return outcome.result(self._timeout_s + _OVERRUN_S)
        except KeyboardInterrupt:  # Ctrl-C: the append goes on in its thread; see how it ends, briefly
            raise _Interrupted(self._settle(outcome)) from None
        except FutureTimeout:
            self.unfinished = True
            raise WriteOutcomeUnknown(
                f"{self._log.description} did not answer the write of {len(entries):,} records within "
                f"{self._timeout_s:g} s (--timeout): its commit has not come back (a disk that does not answer "
                "its fsync?), and whether the records were written is unknown",
                outcome,
            ) from None

    def _settle(self, outcome: Future[list[Position]]) -> bool | None:
        """After a Ctrl-C, the chunk under way: written (True), refused (False), or unknown (None) when
        it does not finish within ``_SETTLE_S`` or a second Ctrl-C comes first."""
        try:
            outcome.result(_SETTLE_S)
        except (FutureTimeout, KeyboardInterrupt):
            self.unfinished = True
            return None
        except Exception:  # the log refused it: nothing of that chunk was written
            return False
        return True


# --- reading logs ---------------------------------------------------------------------------------------


def _read_to_end(log: OffsetLog, ctx: TransferContext) -> OffsetView:
    """Connect's startup read: every partition to its end offset, applied to a view."""
    view = OffsetView()
    reporting = threading.Lock()
    reading = [True]  # the reader goes on delivering (a destination's own writes) after this read

    def apply(records: Sequence[LogRecord]) -> None:  # on the log's reader thread
        view.apply(records)
        with reporting:
            if reading[0]:
                progress = log.progress()
                ctx.progress.report(
                    f"reading {log.description}", progress.records_read, sum(progress.end_offsets.values())
                )

    log.start_reading(apply)
    try:
        log.read_to_end(ctx.options.timeout_s)
    except LogUnavailable as exc:
        progress = log.progress()
        if progress.error is not None:
            raise LocationError(f"{log.description} cannot be read: {progress.error}") from exc
        raise LocationError(
            f"{log.description} was not read to its end within {ctx.options.timeout_s:g} s (--timeout; "
            f"{progress.records_read} records read of end offsets summing to {sum(progress.end_offsets.values())})"
        ) from exc  # the command adds "nothing was written"
    with reporting:
        reading[0] = False
        done = log.progress()
        ctx.progress.report(f"read {log.description}", done.records_read, sum(done.end_offsets.values()), force=True)
    return view


def _view_records(view: OffsetView) -> Loaded:
    records = []
    null_keys = 0
    for key, entry in view.raw_entries():
        if key is None:
            null_keys += 1
            continue
        records.append(RawRecord(key, entry.value, entry.partition, entry.offset, entry.timestamp_ms))
    records.sort(key=lambda r: (r.kafka_partition or 0, r.log_offset or 0))
    loaded = Loaded(records)
    if null_keys:
        loaded.notes.append(f"{null_keys} live record(s) without a key left out (no offsets store can hold them)")
    return loaded
