"""Moving offsets between stores and files, byte for byte: export, import, migrate.

A transfer reads every record of its source into the neutral model (``formats.model.RawRecord``),
filters it, plans the change at the destination as a diff, and writes exactly the records the diff
marks as changes (``--dry-run`` stops after the plan). Reading happens completely before anything
is written, so a damaged source imports nothing.

Locations (``parse_location``):

=============================  ===================================================================
``kafka://HOST:PORT/TOPIC``    an offsets topic: read to end like Connect; written with murmur2
                               placement over the topic's *current* partition count
``embedded:PATH``              an embedded log: ``PATH`` is a data directory (log ``connect-offsets``)
                               or a ``*.sqlite3`` file
``http://…`` / ``https://…``   a running daemon: ``GET``/``POST /offsets/records`` (STOPPED rule,
                               read-your-writes, the daemon's own diff)
``standalone:PATH``            Connect's standalone offsets file; written by *merging* into it
``cdc:PATH``                   Flink CDC / RisingWave states, JSON lines (see ``formats.cdc_state``)
``kip875:PATH``                KIP-875 bodies per connector (see ``formats.kip875``)
``snapshot:PATH``              an Avro snapshot (``schemas/snapshot.avsc``)
=============================  ===================================================================

A bare path is accepted by extension: ``.avro`` snapshot, ``.jsonl`` cdc, ``.json`` kip875,
``.offsets`` standalone. Document files (cdc, kip875, snapshot) are *replaced* by an export; the
two stores (logs, standalone files) are *updated*: records of other connectors stay.

Reading a log is a read-to-end into an ``OffsetView``, exactly as the daemon materializes it.
Writing to a log directly cannot check Connect's STOPPED rule (no cluster is consulted): a warning
says so; import through a daemon to have it enforced.
"""

from __future__ import annotations

import abc
import base64
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO
from urllib.parse import urlsplit

from emulator.formats import cdc_state, kip875, snapshot, standalone
from emulator.formats.atomic import atomic_write
from emulator.formats.diff import compute_diff
from emulator.formats.model import FormatError, KeyIndex, Loaded, RawRecord, latest_per_key
from emulator.logs.base import OffsetLog
from emulator.model.errors import LogReadError
from emulator.model.records import LogRecord
from emulator.view.offset_view import OffsetView

__all__ = [
    "Location",
    "LocationError",
    "Progress",
    "TransferOptions",
    "TransferReport",
    "parse_location",
    "transfer",
]

Malformed = Literal["refuse", "skip", "keep"]
PROGRESS_THRESHOLD = 10_000
"""Above this many records, long phases report progress on stderr."""
_WRITE_CHUNK = 10_000


class LocationError(ValueError):
    """A location string that names no usable place (bad syntax, missing source)."""


class TransferError(ValueError):
    """The transfer was refused before anything was written (e.g. keys Connect ignores)."""


class Progress:
    """Progress lines on stderr for long work, so a 1M-record migration does not look like a hang."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 2.0, enabled: bool = True) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._every_s = every_s
        self._enabled = enabled
        self._last = 0.0

    def report(self, what: str, done: int, total: int | None, force: bool = False) -> None:
        if not self._enabled or max(done, total or 0) <= PROGRESS_THRESHOLD:
            return
        now = time.monotonic()
        if not force and now - self._last < self._every_s:
            return
        self._last = now
        suffix = f"/{total}" if total is not None else ""
        print(f"{what}: {done}{suffix} records", file=self._stream, flush=True)

    def note(self, text: str) -> None:
        print(text, file=self._stream, flush=True)


@dataclass(frozen=True)
class TransferOptions:
    connectors: frozenset[str] = frozenset()
    """Only records of these connectors (empty: all). Keys Connect ignores belong to no connector."""
    malformed: Malformed = "refuse"
    """Records whose keys Connect ignores: refuse the transfer, skip them, or copy them as-is."""
    live_only: bool = False
    """Leave the source's tombstones out."""
    unwrap_envelopes: bool = False
    """Turn schema-envelope keys (Flink CDC, Debezium 1.x: ``{"schema":null,"payload":[…]}``) into
    Connect keys: the payload's exact bytes where the envelope is Jackson's."""
    prune: bool = False
    """Also delete destination records of the transferred connectors that the source lacks."""
    write_all: bool = False
    """Write records that change nothing too (default: only changes, so a re-run is a no-op)."""
    dry_run: bool = False
    partitions: int = 25
    """Partition count when a destination topic or embedded log has to be created."""
    replication_factor: int = -1
    kafka_config_from: dict[str, str] = field(default_factory=dict)
    kafka_config_to: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    """Connector (engine) name for bare CDC states or a bare KIP-875 body, which carry none."""
    risingwave: bool = False
    """CDC export: add RisingWave's ``"isHeartbeat":false``."""
    timeout_s: float = 300.0
    """Bound on reading a log to its end and on each write."""
    diff_limit: int | None = None
    """Entries listed per connector in the report's diff (counts are always complete); None: all."""


