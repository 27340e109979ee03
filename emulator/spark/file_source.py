"""``connect-file``: a Spark streaming source that reads a text file as Kafka's FileStreamSourceConnector
does, starting from and committing to that connector's offsets in the daemon.

Call order (docs/spark.md, "When Spark calls a source"): ``latestOffset`` and ``commit`` run in one long-lived
Python worker on the driver; ``read`` runs on executors from a pickled reader. ``commit(end)``
arrives one batch late and never for the last batch, and ``stop()`` is not called, so committing
here is a best effort; ``OffsetCommitListener`` or ``connect-offsets spark-handoff`` publish the
last completed batch. Spark offsets carry the Connect position and the byte offset (see
``shapes``), so ``read`` is a pure function of ``(start, end)``.

Options: ``url`` (daemon, default ``$CONNECT_OFFSETS_URL`` or http://127.0.0.1:8081), ``connector``,
``file`` (the connector's ``file`` setting, verbatim: it is the partition's ``filename``);
``maxLinesPerTrigger``; ``commitOffsets`` (default true); ``partitionBytes`` (bytes per Spark
partition, default 32 MiB); ``claimEpoch`` (the epoch of the job's claim on the connector: a claimed
connector refuses commits without it).
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from emulator.client.errors import ClientError
from emulator.spark.background import committer_for
from emulator.spark.filestream import Cursor, iter_chunks, scan, split_at_lines
from emulator.spark.options import DaemonAccess, OptionError, bool_option, int_option, only_known
from emulator.spark.refusal import reader_or_refusal, refuse_now
from emulator.spark.shapes import FileOffset

log = logging.getLogger(__name__)

DEFAULT_PARTITION_BYTES = 32 << 20


class ConnectFileError(OptionError):
    """Bad options or an offset the source cannot resume from."""


def connect_position(offset: Mapping[str, Any] | None) -> int:
    """What FileStreamSourceTask resumes from for a stored offset (its type rules included)."""
    if offset is None:
        return 0
    value = offset.get("position")
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool):
        # FileStreamSourceTask: ConnectException("Offset position is the incorrect type")
        raise ConnectFileError(
            f"Offset position is the incorrect type: {value!r} ({type(value).__name__}); "
            "FileStreamSourceTask accepts only an integer (Long) position"
        )
    return value


@dataclass
class FileRange(InputPartition):
    """One executor's share of a batch: bytes ``[start, end)`` of ``path``."""

    path: str
    start: int
    end: int


def same_file(other: object, path: str) -> bool:
    """``other`` names the file ``path`` names, spelled differently (relative, ``//``, ``/./``, links)."""
    if not isinstance(other, str) or not other or other == path:
        return False
    try:
        if os.path.samefile(other, path):
            return True
    except OSError:  # either is missing: compare the resolved spellings
        pass
    return os.path.realpath(other) == os.path.realpath(path)


_SIMILAR_NAMES = 5
_SIMILAR_CUTOFF = 0.75
"""``difflib``'s ratio: one or two letters off in names of ten or more (``file-scr4`` for ``file-src4``)."""


