"""Reading the archive: rows for programs (the Spark batch source), changes for people, past states.

Everything here reads files only, so it works inside the daemon (through ``HistoryArchive``, which
hands over a consistent set of open files and waits for queued records first) and outside it, on a
copied or read-only archive directory.

Time. A row's time is its log record's timestamp (what Connect's producer stamped), or when the
archiver received it for records without one. ``as_of(T)`` is the state after applying, in log
order, every archived record whose time is <= T. A topic deleted and re-created starts a new
*epoch*; the state at T is the one of the newest epoch that has records at or before T, because
the re-creation wiped the older state.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NotRequired, TypedDict, cast

from emulator.codec.key_forms import key_form, shown_variant
from emulator.codec.keys import KeyProblem, ParsedKey, logical_id, parse_key, read_back_id
from emulator.codec.readable import UnreadableOffset, looked_up, offset_as_read
from emulator.codec.surrogates import printable
from emulator.codec.values import CodecError, parse_offset
from emulator.history.archive import HistoryArchive
from emulator.history.directory import log_slug, read_marker
from emulator.history.files import (
    ArchiveFile,
    BlockSummary,
    Deferred,
    ReadReport,
    SkipBlock,
    iter_file,
    read_deferred,
    read_metadata,
    scan_dir,
)
from emulator.history.rows import ArchiveRow, HistoryRow, record_time
from emulator.model.errors import ConnectorNotFound, InvalidRequest
from emulator.model.offsets import ConnectorOffset
from emulator.model.times import format_time_ms

DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000


class HistoryUnavailable(InvalidRequest):
    """The requested time lies before what the archive can reconstruct exactly."""

    kind = "history_unavailable"


# --- locating an archive ------------------------------------------------------------------------


def list_logs(history_dir: str | Path) -> list[dict[str, str]]:
    """Every log archived under ``history_dir``: ``[{"log": description, "archive": identity,
    "directory": path}]``, ``log`` as the archive's writer last saw the log (an earlier version's
    archive: ``archive`` is that description too)."""
    root = Path(history_dir)
    found = []
    for child in sorted(root.iterdir()) if root.is_dir() else []:
        marker = read_marker(child)
        if marker is not None:
            description = str(marker["log"])
            identity = str(marker.get("archive", description))
            found.append({"log": description, "archive": identity, "directory": str(child)})
    return found


def log_directory(history_dir: str | Path, log: str | None = None) -> Path:
    """The archive directory of ``log``: its ``archive_identity``, or its ``description`` now or at any
    earlier time its archive's writer saw (the form earlier versions named directories by); with
    ``None``, the only one there."""
    root = Path(history_dir)
    if log is not None:
        named = root / log_slug(log)
        if named.is_dir():
            return named
        for child in sorted(root.iterdir()) if root.is_dir() else []:
            marker = read_marker(child)
            if marker is not None and log in (marker["log"], marker.get("archive"), *marker.get("earlier", [])):
                return child
        return named
    logs = list_logs(root)
    if len(logs) != 1:
        names = ", ".join(entry["log"] for entry in logs) or "none"
        raise ValueError(f"{root} holds the history of {len(logs)} logs ({names}); name one with log=")
    return Path(logs[0]["directory"])


# --- rows ---------------------------------------------------------------------------------------


@dataclass
class HistoryReader:
    """One pass over one log's archive, in archive order (per Kafka partition: log order).

    ``report`` collects damaged files (skipped from the damage on, counted, never raised);
    ``horizon_ms`` is set when retention folded older files: before it only the latest record of
    each key survives.
    """

    directory: Path
    archive: HistoryArchive | None = None
    sync_timeout_s: float = 30.0
    report: ReadReport = field(default_factory=ReadReport)
    horizon_ms: int | None = None
    synced: bool | None = None
    unsynced_because: str | None = None
    """Why the archive may lag behind (a write it keeps retrying, archiving stopped), when known."""
    _kept: list[IO[bytes]] = field(default_factory=list, init=False, repr=False)
    min_ms: int | None = None
    max_ms: int | None = None
    """Closed files whose records all lie outside ``[min_ms, max_ms]`` (by the times in their names)
    are not opened; rows are not filtered here."""

    def rows(self, skip: SkipBlock | None = None, later: list[Deferred] | None = None) -> Iterator[HistoryRow]:
        """Archive rows (every schema field, raw bytes) plus ``time_ms``, oldest first; without the
        rows of blocks ``skip`` passes over, nor of those deferred to ``later`` (``files.iter_file``:
        their files stay open until ``close``)."""
        for file, handle in self._open():
            with handle if later is None else contextlib.nullcontext(handle):
                if later is not None:
                    self._kept.append(handle)
                for archived in iter_file(file, self.report, handle=handle, skip=skip, later=later):
                    yield _completed(archived)

    def deferred_rows(self, block: Deferred) -> list[HistoryRow] | None:
        """The rows of a block ``rows`` deferred; None if they cannot be read as they were then."""
        records = read_deferred(block, self.report)
        return None if records is None else [_completed(r) for r in records]

    def close(self) -> None:
        """Close the files ``rows`` left open for deferred blocks."""
        for handle in self._kept:
            handle.close()
        self._kept.clear()

    def _open(self) -> list[tuple[ArchiveFile, IO[bytes]]]:
        if self.archive is not None and (self.archive.writable or self.archive.read_only):
            self.synced = self.archive.sync(self.sync_timeout_s)
            if not self.synced:
                self.unsynced_because = self.archive.behind_because()
            opened = self.archive.snapshot_files() if self.archive.writable else _open_files(self.directory)
        else:
            opened = _open_files(self.directory)
        kept = []
        for file, handle in opened:
            if file.kind == "closed" and not self._overlaps(file):
                handle.close()
            else:
                kept.append((file, handle))
        opened = kept
        for file, _ in opened:
            if file.kind == "base":
                horizon = int(read_metadata(file.path).get("horizon_ms", "-1"))
                self.horizon_ms = horizon if horizon >= 0 else None
        return opened

    def _overlaps(self, file: ArchiveFile) -> bool:
        if file.min_time is None or file.max_time is None:
            return True
        if self.max_ms is not None and file.min_time > self.max_ms:
            return False
        return not (self.min_ms is not None and file.max_time < self.min_ms)


def _completed(archived: ArchiveRow) -> HistoryRow:
    row = cast(HistoryRow, archived)  # completed in place: a copy per row would cost
    row["time_ms"] = record_time(archived)
    return row


def _open_files(directory: Path) -> list[tuple[ArchiveFile, IO[bytes]]]:
    """Open a directory's files; a rename by a live writer in between makes us list again."""
    for _ in range(5):
        base, live, _ = scan_dir(directory)
        opened: list[tuple[ArchiveFile, IO[bytes]]] = []
        try:
            for f in ([base] if base else []) + live:
                opened.append((f, f.path.open("rb")))
            return opened
        except FileNotFoundError:
            for _, handle in opened:
                handle.close()
    raise OSError(f"{directory} keeps changing while being listed; try again")


