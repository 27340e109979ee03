"""A connector's changes, numbered from a starting position, held for Spark's micro-batches.

Spark needs a replayable source: ``partitions(start, end)`` must give the same changes every time it
is asked, also after a driver restart. A Debezium connector is not replayable by itself, but it is
*restartable*: started from the offsets of change ``n`` it emits the changes after ``n`` again, in
the same order (Postgres decodes the same WAL from the replication slot, which has not been
confirmed past the daemon's offsets). So:

- within one driver-side worker, changes are polled from the engine process into a buffer and
  numbered ``base+1, base+2, …`` (``seq``); a batch is a range of that buffer;
- a position the buffer cannot serve (a fresh worker after a restart, a replayed batch) restarts the
  engine from that position's Connect offsets and numbers again from its ``seq``;
- a replay checks that the change at the batch's end carries the offsets the checkpoint recorded for
  it; if not (the database no longer holds those changes, or an initial snapshot was interrupted and
  Debezium redoes it), it fails with ``ReplayMismatch`` instead of serving different data.

Pure Python (no pyspark); ``debezium_source`` adapts it to Spark's reader API.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emulator.codec.jackson_reader import loads_lenient
from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.spark.debezium_offsets import DebeziumOffset, Entry
from emulator.spark.debezium_process import ChangeRecord, EngineError, EngineProcess

log = logging.getLogger(__name__)


class ReplayMismatch(EngineError):
    """A replayed batch would not be the batch Spark recorded; serving it would lose or invent changes."""


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """How to run the engine process (the source's options, checked)."""

    connector: str
    props: Mapping[str, str]
    schemas: bool = False
    queue_limit: int = 10000
    max_buffered: int = 50000
    poll_wait_s: float = 0.2
    replay_timeout_s: float = 120.0
    start_timeout_s: float = 120.0
    java_home: str | None = None
    classpath: tuple[str, ...] = ()
    jvm_options: tuple[str, ...] = ()
    log_level: str = "WARN"
    engine_dir: str | None = None


@dataclass(frozen=True, slots=True)
class Numbered:
    seq: int
    record: ChangeRecord


def seed_records(connector: str, entries: tuple[Entry, ...]) -> dict[bytes, bytes | None]:
    """Connect's key and value bytes for a position's offsets (what the engine's store is seeded with)."""
    seed: dict[bytes, bytes | None] = {}
    for partition, offset in entries:
        seed[encode_key(connector, partition)] = encode_offset(offset)
    return seed


class ChangeStream:
    """One connector's changes for one reader (the driver-side worker); not shared across processes."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self._process: EngineProcess | None = None
        self._generation = 0
        self._base: DebeziumOffset | None = None
        self._buffer: deque[Numbered] = deque()
        self._released = 0
        """The seq of the last change dropped from the buffer (the base's seq before any)."""
        self._latest: dict[str, Entry] = {}
        """Per partition (canonical JSON), the newest entry up to ``_released``."""
        self._partitions: set[str] = set()
        self._parsed: dict[str, tuple[str, dict[str, Any]]] = {}
        self._lock = threading.RLock()
        self._dir: str | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._process is not None

    @property
    def generation(self) -> int:
        return self._generation

    def start(self, position: DebeziumOffset, seed: Mapping[bytes, bytes | None] | None = None) -> None:
        """(Re)start the engine so that its first change is ``position.seq + 1``. ``seed`` (the
        daemon's raw records) replaces the offsets encoded from ``position``'s entries."""
        with self._lock:
            self.stop()
            settings = self.settings
            self._dir = settings.engine_dir or tempfile.mkdtemp(prefix="connect-debezium-")
            os.makedirs(self._dir, exist_ok=True)
            process = EngineProcess(
                java_home=settings.java_home,
                extra_classpath=settings.classpath,
                jvm_options=settings.jvm_options,
                log_level=settings.log_level,
                start_timeout_s=settings.start_timeout_s,
                log_path=os.path.join(self._dir, "engine.log") if settings.engine_dir else None,
            )
            try:
                process.start(
                    settings.props,
                    seed if seed is not None else seed_records(settings.connector, position.entries),
                    os.path.join(self._dir, "offsets.dat"),
                    schemas=settings.schemas,
                    queue_limit=settings.queue_limit,
                )
            except BaseException:
                process.kill()
                raise
            self._process = process
            self._generation += 1
            self._base = position
            self._buffer.clear()
            self._released = position.seq
            self._latest = {_canonical(p): (p, o) for p, o in position.entries}
            self._partitions = set(self._latest)
            self._parsed.clear()
            log.info(
                "connect-debezium %s: engine run %d (pid %d) starts after change %d, offsets %s",
                settings.connector,
                self._generation,
                process.pid,
                position.seq,
                [o for _, o in position.entries],
            )

    def stop(self) -> None:
        """Close the engine gracefully (it commits only what was acked, and releases the slot)."""
        with self._lock:
            process, self._process = self._process, None
            if process is not None:
                process.stop()
            if self._dir is not None and not self.settings.engine_dir:
                shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    @property
    def offsets_file(self) -> str | None:
        """The engine's own ``FileOffsetBackingStore`` file (what its ``OffsetStorageWriter`` flushed)."""
        return None if self._dir is None else os.path.join(self._dir, "offsets.dat")

    # -- positions --------------------------------------------------------------------------------
    @property
    def first_seq(self) -> int:
        """The oldest position a range can start from in this run."""
        return self._released

    @property
    def last_seq(self) -> int:
        return self._buffer[-1].seq if self._buffer else self._released

    def _partition_key(self, text: str) -> str:
        """The canonical key of a partition's JSON text (parsed once per distinct text)."""
        known = self._parsed.get(text)
        if known is None:
            partition = loads_lenient(text.encode("utf-8"))
            known = self._parsed[text] = (_canonical(partition), partition)
        return known[0]

    def _entry(self, record: ChangeRecord) -> tuple[str, Entry] | None:
        if record.offset is None:
            return None
        key = self._partition_key(record.partition)
        return key, (self._parsed[record.partition][1], loads_lenient(record.offset.encode("utf-8")))

    def at(self, seq: int) -> DebeziumOffset:
        """The position after change ``seq`` (between ``first_seq`` and ``last_seq``)."""
        if seq < self.first_seq or seq > self.last_seq:
            raise KeyError(f"change {seq} is not held (held: {self.first_seq}..{self.last_seq})")
        found: dict[str, Entry] = {}
        index = seq - self._released - 1
        while index >= 0 and len(found) < len(self._partitions):
            entry = self._entry(self._buffer[index].record)
            if entry is not None and entry[0] not in found:
                found[entry[0]] = entry[1]
            index -= 1
        for key, latest in self._latest.items():
            found.setdefault(key, latest)
        return DebeziumOffset.of(self.settings.connector, seq, list(found.values()))

    def serves(self, position: DebeziumOffset) -> bool:
        """Whether ranges starting at ``position`` come from this engine run (same numbering)."""
        if self._process is None or position.seq < self.first_seq:
            return False
        if position.seq > self.last_seq:
            return True  # not polled yet: checked against the offsets once the buffer reaches it
        return self.at(position.seq).same_position(position)

    def ensure(self, position: DebeziumOffset) -> None:
        """Make ``position`` servable: restart the engine from it unless this run already numbers it."""
        with self._lock:
            if not self.serves(position):
                if self._process is not None:
                    log.info(
                        "connect-debezium %s: change %d is not in engine run %d (holds %d..%d); restarting from it",
                        self.settings.connector,
                        position.seq,
                        self._generation,
                        self.first_seq,
                        self.last_seq,
                    )
                self.start(position)

    # -- records ----------------------------------------------------------------------------------
    def fill(self, wait_s: float) -> int:
        """Poll new changes into the buffer (up to ``max_buffered``); the engine's failure is raised."""
        with self._lock:
            process = self._require()
            room = self.settings.max_buffered - len(self._buffer)
            if room <= 0:
                return 0
            records, state = process.poll(room, wait_s)
            seq = self.last_seq
            for record in records:
                seq += 1
                self._buffer.append(Numbered(seq, record))
                if record.offset is not None:
                    self._partitions.add(self._partition_key(record.partition))
            if not records and not state.get("running", True):
                raise EngineError(
                    f"the Debezium connector stopped: {state.get('error') or state.get('message')}\n"
                    f"{process.log_tail()}"
                )
            return len(records)

    def wait_for(self, seq: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.last_seq < seq:
            if time.monotonic() > deadline:
                raise ReplayMismatch(
                    f"connect-debezium {self.settings.connector}: change {seq} did not arrive within "
                    f"{timeout_s:.0f} s (the engine delivered up to {self.last_seq}); the database may no longer "
                    "hold the changes of this batch"
                )
            if len(self._buffer) >= self.settings.max_buffered:
                raise ReplayMismatch(
                    f"connect-debezium {self.settings.connector}: change {seq} is more than maxBufferedRecords "
                    f"({self.settings.max_buffered}) past the oldest held change; raise maxBufferedRecords"
                )
            self.fill(min(1.0, max(0.05, deadline - time.monotonic())))

    def between(self, start: DebeziumOffset, end: DebeziumOffset) -> list[Numbered]:
        """The changes ``(start.seq, end.seq]``, restarting and replaying if this run does not hold
        them; ``ReplayMismatch`` if the replay does not end where ``end`` says."""
        with self._lock:
            if end.seq <= start.seq:
                return []
            self.ensure(start)
            self.wait_for(end.seq, self.settings.replay_timeout_s)
            found = self.at(end.seq)
            if not found.same_position(end):
                raise ReplayMismatch(
                    f"connect-debezium {self.settings.connector}: change {end.seq} now carries the offsets "
                    f"{found.spark()['source_offsets']}, but the checkpoint recorded {end.spark()['source_offsets']}"
                    " for it, so the replayed batch would differ (Debezium redoes an interrupted initial snapshot; "
                    "or the database no longer holds these changes). Start the query with a new checkpoint: it "
                    "resumes from the daemon's offsets"
                )
            first = start.seq - self._released  # index of change start.seq + 1
            return [self._buffer[i] for i in range(first, end.seq - self._released)]

    def release(self, seq: int) -> None:
        """Spark will not ask for changes up to ``seq`` again in this run: drop them from the buffer."""
        with self._lock:
            while self._buffer and self._buffer[0].seq <= seq:
                item = self._buffer.popleft()
                entry = self._entry(item.record)
                if entry is not None:
                    self._latest[entry[0]] = entry[1]
                self._released = item.seq

    # -- acknowledgements -------------------------------------------------------------------------
    def ack(self, seq: int, generation: int, commit: bool = True) -> bool:
        """The daemon holds the offsets of change ``seq``: let the engine commit them (``commit``),
        or only forget the records. Ignored for another engine run's numbering."""
        with self._lock:
            process, base = self._process, self._base
            if process is None or base is None or generation != self._generation:
                return False
            index = min(seq, self.last_seq) - base.seq
            if index <= 0:
                return False
            if commit:
                process.ack(index)
            else:
                process.forget(index)
            return True

    def _require(self) -> EngineProcess:
        if self._process is None:
            raise EngineError(f"connect-debezium {self.settings.connector}: the engine is not running")
        return self._process


def _canonical(partition: Mapping[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