@dataclass(slots=True)
class TransferReport:
    source: str
    destination: str
    dry_run: bool
    read: int
    selected: int
    written: int
    diff: dict[str, Any]
    notes: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.source,
            "to": self.destination,
            "dry_run": self.dry_run,
            "read": self.read,
            "selected": self.selected,
            "written": self.written,
            "notes": self.notes,
            "diff": self.diff,
        }


@dataclass(slots=True)
class _Context:
    options: TransferOptions
    progress: Progress
    role: Literal["from", "to"] = "from"
    keys: KeyIndex = field(default_factory=KeyIndex)

    @property
    def kafka_config(self) -> dict[str, str]:
        return self.options.kafka_config_from if self.role == "from" else self.options.kafka_config_to


# --- locations ----------------------------------------------------------------------------------------


class Location(abc.ABC):
    kind: str
    store: bool = False
    """True for stores that a write updates (logs, standalone files, daemons); False for documents."""

    @property
    @abc.abstractmethod
    def description(self) -> str: ...

    @abc.abstractmethod
    def read(self, ctx: _Context) -> Loaded:
        """Every record, with the notes an operator should see."""

    @abc.abstractmethod
    def apply(self, incoming: list[RawRecord], ctx: _Context) -> tuple[dict[str, Any], int, list[str]]:
        """Plan (and unless dry run, write) ``incoming`` here: (diff as a dict, records written, notes)."""

    def current(self, ctx: _Context, connectors: Sequence[str]) -> list[RawRecord]:
        """The live records of ``connectors`` here (for ``--prune``); empty where nothing exists yet."""
        if not self.exists(ctx):
            return []
        wanted = set(connectors)
        return [r for r in self.read(ctx).records if ctx.keys.connector(r.key) in wanted]

    def exists(self, ctx: _Context) -> bool:
        return True