def read_history(
    history_dir: str | Path,
    log: str | None = None,
    *,
    connector: str | None = None,
    partition: Mapping[str, Any] | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
    report: ReadReport | None = None,
) -> Iterator[HistoryRow]:
    """The archive as rows, oldest first: the Python API the Spark batch source wraps.

    Each row is a dict with the Avro fields of ``schemas/history-record.avsc`` (``key``/``value`` raw
    bytes, ``value`` None for a tombstone) plus ``time_ms``. Filters are optional: ``connector``
    (exact name; one holding half a surrogate pair too, though its rows' ``connector`` field holds
    the name's backslash escape, as Avro's UTF-8 strings can hold no lone surrogate), ``partition``
    (a partition map, matched as Java's ``Map.equals`` does, so key order and byte-level spelling do
    not matter, on the map as Connect reads it back: ``-0.0`` is ``0.0``),
    ``from_ms``/``to_ms`` (inclusive, on ``time_ms``). Pass a ``ReadReport`` to learn about damaged
    files, which are skipped, never raised. Reads files only: safe on a live archive (another
    process's file being written may end early) or a copy.
    """
    reader = HistoryReader(log_directory(history_dir, log), report=report or ReadReport(), min_ms=from_ms, max_ms=to_ms)
    lid = read_back_id(partition) if partition is not None else None
    stored = "" if connector is None else printable(connector)
    for row in reader.rows(_outside(connector, from_ms, to_ms)):
        if connector is not None and not of_connector(row, connector, stored):
            continue
        if _matches(row, lid, from_ms, to_ms):
            yield row