def file_holders(listings: Mapping[str, list[Any]], path: str) -> list[tuple[str, str, Any]]:
    """``(connector, filename, offset)`` for each connector's row (its GET listing: partitions and
    the offsets Connect's reader sees for them) that holds an offset for partition
    ``{"filename": path}``, or for the same file spelled differently (``same_file``); sorted by
    connector and filename."""
    found: list[tuple[str, str, Any]] = []
    for connector, rows in listings.items():
        for row in rows:
            if not isinstance(row, dict):
                continue
            partition, offset = row.get("partition"), row.get("offset")
            if not isinstance(partition, dict) or set(partition) != {"filename"} or offset is None:
                continue
            filename = partition["filename"]
            if isinstance(filename, str) and (filename == path or same_file(filename, path)):
                found.append((connector, filename, offset))
    return sorted(found, key=lambda item: (item[0], item[1]))


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class ConnectFileStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str]) -> None:
        only_known(
            options,
            "connect-file",
            ("connector", "file", "maxLinesPerTrigger", "partitionBytes", "commitOffsets", "claimEpoch"),
        )
        self.daemon = DaemonAccess.of(options)
        connector, path = options.get("connector"), options.get("file")
        if not connector:
            raise ConnectFileError("option 'connector' is required: the Connect connector whose offsets are shared")
        if not path:
            raise ConnectFileError("option 'file' is required: the connector's 'file' setting, verbatim")
        self.connector, self.file = connector, path
        self.max_lines = int_option(options, "maxLinesPerTrigger", None, 1)
        self.partition_bytes = int_option(options, "partitionBytes", DEFAULT_PARTITION_BYTES, 1) or 1
        self.commit_offsets = bool_option(options, "commitOffsets", True)
        self.claim_epoch = int_option(options, "claimEpoch", None, 0)  # the job's claim on the connector, if any
        self._target: int | None = None
        self._resume_checked = False  # initialOffset (a new checkpoint) sets it: nothing to compare
        self._shorter_than: int | None = None  # the file size last warned about (-1: missing)

    # -- offsets (driver) ---------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        """The connector's committed position in the daemon, resumed as Connect resumes it (0 if none)."""
        try:
            with self.daemon.offsets() as daemon:
                rows = daemon.offsets(self.connector) or []
        except ClientError as exc:
            raise ConnectFileError(
                f"cannot read connector {self.connector}'s offsets from the daemon at {self.daemon.url}: {exc}"
            ) from exc
        stored: dict[str, Any] | None = None
        for row in rows:
            if not isinstance(row, dict):
                continue
            partition, offset = row.get("partition"), row.get("offset")
            if partition == {"filename": self.file}:
                stored = offset if isinstance(offset, dict) else None
            elif isinstance(partition, dict) and same_file(partition.get("filename"), self.file):
                log.warning(
                    "connect-file %s: the connector has an offset %s for filename %r, the same file as option "
                    "file %r spelled differently; the partition is the filename verbatim (as Connect's "
                    "FileStreamSourceTask uses its 'file' setting), so this query does not resume from that "
                    "offset. Give option file exactly as the connector's 'file' setting spells it",
                    self.connector,
                    offset,
                    partition.get("filename"),
                    self.file,
                )
        if stored is None:
            self._warn_other_holders()
        position = connect_position(stored)
        log.info("connect-file %s: starting at Connect position %d of %s", self.connector, position, self.file)
        self._resume_checked = True
        return FileOffset(self.connector, self.file, Cursor.from_connect(position)).spark()

    def _warn_other_holders(self) -> None:
        """A fresh query whose connector has no offset for the file reads it from the beginning; when
        connectors of a similar name hold an offset for this file (a misspelt option connector?), that
        is said once, naming them. Starting a new connector on a file is legitimate: nothing is
        refused. Only similar names are read, through the same GET a task's reader answers, so the check
        costs a few connectors' listings and needs no admin token."""
        listings: dict[str, list[Any]] = {}
        try:
            with self.daemon.offsets() as daemon:
                names = [name for name in daemon.client.connectors() if name != self.connector]
                similar = difflib.get_close_matches(self.connector, names, n=_SIMILAR_NAMES, cutoff=_SIMILAR_CUTOFF)
                for name in similar:  # each one's GET: what its tasks read, and a token's read grant is enough
                    try:
                        listings[name] = daemon.offsets(name) or []
                    except ClientError as exc:  # e.g. a token that may not read that connector
                        log.info(
                            "connect-file %s: could not read connector %s's offsets: %s", self.connector, name, exc
                        )
        except ClientError as exc:
            log.info(
                "connect-file %s: could not look for other connectors' offsets for %s: %s",
                self.connector,
                self.file,
                exc,
            )
            return
        holders = file_holders(listings, self.file)
        if not holders:
            return
        log.warning(
            "connect-file %s: the connector has no offset for file %r, so this query reads it from the beginning; "
            "but %s: is option connector misspelt? To continue where one of them stopped, give its name as option "
            "connector (and file as it spells it); to start a new connector on this file, carry on",
            self.connector,
            self.file,
            "; ".join(
                f"connector {name!r} holds {_json(offset)} for "
                + ("this file" if filename == self.file else f"the same file spelled {filename!r}")
                for name, filename, offset in holders
            ),
        )

    def _check_resume(self, cursor: Cursor) -> None:
        """A query resumed from its checkpoint starts there, as Spark resumes every source, whatever the
        connector's offset says now; when the two differ, what that costs is said once, with what to
        do, instead of without a word: the connector ahead (Connect ran, or someone altered it) means
        lines read again; behind or missing (a rewind or reset since) means the operator's change is
        ignored and overwritten by the query's next commit."""
        self._resume_checked = True
        try:
            with self.daemon.offsets() as daemon:
                stored = daemon.find(self.connector, {"filename": self.file})
        except ClientError as exc:
            log.info(
                "connect-file %s: could not compare the checkpoint with the connector's offset: %s", self.connector, exc
            )
            return
        position = connect_position(stored)
        if position > cursor.position:
            log.warning(
                "connect-file %s: the connector's offset moved ahead to position %d, past this checkpoint's %d: "
                "Connect processed lines since, or someone altered the offset; this query reads the lines in "
                "between again (Spark resumes from its checkpoint). To continue from the connector's offset "
                "instead, start the query with a new checkpoint location",
                self.connector,
                position,
                cursor.position,
            )
        elif cursor.position > 0 and (stored is None or position < cursor.position):
            log.warning(
                "connect-file %s: this checkpoint is at position %d, but the connector's offset is %s: it was "
                "rewound or reset since (connect-offsets alter or reset, a PATCH or DELETE), or this query's last "
                "batches were never published (no OffsetCommitListener). The checkpoint wins: Spark resumes from "
                "it, not from the connector's offset, and the query's next commit overwrites the operator's "
                "change. To honour the rewind or reset, start the query with a new checkpoint location: it starts "
                "from the connector's offset (the beginning of the file when there is none)",
                self.connector,
                cursor.position,
                "missing" if stored is None else f"at position {position}, behind it",
            )

    def _check_length(self, cursor: Cursor) -> None:
        """A file shorter than where the query is (truncated, or replaced by a shorter one) yields
        nothing until it grows past that point, as Connect's FileStreamSourceTask, which seeks there:
        said once per size, since the lines written meanwhile are never read."""
        try:
            size = os.path.getsize(self.file)
        except OSError as exc:
            if self._shorter_than != -1:
                self._shorter_than = -1
                log.warning(
                    "connect-file %s: cannot read %s (%s); nothing is read until it can be (as Connect's "
                    "FileStreamSource waits for it)",
                    self.connector,
                    self.file,
                    exc.strerror or exc,
                )
            return
        if size < cursor.byte_offset and size != self._shorter_than:
            self._shorter_than = size
            log.warning(
                "connect-file %s: %s has %d bytes, fewer than the %d this query has read: truncated or replaced? "
                "Nothing is read until it grows past that point (as Connect's FileStreamSource does)",
                self.connector,
                self.file,
                size,
                cursor.byte_offset,
            )

    def _cursor(self, offset: Mapping[str, Any]) -> Cursor:
        parsed = FileOffset.parse(dict(offset))
        if parsed is None:
            raise ConnectFileError(f"not a connect-file offset: {dict(offset)!r}")
        mismatch = self._other_checkpoint(parsed)
        if mismatch:
            raise ConnectFileError(mismatch)
        return parsed.cursor

    def _other_checkpoint(self, parsed: FileOffset) -> str | None:
        """Why an offset from the checkpoint is not this query's (another connector or another file),
        or ``None``. Resuming it would read from another query's position and commit that position
        to this connector (creating it at a position it never read up to)."""
        if parsed.connector != self.connector:
            return (
                f"the checkpoint is for connector {parsed.connector!r}, but option connector is "
                f"{self.connector!r}; use a new checkpoint location for another connector"
            )
        if parsed.filename != self.file:
            return (
                f"the checkpoint is for file {parsed.filename!r}, but option file is {self.file!r}; "
                "use a new checkpoint location for another file"
            )
        return None

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_lines) if self.max_lines else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        try:
            self._target = os.path.getsize(self.file)
        except OSError:
            self._target = 0

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        cursor = self._cursor(start)
        if not self._resume_checked:
            self._check_resume(cursor)
        self._check_length(cursor)
        max_lines = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else None
        found = scan(self.file, cursor, max_lines, self._target, count_lines=min_rows is not None)
        if found.end == cursor or (min_rows is not None and (found.lines or 0) < min_rows):
            return start  # the very same dict: Spark sees "no new data" by string equality
        return FileOffset(self.connector, self.file, found.end).spark()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        if not self._resume_checked:
            # A restart replaying the batch a stop or crash cut off starts here: its start is where the
            # checkpoint's last committed batch ended, which is what the connector holds; its end is
            # not published yet (the replayed batch's own commit comes after it).
            self._check_resume(self._cursor(start))
        first, last = self._cursor(start).byte_offset, self._cursor(end).byte_offset
        if last <= first:
            return []
        pieces = max(1, -(-(last - first) // self.partition_bytes))
        return [FileRange(self.file, a, b) for a, b in split_at_lines(self.file, first, last, pieces)]

    def commit(self, end: dict[str, Any]) -> None:
        """Best effort (one batch late, may repeat): handed to a background thread (``background``)
        so the next batch is not delayed; monotonic and idempotent; failures are logged."""
        if not self.commit_offsets:
            return
        parsed = FileOffset.parse(dict(end))
        if parsed is None:
            log.warning("connect-file %s: not committing an unknown offset %r", self.connector, end)
            return
        mismatch = self._other_checkpoint(parsed)
        if mismatch:  # a restart may repeat the checkpoint's last commit before latestOffset refuses it
            log.warning("connect-file %s: not committing %r: %s", self.connector, end, mismatch)
            return
        entry = parsed.connect_entry()
        committer = committer_for(
            self.daemon.url, self.connector, self.daemon.credentials, claim_epoch=self.claim_epoch
        )
        committer.submit([entry])

    # -- data (executors) ---------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Arrow batches of about 4 MiB, built without a Python object per line (``arrow_lines``)."""
        import pyarrow as pa

        from emulator.spark.arrow_lines import lines_array

        assert isinstance(partition, FileRange)
        for piece in iter_chunks(partition.path, partition.start, partition.end):
            column = lines_array(piece)
            if len(column):
                yield pa.RecordBatch.from_arrays([column], names=["value"])


class ConnectFileDataSource(DataSource):
    """``spark.readStream.format("connect-file")``: see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return "connect-file"

    def schema(self) -> str:
        """Checks the options first: PySpark asks for the schema at ``load()`` (unless one is given),
        and makes the stream reader only for the first batch (``emulator.spark.refusal``)."""
        refuse_now(lambda: ConnectFileStreamReader(self.options))
        return "value string"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return reader_or_refusal(lambda: ConnectFileStreamReader(self.options))