class _FileLocation(Location):
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def description(self) -> str:
        return f"{self.kind}:{self.path}"

    def _data(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            raise LocationError(f"{self.description}: no such file") from None
        except OSError as exc:
            raise LocationError(f"{self.description}: cannot read: {exc.strerror or exc}") from exc

    def _existing(self, ctx: _Context) -> Loaded | None:
        return self.read(ctx) if self.path.exists() else None

    def exists(self, ctx: _Context) -> bool:
        return self.path.exists()

    def _check_writable(self) -> None:
        parent = self.path.parent if str(self.path.parent) else Path(".")
        if not parent.is_dir():
            raise LocationError(f"{self.description}: directory {parent} does not exist")


class _DocumentLocation(_FileLocation):
    """A file an export replaces: the diff shows old content → new content."""

    def apply(self, incoming: list[RawRecord], ctx: _Context) -> tuple[dict[str, Any], int, list[str]]:
        self._check_writable()
        replaced: list[str] = []
        try:
            existing = self._existing(ctx)
        except FormatError as exc:  # an export may replace a damaged document; the diff then starts empty
            existing = None
            replaced.append(f"the existing {self.description} is unreadable and is replaced ({exc.detail})")
        old = {r.key: r.value for r in latest_per_key(existing.records).values()} if existing else {}
        latest = latest_per_key(incoming)
        dropped = [RawRecord(k, None) for k, v in old.items() if v is not None and k not in latest]
        diff = compute_diff(old.get, [*latest.values(), *dropped], ctx.keys)
        if ctx.options.dry_run:
            return diff.as_dict(ctx.options.diff_limit), 0, replaced
        data, notes = self.encode(list(latest.values()), ctx)
        atomic_write(self.path, data)
        return diff.as_dict(ctx.options.diff_limit), len(latest), [*replaced, *notes]

    @abc.abstractmethod
    def encode(self, records: list[RawRecord], ctx: _Context) -> tuple[bytes, list[str]]: ...


class StandaloneLocation(_FileLocation):
    kind = "standalone"
    store = True

    def read(self, ctx: _Context) -> Loaded:
        return standalone.loads(self._data(), source=str(self.path))

    def apply(self, incoming: list[RawRecord], ctx: _Context) -> tuple[dict[str, Any], int, list[str]]:
        self._check_writable()
        existing = self._existing(ctx)
        merged: dict[bytes, RawRecord] = latest_per_key(existing.records) if existing else {}
        diff = compute_diff(lambda k: r.value if (r := merged.get(k)) else None, incoming, ctx.keys)
        to_write = diff.records_to_write(ctx.options.write_all)
        if ctx.options.dry_run or (existing is not None and not to_write):
            return diff.as_dict(ctx.options.diff_limit), 0, []
        for record in to_write:
            merged[record.key] = record
        standalone.write_file(self.path, merged.values())
        notes = ["a standalone worker must be stopped while its offsets file is replaced"]
        return diff.as_dict(ctx.options.diff_limit), len(to_write), notes


class CdcLocation(_DocumentLocation):
    kind = "cdc"

    def read(self, ctx: _Context) -> Loaded:
        return cdc_state.loads_file(self._data(), default_connector=ctx.options.name, source=str(self.path))

    def encode(self, records: list[RawRecord], ctx: _Context) -> tuple[bytes, list[str]]:
        return cdc_state.dumps_file(records, risingwave=ctx.options.risingwave)


class Kip875Location(_DocumentLocation):
    kind = "kip875"

    def read(self, ctx: _Context) -> Loaded:
        return kip875.loads_file(self._data(), default_connector=ctx.options.name, source=str(self.path))

    def encode(self, records: list[RawRecord], ctx: _Context) -> tuple[bytes, list[str]]:
        return kip875.dumps_file(records)


class SnapshotLocation(_DocumentLocation):
    kind = "snapshot"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.source_description = "unknown"

    def read(self, ctx: _Context) -> Loaded:
        loaded, info = snapshot.loads(self._data(), source=str(self.path))
        if info.source:
            taken = (
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(info.taken_at_ms / 1000))
                if info.taken_at_ms is not None
                else "an unknown time"
            )
            loaded.notes.append(f"snapshot of {info.source} taken at {taken}, {info.records} record(s)")
        return loaded

    def encode(self, records: list[RawRecord], ctx: _Context) -> tuple[bytes, list[str]]:
        return snapshot.dumps(records, source=self.source_description), []


class _LogLocation(Location):
    store = True

    @abc.abstractmethod
    def exists(self, ctx: _Context) -> bool: ...

    @abc.abstractmethod
    def make_log(self, ctx: _Context) -> OffsetLog: ...

    def read(self, ctx: _Context) -> Loaded:
        if not self.exists(ctx):
            raise LocationError(f"{self.description} does not exist")
        log = self.make_log(ctx)
        try:
            log.open()
            view = _read_to_end(log, ctx)
        finally:
            log.close()
        return _view_records(view)

    def apply(self, incoming: list[RawRecord], ctx: _Context) -> tuple[dict[str, Any], int, list[str]]:
        if ctx.options.dry_run and not self.exists(ctx):
            diff = compute_diff(lambda _k: None, incoming, ctx.keys)
            return diff.as_dict(ctx.options.diff_limit), 0, [f"{self.description} does not exist yet"]
        log = self.make_log(ctx)
        try:
            log.open()
            view = _read_to_end(log, ctx)
            diff = compute_diff(lambda k: e.value if (e := view.get_raw(k)) else None, incoming, ctx.keys)
            to_write = diff.records_to_write(ctx.options.write_all)
            if ctx.options.dry_run or not to_write:
                return diff.as_dict(ctx.options.diff_limit), 0, []
            ctx.progress.note(
                f"warning: writing directly to {self.description}: Connect's STOPPED rule is not checked here; "
                "the connectors involved must be stopped (or import through a daemon, which checks it)"
            )
            written = 0
            for start in range(0, len(to_write), _WRITE_CHUNK):
                chunk = to_write[start : start + _WRITE_CHUNK]
                log.append([(r.key, r.value) for r in chunk], ctx.options.timeout_s)
                written += len(chunk)
                ctx.progress.report(f"writing {self.description}", written, len(to_write))
            return diff.as_dict(ctx.options.diff_limit), written, []
        finally:
            log.close()