def _outside(connector: str | None, from_ms: int | None, to_ms: int | None) -> SkipBlock:
    """A block without rows of ``connector`` (any, for None) within ``[from_ms, to_ms]``."""

    stored = None if connector is None else printable(connector)

    def skip(block: BlockSummary) -> bool:
        return (
            (stored is not None and stored not in block.connectors)
            or (from_ms is not None and block.max_time < from_ms)
            or (to_ms is not None and block.min_time > to_ms)
        )

    return skip


def _matches(row: HistoryRow, lid: str | None, from_ms: int | None, to_ms: int | None) -> bool:
    t = row["time_ms"]
    if (from_ms is not None and t < from_ms) or (to_ms is not None and t > to_ms):
        return False
    if lid is not None:
        parsed = _parsed(row)
        if parsed is None or logical_id(parsed.partition) != lid:
            return False
    return True


def of_connector(row: HistoryRow, connector: str, stored: str) -> bool:
    """Whether ``row`` is a record of ``connector`` (``stored``: ``printable(connector)``, the name as
    the archive holds it). A name holding half a surrogate pair is archived as its backslash escape
    (Avro strings are UTF-8: ``avro_rows``), which is also how another name spells it literally
    (``half\\ud800`` with a backslash): where the stored name holds a backslash, the row's key, which
    carries the name as Connect wrote it, decides. Else a request naming one connector read, and a
    rollback wrote, the other's records."""
    name = row["connector"]
    if name != stored:
        return False
    if "\\" not in name:
        return True
    parsed = _parsed(row)
    return parsed is not None and parsed.connector == connector


def _parsed(row: HistoryRow) -> ParsedKey | None:
    parsed = parse_key(row["key"])
    return None if isinstance(parsed, KeyProblem) else parsed


# --- changes for people -------------------------------------------------------------------------


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="backslashreplace")


class Change(TypedDict):
    """One archived record as the history route shows it (``key``/``value`` as text)."""

    time: str
    time_ms: int
    epoch: int
    kafka_partition: int
    kafka_offset: int
    origin: str
    operation: str | None
    principal: str | None
    """Who made the request that wrote it (daemon writes; None for external records and old files)."""
    remote: str | None
    """The client's address (host:port) as the daemon saw it (daemon writes made over HTTP)."""
    partition: dict[str, Any] | None
    offset: Any
    key: str | None
    value: str | None
    record_timestamp_ms: int
    archived_at_ms: int
    request_connector: NotRequired[str]
    """Only when the request that wrote it named another connector than the key does."""
    value_problem: NotRequired[str]
    """Only when the value is not an offset Connect could read."""


def change_view(row: HistoryRow) -> Change:
    """One archived record as the history route shows it."""
    parsed = _parsed(row)
    out: Change = {
        "time": format_time_ms(row["time_ms"]),
        "time_ms": row["time_ms"],
        "epoch": row["epoch"],
        "kafka_partition": row["kafka_partition"],
        "kafka_offset": row["kafka_offset"],
        "origin": row["origin"],
        "operation": row["operation"],
        "principal": row["principal"],
        "remote": row["remote"],
        "partition": parsed.partition if parsed is not None else None,
        "offset": None,
        "key": _text(row["key"]),
        "value": _text(row["value"]),
        "record_timestamp_ms": row["record_timestamp_ms"],
        "archived_at_ms": row["archived_at_ms"],
    }
    if row["request_connector"] is not None and row["request_connector"] != row["connector"]:
        out["request_connector"] = row["request_connector"]
    if row["value"] is not None:
        try:
            out["offset"] = parse_offset(row["value"])
        except CodecError as exc:
            out["value_problem"] = str(exc)
    return out


