"""Locations that are files: Connect's standalone offsets file (a store) and the documents an
export replaces (Flink CDC / RisingWave states, KIP-875 bodies, Avro snapshots)."""

from __future__ import annotations

import abc
import errno
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from emulator.formats import cdc_state, kip875, snapshot, standalone
from emulator.formats.atomic import atomic_write
from emulator.formats.diff import compute_diff
from emulator.formats.file_kinds import (
    NotRegularFileError,
    StreamError,
    check_replaceable,
    read_source,
    read_stdin,
    replacement_target,
)
from emulator.formats.model import Encoded, FormatError, Loaded, RawRecord, Tick, latest_per_key
from emulator.transfer.errors import LocationError, OutputIncomplete, TransferInterrupted
from emulator.transfer.locations.base import Location
from emulator.transfer.options import TransferContext
from emulator.transfer.report import ApplyResult
from emulator.transfer.selection import with_tombstones


class FileLocation(Location):
    def __init__(self, path: Path, stdio: bool = False) -> None:
        self.path = path
        self.stdio = stdio
        """``KIND:-``: standard input as a source, standard output as a destination (a file named
        ``-`` is ``KIND:./-``, which ``Path`` also spells ``-``)."""

    @property
    def source_name(self) -> str:
        """How a reader's refusal names the file (``FormatError.source``)."""
        return "standard input" if self.stdio else str(self.path)

    @property
    def description(self) -> str:
        if str(self.path) == "-":
            return f"{self.kind}:-" if self.stdio else f"{self.kind}:./-"
        return f"{self.kind}:{self.path}"

    def _data(self, ctx: TransferContext) -> bytes:
        """The file's bytes; a pipe is read within ``--timeout``, a device or directory is refused."""
        try:
            if self.stdio:
                return read_stdin(ctx.options.timeout_s)
            return read_source(self.path, timeout_s=ctx.options.timeout_s)
        except FileNotFoundError:
            raise LocationError(f"{self.description}: no such file") from None
        except (NotRegularFileError, StreamError) as exc:
            raise LocationError(f"{self.description}: {exc}") from exc
        except OSError as exc:
            raise LocationError(f"{self.description}: cannot read: {exc.strerror or exc}") from exc

    def read(self, ctx: TransferContext) -> Loaded:
        """The file's records, with progress on stderr for a long read (as a log's read reports it)."""
        what = f"reading {self.description}"
        loaded = self.load(ctx, ctx.progress.ticker(what))
        ctx.progress.report(f"read {self.description}", len(loaded.records), len(loaded.records), force=True)
        return loaded

    @abc.abstractmethod
    def load(self, ctx: TransferContext, progress: Tick) -> Loaded:
        """Every record of the file (``progress`` told how far the format's reader got)."""

    def _existing(self, ctx: TransferContext) -> Loaded | None:
        """What the destination holds now: nothing for standard output."""
        return self.read(ctx) if self.exists(ctx) else None

    def exists(self, ctx: TransferContext) -> bool:
        return not self.stdio and self.path.exists()

    def _check_writable(self, binary: bool = False) -> None:
        """Refused before anything is read or written: a missing directory, a destination that is no
        regular file, binary bytes for a terminal."""
        if self.stdio:
            if binary and sys.stdout.isatty():
                raise LocationError(
                    f"{self.description}: standard output is a terminal, and a {self.kind} file is binary: "
                    "redirect it (> FILE) or name a file"
                )
            return
        parent = self.path.parent if str(self.path.parent) else Path(".")
        if not parent.is_dir():
            raise LocationError(f"{self.description}: directory {parent} does not exist")
        try:
            check_replaceable(replacement_target(self.path))
        except NotRegularFileError as exc:
            raise LocationError(f"{self.description}: {exc}") from exc

    def _emit(self, data: bytes) -> None:
        """The whole file on standard output (``KIND:-``), where an export cannot replace anything.

        Written until every byte went: a buffered write larger than its buffer returns the count the
        pipe took when its reader goes away in the middle (65,536 bytes, no error), and that export
        reported success with 2 % of a snapshot sent (``… | head``); the next write raises
        ``BrokenPipeError``, which the CLI answers with 141. A descriptor is written directly
        (``os.write``), so that a refusal part-way (a file-size limit, a full disk) knows how many bytes
        went: it is ``OutputIncomplete`` (exit 74), which says the output is incomplete, not the
        "nothing was written" of a file the export could leave untouched."""
        sent = 0
        try:
            sys.stdout.flush()
            out = sys.stdout.buffer
            out.flush()
            fd = _descriptor(out)
            view = memoryview(data)
            while sent < len(data):
                written = os.write(fd, view[sent:]) if fd is not None else out.write(view[sent:])
                if not written:  # None (a non-blocking descriptor) or 0: nothing more goes
                    raise OSError(errno.EAGAIN, f"standard output took no more after {sent} bytes")
                sent += written
            if fd is None:
                out.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if sent:
                message = (
                    f"{self.description}: cannot write standard output: {reason} after {sent:,} of {len(data):,} "
                    f"bytes; the output is incomplete (a truncated {self.kind} file)"
                )
            else:
                message = f"{self.description}: cannot write standard output: {reason}; nothing was written to it"
            raise OutputIncomplete(message, sent, len(data)) from exc

    def _replace(self, write: Callable[[], object]) -> None:
        """Run ``write`` (an atomic replacement of the file) and say plainly when the disk refused it
        (no space left, a file-size limit, permissions) instead of a traceback. The replacement is
        atomic, so the old file, or none, is still there."""
        try:
            write()
        except OSError as exc:
            raise LocationError(f"{self.description}: cannot write: {exc.strerror or exc}") from exc
        except KeyboardInterrupt:
            raise TransferInterrupted(
                f"was replacing {self.description}: the replacement is atomic, so the file is either as it was or "
                "the whole new one"
            ) from None