class KafkaLocation(_LogLocation):
    kind = "kafka"

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic

    @property
    def description(self) -> str:
        return f"kafka://{self.bootstrap}/{self.topic}"

    def exists(self, ctx: _Context) -> bool:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient

        from emulator.logs.kafka.config import KafkaClientConfig

        admin = KafkaClientConfig(self.bootstrap, ctx.kafka_config, "a transfer").create("admin", AdminClient)
        try:
            # All topics, not ``topic=``: a metadata request naming a missing topic auto-creates it on
            # brokers that ignore the request's allow-auto-create flag (Tansu does), and a dry run or a
            # read must never create anything.
            metadata = admin.list_topics(timeout=min(ctx.options.timeout_s, 30.0))
        except KafkaException as exc:
            raise LocationError(f"{self.description}: cannot reach the brokers: {exc}") from exc
        found = metadata.topics.get(self.topic)
        if found is None:
            return False
        if found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        if found.error is not None:
            raise LocationError(f"{self.description}: {found.error}")
        return True

    def make_log(self, ctx: _Context) -> OffsetLog:
        from emulator.logs.kafka.offsets_log import KafkaOffsetLog

        return KafkaOffsetLog(
            self.bootstrap,
            topic=self.topic,
            partitions=ctx.options.partitions,
            replication_factor=ctx.options.replication_factor,
            client_config=ctx.kafka_config,
        )


class EmbeddedLocation(_LogLocation):
    kind = "embedded"

    def __init__(self, data_dir: Path, name: str) -> None:
        self.data_dir = data_dir
        self.name = name

    @property
    def description(self) -> str:
        return f"embedded:{self.data_dir / (self.name + '.sqlite3')}"

    def exists(self, ctx: _Context) -> bool:
        return (self.data_dir / f"{self.name}.sqlite3").is_file()

    def make_log(self, ctx: _Context) -> OffsetLog:
        from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog

        return EmbeddedOffsetLog(self.data_dir, partitions=ctx.options.partitions, name=self.name)