def behind_warning(synced: bool | None, because: str | None) -> str | None:
    """What an answer from an archive that may lag this daemon's writes says (``HistoryReader.synced``)."""
    if synced is not False:
        return None
    return "the archive may lack this daemon's latest writes: " + (
        because or "the log's reader or the archiver did not confirm them in time"
    )


def not_in_history(
    message: str, synced: bool | None, because: str | None, report: ReadReport | None = None
) -> ConnectorNotFound:
    """404 for a connector the archive holds nothing of; while the archive may lag this daemon's
    writes (its archiver stalled or behind), the message says so and the error carries the warning
    the history's answers carry (``X-Offsets-History-Warning``): its records may not be archived yet.
    With ``report``, files the read could not read whole are named too (``unread_files_said``)."""
    warning = behind_warning(synced, because)
    if warning is None:
        error = ConnectorNotFound(message)
    else:
        error = ConnectorNotFound(f"{message}; but {warning}, so its records may not be archived yet")
        error.history_warning = warning
    return error if report is None else unread_files_said(error, report)


_NOT_FOUND = " not found in the offsets history"


def unread_files_said(error: ConnectorNotFound, report: ReadReport) -> ConnectorNotFound:
    """``error`` (a ``not_in_history`` 404) from a read that could not read every archive file whole
    (a file of a newer format, a damaged block): the connector's records may be in what was not read,
    so the 404 does not claim it absent from the history but from what could be read of it, names
    each such file with its problem, and its ``X-Offsets-History-Warning`` says UNRELIABLE as an
    ``as_of`` answer from such an archive does. ``error`` itself when every file was read whole."""
    if not report.damaged:
        return error
    count = report.damaged_file_count()
    message = error.message.replace(_NOT_FOUND, " not found in what could be read of the offsets history", 1)
    listed = "; ".join(f"{Path(d['file']).name}: {d['problem']}" for d in report.damaged)
    said = ConnectorNotFound(
        f"{message}; {count} archive file(s) could not be read whole, so it may have records in them and is not "
        f"known to be absent: {listed}"
    )
    unreliable = (
        f"UNRELIABLE: {count} history archive file(s) could not be read whole (the 404's message names them), "
        "so the connector may have records in them"
    )
    said.history_warning = unreliable if error.history_warning is None else f"{unreliable}; {error.history_warning}"
    return said


Place = tuple[int, int, int, int]
"""Where a change sorts, newest last: its time, then its epoch, Kafka partition and offset (log order
within a partition at equal times). One record of the log has one place; the archive holds it once,
except after an operator put archive files back beside the ones that replaced them (a rollback's
directory renamed back, a file restored from a backup), where it may hold one record twice."""


def _place(row: HistoryRow) -> Place:
    return (row["time_ms"], row["epoch"], row["kafka_partition"], row["kafka_offset"])


def cursor(place: Place) -> str:
    """The ``before`` of the page after one ending at ``place``."""
    return ".".join(str(n) for n in place)


def parse_cursor(text: str) -> Place:
    """A page's ``next`` given back as ``before``; ``InvalidRequest`` for anything else."""
    parts = text.split(".")
    if len(parts) != 4 or not all(p.isdigit() and p.isascii() for p in parts):
        raise InvalidRequest(f"before must be the 'next' of a history page (four numbers joined by '.'), got {text!r}")
    time_ms, epoch, partition, offset = (int(p) for p in parts)
    return (time_ms, epoch, partition, offset)