def _descriptor(stream: object) -> int | None:
    """The file descriptor under ``stream``, or None for one without (a test's captured output)."""
    try:
        fileno = stream.fileno  # type: ignore[attr-defined]
        return int(fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both of the last two
        return None


class DocumentLocation(FileLocation):
    """A file an export replaces: the diff shows old content → new content."""

    def apply(self, incoming: list[RawRecord], ctx: TransferContext) -> ApplyResult:
        """Encode first, dry run too: a record the format cannot express is refused (or left out,
        with a note) the same way in both, and the diff, the count written and the count of values
        Connect cannot read back are those of the records the file really holds, as its reader reads
        them back (``Encoded.records``), compared with the existing file read the same way: a second
        run of the same export reports no change.

        With ``--connector``, the export replaces those connectors' records only: every other record
        of an existing file (other connectors, keys Connect ignores) is kept as it is, outside the
        diff, and a note counts them. The file used to be replaced whole, so an export of one
        connector into a file of several silently deleted the others, which ``--prune`` (deleting
        less) would not do without ``--yes``. An existing file that cannot be read is then refused:
        what it holds could not be kept."""
        self._check_writable(binary=self.kind == "snapshot")
        connectors = ctx.options.connectors
        replaced: list[str] = []
        try:
            existing = self._existing(ctx)
        except FormatError as exc:  # an export may replace a damaged document; the diff then starts empty
            if connectors:
                raise LocationError(
                    f"the existing {self.description} is unreadable ({exc.detail}), so its other connectors' "
                    "records cannot be kept beside those of --connector: export to another file, or move this "
                    "one away first"
                ) from exc
            existing = None
            replaced.append(f"the existing {self.description} is unreadable and is replaced ({exc.detail})")
        before = latest_per_key(existing.records) if existing else {}
        kept = {k: r for k, r in before.items() if ctx.keys.connector(k) not in connectors} if connectors else {}
        old = {k: r.value for k, r in before.items() if k not in kept}
        latest = latest_per_key(incoming)
        encoded = self.encode(_in_file_order(before, kept, latest), ctx)
        held = latest_per_key(encoded.records)
        if encoded.data:  # a snapshot's dry run encodes nothing
            ctx.progress.report(f"encoded {self.description}", len(latest), len(latest), force=True)
        if kept:
            replaced.append(_kept_note(self.description, kept, ctx, ctx.options.dry_run))
        moved = [r for k, r in held.items() if k not in kept]
        dropped = [RawRecord(k, None) for k, v in old.items() if v is not None and k not in held]
        diff = compute_diff(old.get, [*moved, *dropped], ctx.keys)
        unreadable = ctx.count_unreadable(held.values())
        if ctx.options.dry_run:
            return ApplyResult(diff.as_dict(ctx.options.diff_limit), 0, [*replaced, *encoded.notes], unreadable)
        if self.stdio:
            self._emit(encoded.data)
        else:
            self._replace(lambda: atomic_write(self.path, encoded.data))
        return ApplyResult(diff.as_dict(ctx.options.diff_limit), len(held), [*replaced, *encoded.notes], unreadable)

    @abc.abstractmethod
    def encode(self, records: list[RawRecord], ctx: TransferContext) -> Encoded:
        """The file's bytes for ``records`` (one per key), and the records it holds."""

    def _encoding(self, ctx: TransferContext, records: list[RawRecord]) -> Tick:
        """Progress of ``encode``: the format's writer counts records, the total is known here."""
        what, total = f"encoding {self.description}", len(records)
        return lambda done, _total: ctx.progress.report(what, done, total)


def _in_file_order(
    before: dict[bytes, RawRecord], kept: dict[bytes, RawRecord], latest: dict[bytes, RawRecord]
) -> list[RawRecord]:
    """The records an export writes: with records kept (``--connector``), in the existing file's order,
    each named connector's key where it was, new keys after; without, the source's order."""
    if not kept:
        return list(latest.values())
    placed = [kept.get(k) or latest[k] for k in before if k in kept or k in latest]
    return [*placed, *(r for k, r in latest.items() if k not in before)]


def _kept_note(description: str, kept: dict[bytes, RawRecord], ctx: TransferContext, dry_run: bool) -> str:
    """What an export with ``--connector`` left in place in an existing document."""
    owners = [ctx.keys.connector(k) for k in kept]
    names = sorted({n for n in owners if n is not None})
    parts = []
    if names:
        shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        parts.append(f"{len(names)} other connector(s) ({shown})")
    if None in owners:
        parts.append(f"{owners.count(None)} whose keys Connect ignores")
    verb = "would be kept" if dry_run else "were kept"
    return (
        f"{len(kept)} record(s) of {' and '.join(parts)} already in {description} {verb} as they are: "
        "--connector replaces only the named connectors' records in an existing file"
    )


class StandaloneLocation(FileLocation):
    kind = "standalone"
    store = True

    def load(self, ctx: TransferContext, progress: Tick) -> Loaded:
        return standalone.loads(self._data(ctx), source=self.source_name, progress=progress)

    def apply(self, incoming: list[RawRecord], ctx: TransferContext) -> ApplyResult:
        self._check_writable(binary=True)
        existing = self._existing(ctx)
        merged: dict[bytes, RawRecord] = latest_per_key(existing.records) if existing else {}
        incoming = with_tombstones(incoming, merged.values(), ctx)
        diff = compute_diff(lambda k: r.value if (r := merged.get(k)) else None, incoming, ctx.keys)
        to_write = diff.records_to_write(ctx.options.write_all)
        unreadable = ctx.count_unreadable(to_write)
        if ctx.options.dry_run or (existing is not None and not to_write):
            return ApplyResult(diff.as_dict(ctx.options.diff_limit), 0, unreadable_values=unreadable)
        for record in to_write:
            merged[record.key] = record
        writing = ctx.progress.ticker(f"writing {self.description}")
        if self.stdio:
            self._emit(standalone.dumps(merged.values(), writing))
            notes = []
        else:
            self._replace(lambda: standalone.write_file(self.path, merged.values(), writing))
            notes = ["a standalone worker must be stopped while its offsets file is replaced"]
        return ApplyResult(diff.as_dict(ctx.options.diff_limit), len(to_write), notes, unreadable)


class CdcLocation(DocumentLocation):
    kind = "cdc"

    def load(self, ctx: TransferContext, progress: Tick) -> Loaded:
        data = self._data(ctx)
        return cdc_state.loads_file(
            data, default_connector=ctx.options.name, source=self.source_name, progress=progress
        )

    def encode(self, records: list[RawRecord], ctx: TransferContext) -> Encoded:
        return cdc_state.encode_file(records, risingwave=ctx.options.risingwave, progress=self._encoding(ctx, records))


class Kip875Location(DocumentLocation):
    kind = "kip875"

    def load(self, ctx: TransferContext, progress: Tick) -> Loaded:
        data = self._data(ctx)
        return kip875.loads_file(data, default_connector=ctx.options.name, source=self.source_name, progress=progress)

    def encode(self, records: list[RawRecord], ctx: TransferContext) -> Encoded:
        return kip875.encode_file(records, progress=self._encoding(ctx, records))


class SnapshotLocation(DocumentLocation):
    kind = "snapshot"

    def __init__(self, path: Path, stdio: bool = False) -> None:
        super().__init__(path, stdio)
        self.source_description = "unknown"
        """What the snapshot's header names as its source; the pipeline sets it before writing."""

    def load(self, ctx: TransferContext, progress: Tick) -> Loaded:
        loaded, info = snapshot.loads(self._data(ctx), source=self.source_name, progress=progress)
        if info.source:
            taken = (
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(info.taken_at_ms / 1000))
                if info.taken_at_ms is not None
                else "an unknown time"
            )
            loaded.notes.append(f"snapshot of {info.source} taken at {taken}, {info.records} record(s)")
        return loaded

    def encode(self, records: list[RawRecord], ctx: TransferContext) -> Encoded:
        if ctx.options.dry_run:  # a snapshot holds every record as it is: nothing to find out by encoding
            return Encoded(b"", records)
        return Encoded(
            snapshot.dumps(records, source=self.source_description, progress=self._encoding(ctx, records)), records
        )