class DaemonLocation(Location):
    kind = "daemon"
    store = True

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    @property
    def description(self) -> str:
        return self.url

    def _call(
        self, method: str, path: str, ctx: _Context, params: dict[str, Any] | None = None, json: Any = None
    ) -> Any:
        from emulator.client.http import OffsetsClient

        with OffsetsClient(self.url, timeout_s=ctx.options.timeout_s) as client:
            return client.request(method, path, params=params, json=json)

    def _records(self, ctx: _Context, connectors: Sequence[str] = ()) -> list[RawRecord]:
        body = self._call(
            "GET", "/offsets/records", ctx, params={"connector": list(connectors)} if connectors else None
        )
        try:
            return [
                RawRecord(
                    base64.b64decode(r["key"]),
                    None if r["value"] is None else base64.b64decode(r["value"]),
                    r.get("kafka_partition"),
                    r.get("offset"),
                    r.get("timestamp_ms"),
                )
                for r in body["records"]
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise LocationError(f"{self.url}/offsets/records answered an unexpected body: {exc!r}") from exc

    def read(self, ctx: _Context) -> Loaded:
        return Loaded(self._records(ctx, sorted(ctx.options.connectors)))

    def current(self, ctx: _Context, connectors: Sequence[str]) -> list[RawRecord]:
        return self._records(ctx, connectors) if connectors else []

    def apply(self, incoming: list[RawRecord], ctx: _Context) -> tuple[dict[str, Any], int, list[str]]:
        """The daemon plans and checks the import itself (STOPPED rule, its live view) and answers the diff."""
        params = {
            "dry_run": str(ctx.options.dry_run).lower(),
            "allow_malformed": str(ctx.options.malformed == "keep").lower(),
            "write_all": str(ctx.options.write_all).lower(),
        }
        if ctx.options.diff_limit is not None:
            params["diff_limit"] = str(ctx.options.diff_limit)
        body = {
            "records": [
                {
                    "key": base64.b64encode(r.key).decode("ascii"),
                    "value": None if r.value is None else base64.b64encode(r.value).decode("ascii"),
                }
                for r in incoming
            ]
        }
        ctx.progress.report(f"sending to {self.url}/offsets/records", len(incoming), len(incoming), force=True)
        result = self._call("POST", "/offsets/records", ctx, params=params, json=body)
        try:
            return result["diff"], int(result["written"]), []
        except (KeyError, TypeError, ValueError) as exc:
            raise LocationError(f"{self.url}/offsets/records answered an unexpected body: {exc!r}") from exc


_EXTENSIONS: dict[str, Callable[[Path], Location]] = {
    ".avro": SnapshotLocation,
    ".jsonl": CdcLocation,
    ".json": Kip875Location,
    ".offsets": StandaloneLocation,
}
_FILE_KINDS: dict[str, Callable[[Path], Location]] = {
    "standalone": StandaloneLocation,
    "cdc": CdcLocation,
    "kip875": Kip875Location,
    "snapshot": SnapshotLocation,
}
FILE_KINDS = frozenset(_FILE_KINDS)


def parse_location(text: str) -> Location:
    """A location string as documented in the module docstring; ``LocationError`` if it is none."""
    if text.startswith(("http://", "https://")):
        return DaemonLocation(text)
    if text.startswith("kafka://"):
        parts = urlsplit(text)
        topic = parts.path.lstrip("/")
        if not parts.netloc or not topic or "/" in topic:
            raise LocationError(f"{text!r}: expected kafka://HOST:PORT[,HOST:PORT…]/TOPIC")
        return KafkaLocation(parts.netloc, topic)
    kind, sep, rest = text.partition(":")
    if sep and kind == "embedded":
        if not rest:
            raise LocationError("embedded: needs a data directory or a .sqlite3 file")
        path = Path(rest)
        if path.suffix == ".sqlite3":
            return EmbeddedLocation(path.parent, path.stem)
        return EmbeddedLocation(path, "connect-offsets")
    if sep and kind in _FILE_KINDS:
        if not rest:
            raise LocationError(f"{kind}: needs a file path")
        return _FILE_KINDS[kind](Path(rest))
    path = Path(text)
    factory = _EXTENSIONS.get(path.suffix)
    if factory is None:
        raise LocationError(
            f"{text!r} is not a location: use kafka://HOST:PORT/TOPIC, embedded:DIR, http://DAEMON, or "
            "standalone:/cdc:/kip875:/snapshot: followed by a path (bare paths ending in .offsets, .jsonl, "
            ".json or .avro are recognised)"
        )
    return factory(path)


# --- reading logs ---------------------------------------------------------------------------------------


def _read_to_end(log: OffsetLog, ctx: _Context) -> OffsetView:
    """Connect's startup read: every partition to its end offset, applied to a view."""
    view = OffsetView()

    def apply(records: Sequence[LogRecord]) -> None:  # on the log's reader thread
        view.apply(records)
        progress = log.progress()
        ctx.progress.report(f"reading {log.description}", progress.records_read, sum(progress.end_offsets.values()))

    log.start_reading(apply)
    try:
        log.read_to_end(ctx.options.timeout_s)
    except LogReadError as exc:
        progress = log.progress()
        if progress.error is not None:
            raise LocationError(f"{log.description} cannot be read: {progress.error}") from exc
        raise LocationError(
            f"{log.description} was not read to its end within {ctx.options.timeout_s:g} s "
            f"({progress.records_read} records read of end offsets summing to "
            f"{sum(progress.end_offsets.values())}); nothing was written"
        ) from exc
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


# --- the transfer ---------------------------------------------------------------------------------------


def _select(loaded: Loaded, options: TransferOptions, keys: KeyIndex) -> tuple[list[RawRecord], list[str]]:
    notes: list[str] = []
    selected: list[RawRecord] = []
    malformed: list[RawRecord] = []
    enveloped = reencoded = 0
    for record in loaded.records:
        if options.live_only and record.value is None:
            continue
        name = keys.connector(record.key)
        if name is None and (unwrapped := cdc_state.connect_key(record.key)) is not None:
            enveloped += 1
            if options.unwrap_envelopes:
                key, exact = unwrapped
                reencoded += not exact
                record = RawRecord(key, record.value, record.kafka_partition, record.log_offset, record.timestamp_ms)
                name = keys.connector(key)
        if name is None:
            if options.connectors:
                continue
            malformed.append(record)
            if options.malformed == "skip":
                continue
        elif options.connectors and name not in options.connectors:
            continue
        selected.append(record)
    if malformed:
        first = malformed[0].key[:200].decode("utf-8", "backslashreplace")
        if options.malformed == "refuse":
            raise TransferError(
                f'{len(malformed)} record(s) have keys Connect ignores (not ["<connector>",{{…}}]; first: {first}); '
                "nothing was written. Use --malformed skip to leave them out or --malformed keep to copy them as-is"
            )
        verb = "left out" if options.malformed == "skip" else "copied as-is"
        notes.append(f"{len(malformed)} record(s) with keys Connect ignores {verb} (first: {first})")
    if enveloped and options.unwrap_envelopes:
        notes.append(
            f"{enveloped} schema-envelope key(s) (Flink CDC / Debezium 1.x, schemas.enable=true) unwrapped into "
            f"Connect keys ({enveloped - reencoded} byte-exact payloads, {reencoded} re-encoded)"
        )
    elif enveloped:
        notes.append(
            f"{enveloped} key(s) have a schema envelope (Flink CDC / Debezium 1.x, schemas.enable=true), which Connect "
            "never matches; --unwrap-envelopes turns them into Connect keys"
        )
    return selected, notes


def _prune(
    incoming: list[RawRecord], current: list[RawRecord], connectors: set[str], keys: KeyIndex
) -> list[RawRecord]:
    """Tombstones for live destination records of ``connectors`` that the incoming set lacks."""
    present = {r.key for r in incoming}
    return [
        RawRecord(r.key, None)
        for r in current
        if r.value is not None and r.key not in present and keys.connector(r.key) in connectors
    ]


def transfer(
    source: Location, destination: Location, options: TransferOptions, progress: Progress | None = None
) -> TransferReport:
    """Read ``source`` completely, select, plan the diff at ``destination`` and (unless dry run) write it."""
    progress = progress or Progress()
    ctx = _Context(options, progress, "from")
    loaded = source.read(ctx)
    incoming, notes = _select(loaded, options, ctx.keys)
    notes = [*loaded.notes, *notes]
    ctx.role = "to"
    if isinstance(destination, SnapshotLocation):
        destination.source_description = source.description
    touched = set(options.connectors) or {n for r in incoming if (n := ctx.keys.connector(r.key)) is not None}
    if options.prune:
        if not destination.store:
            raise TransferError("--prune applies to stores (topics, embedded logs, standalone files, daemons) only")
        incoming = incoming + _prune(incoming, destination.current(ctx, sorted(touched)), touched, ctx.keys)
    diff, written, write_notes = destination.apply(incoming, ctx)
    return TransferReport(
        source.description,
        destination.description,
        options.dry_run,
        len(loaded.records),
        len(incoming),
        written,
        diff,
        [*notes, *write_notes],
    )


def is_file_location(location: Location) -> bool:
    return isinstance(location, _FileLocation)