@dataclass
class HistoryPage:
    changes: list[Change]
    truncated: bool
    report: ReadReport
    synced: bool | None
    unsynced_because: str | None = None
    next: str | None = None
    """With ``truncated``: the ``before`` that asks for the next (older) page."""

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"order": "newest_first", "changes": self.changes, "truncated": self.truncated}
        if self.next is not None:
            body["next"] = self.next
        body["damaged_files"] = self.report.damaged
        warning = behind_warning(self.synced, self.unsynced_because)
        if warning is not None:
            body["warning"] = warning
        return body


def connector_history(
    reader: HistoryReader,
    connector: str,
    *,
    partition: Mapping[str, Any] | None = None,
    from_ms: int | None = None,
    to_ms: int | None = None,
    limit: int = DEFAULT_LIMIT,
    before: Place | None = None,
) -> HistoryPage:
    """A connector's changes, **newest first** by time (the question is usually "what changed
    lately"; equal times: newest epoch, then Kafka partition and offset, highest first, so the
    reverse of log order within a partition), at most ``limit`` of them; ``truncated`` says older
    ones exist, and ``next`` is the ``before`` of the page after: the changes sorting below it. A
    PATCH's records share one time, so times alone cannot page past a large one."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    lid = read_back_id(partition) if partition is not None else None
    newest: list[Place] = []  # a min-heap of the page's places
    placed: dict[Place, HistoryRow] = {}  # each place's row: one per record, though archived twice
    seen = 0
    known = False
    outside = _outside(connector, from_ms, to_ms)  # with a time range, "known" is not needed
    stored = printable(connector)

    def full_before(max_time: int) -> bool:
        """The page is full and known to be truncated, and rows all at or before ``max_time`` sort
        below its oldest change: they cannot change it."""
        return seen > limit and max_time < newest[0][0]

    def skip(block: BlockSummary) -> bool:
        return (
            outside(block)
            or (before is not None and block.min_time > before[0])  # every row sorts at or after ``before``
            or full_before(block.max_time)
        )

    def take(row: HistoryRow) -> None:
        nonlocal seen, known
        if not of_connector(row, connector, stored):
            return
        known = True
        if _matches(row, lid, from_ms, to_ms):
            place = _place(row)
            if before is not None and place >= before:
                return
            twice = placed.get(place)
            if twice is not None:  # one record archived twice: listed once, with who made it if known
                if twice["origin"] == "external" and row["origin"] != "external":
                    placed[place] = row
                return
            seen += 1
            if len(newest) < limit:
                heapq.heappush(newest, place)
                placed[place] = row
            elif place > newest[0]:
                del placed[heapq.heapreplace(newest, place)]
                placed[place] = row

    # Blocks decoded before (summarised) are read last, newest first, until the page is full and no
    # block left can hold a row sorting after its oldest change; blocks never decoded are read in
    # archive order on the way (and summarised for the next page).
    later: list[Deferred] = []
    try:
        for row in reader.rows(skip, later):
            take(row)
        later.sort(key=lambda block: block.summary.max_time, reverse=True)
        for block in later:
            if full_before(block.summary.max_time):
                break
            rows = reader.deferred_rows(block)
            if rows is None:  # the file changed under the query: read it all again, in archive order
                newest, seen, known = [], 0, False
                placed.clear()
                reader.report = ReadReport()
                reader.close()
                for row in reader.rows(skip):
                    take(row)
                break
            for row in rows:
                take(row)
    finally:
        reader.close()
    if not known and from_ms is None and to_ms is None:
        # With a time range, files outside it are not read, so "no rows" cannot mean "unknown".
        raise not_in_history(
            f"Connector {connector} not found in the offsets history (which holds source connectors' offsets; a sink "
            "connector's are its consumer group's: GET .../offsets?kind=sink)",
            reader.synced,
            reader.unsynced_because,
        )
    ordered = sorted(newest, reverse=True)
    truncated = seen > limit
    return HistoryPage(
        [change_view(placed[place]) for place in ordered],
        truncated,
        reader.report,
        reader.synced,
        reader.unsynced_because,
        cursor(ordered[-1]) if truncated and ordered else None,
    )


# --- past states --------------------------------------------------------------------------------


@dataclass
class PastState:
    """A connector's raw keys → the row that was current at ``at_ms`` (live keys only); ``known``
    says whether the connector had any record at or before ``at_ms``."""

    at_ms: int
    epoch: int | None
    rows: dict[bytes, HistoryRow]
    known: bool
    report: ReadReport
    synced: bool | None = None
    """False: the archive may lack this daemon's latest writes (``HistoryReader.synced``)."""
    unsynced_because: str | None = None

    def warning(self) -> str | None:
        return behind_warning(self.synced, self.unsynced_because)

    def offsets(self) -> list[ConnectorOffset]:
        """Connect's GET shape, by the live GET's rules: where several keys denote one partition, the
        value shown is the one ``shown_variant`` picks (Connect's own form first), a partition Connect's
        reader never looks up (``looked_up``) is left out, and what it gives no offset for
        (``offset_as_read``) shows ``null``."""
        by_partition: dict[str, list[tuple[dict[str, Any], HistoryRow]]] = {}
        for row in self.rows.values():  # in write order
            parsed = _parsed(row)
            assert parsed is not None
            lid = logical_id(parsed.partition)
            by_partition.setdefault(lid, []).append((parsed.partition, row))
        result = []
        for variants in by_partition.values():
            if not looked_up(variants[-1][0]):  # left out, as the live GET leaves it out (docs/api.md)
                continue
            chosen = shown_variant([key_form(row["key"] or b"") for _, row in variants])  # live rows are keyed
            if chosen is None:
                result.append(ConnectorOffset(partition=variants[-1][0], offset=None))
                continue
            partition, row = variants[chosen]
            try:
                offset = offset_as_read(partition, row["value"])  # the live GET's rule (docs/api.md)
            except UnreadableOffset:
                offset = None
            result.append(ConnectorOffset(partition=partition, offset=offset))
        return result


def state_as_of(reader: HistoryReader, connector: str, at_ms: int, epoch: int | None = None) -> PastState:
    """Rebuild the connector's raw state at ``at_ms`` from the archive.

    The epoch is the log's newest with records at or before ``at_ms``, whoever wrote them: a
    connector without a record in it was wiped by the re-creation, even if it had some before.
    ``epoch`` reads that epoch alone instead: the way to an earlier epoch's state once a newer one
    holds records of the same times (a log that lost writes, or was restored from an older copy, is
    archived again in a new epoch from its first record, with the records' own times)."""
    states: dict[int, dict[bytes, HistoryRow]] = {}
    known = False
    log_epoch: int | None = None
    stored = printable(connector)

    def skip(block: BlockSummary) -> bool:
        """A block without the connector's rows by then: only its epochs count (the log's epoch)."""
        nonlocal log_epoch
        if stored in block.connectors and block.min_time <= at_ms:
            return False
        for e, earliest in block.epochs:
            if earliest <= at_ms and (epoch is None or e == epoch) and (log_epoch is None or e > log_epoch):
                log_epoch = e
        return True

    for row in reader.rows(skip):
        if row["time_ms"] > at_ms or (epoch is not None and row["epoch"] != epoch):
            continue
        if log_epoch is None or row["epoch"] > log_epoch:
            log_epoch = row["epoch"]
        if not of_connector(row, connector, stored):
            continue
        known = True
        state = states.setdefault(row["epoch"], {})
        key = row["key"]
        assert key is not None  # the row names a connector, so its key parsed
        state.pop(key, None)  # re-inserted below: dict order is write order
        if row["value"] is not None:
            state[key] = row
    if reader.horizon_ms is not None and at_ms < reader.horizon_ms:
        raise HistoryUnavailable(
            f"the history before {format_time_ms(reader.horizon_ms)} was compacted by the retention setting "
            f"(--history-retention): only times from then on can be reconstructed exactly, not "
            f"{format_time_ms(at_ms)}"
        )
    chosen = log_epoch if states else None
    rows = states.get(chosen, {}) if chosen is not None else {}
    return PastState(at_ms, chosen, rows, known, reader.report, reader.synced, reader.unsynced_because)
