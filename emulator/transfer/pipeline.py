"""The transfer: read the source completely, select, plan the diff at the destination, write.

A transfer reads every record of its source into the neutral model (``formats.model.RawRecord``),
filters it (``selection.py``), plans the change at the destination as a diff, and writes exactly
the records the diff marks as changes (``--dry-run`` stops after the plan). Reading happens
completely before anything is written, so a damaged source imports nothing. Document files (cdc,
kip875, snapshot) are *replaced* by an export (with ``--connector``, only those connectors' records:
the file's others stay); stores (logs, standalone files, daemons) are *updated*: records of other
connectors stay. Locations are described in ``locations/parse.py``.
"""

from __future__ import annotations

import shlex

from emulator.transfer.errors import TransferError, TransferInterrupted
from emulator.transfer.locations.base import Location
from emulator.transfer.locations.files import SnapshotLocation
from emulator.transfer.options import TransferContext, TransferOptions
from emulator.transfer.progress import Progress
from emulator.transfer.report import TransferReport
from emulator.transfer.selection import NoRecordOf, select


def transfer(
    source: Location, destination: Location, options: TransferOptions, progress: Progress | None = None
) -> TransferReport:
    """Read ``source`` completely, select, plan the diff at ``destination`` and (unless dry run) write it."""
    progress = progress or Progress()
    ctx = TransferContext(options, progress, "from")
    try:
        return _transfer(source, destination, options, progress, ctx)
    except TransferInterrupted:  # a destination that was writing says what it knows
        raise
    except KeyboardInterrupt:
        if ctx.writing:
            raise
        raise TransferInterrupted(nothing_written=True) from None


def _transfer(
    source: Location, destination: Location, options: TransferOptions, progress: Progress, ctx: TransferContext
) -> TransferReport:
    loaded = source.read(ctx)
    try:
        selection = select(loaded, options, ctx.keys, source.description, progress)
    except NoRecordOf as exc:
        raise TransferError(f"{exc}{_prune_hint(exc.names, destination, ctx)}") from None
    incoming = selection.records
    ctx.unreadable_keys = selection.unreadable_keys
    notes = [*loaded.notes, *selection.notes]
    ctx.role = "to"
    if isinstance(destination, SnapshotLocation):
        destination.source_description = source.description
    touched = set(options.connectors) or {n for r in incoming if (n := ctx.keys.connector(r.key)) is not None}
    nothing_named = ""
    if options.prune:
        if not destination.store:
            raise TransferError("--prune applies to stores (topics, embedded logs, standalone files, daemons) only")
        ctx.prune = touched  # the destination deletes from what it reads to plan: read once
        if options.connectors and not incoming:
            names = ", ".join(repr(n) for n in sorted(options.connectors))
            nothing_named = (
                f"{source.description} has no record of {names} (--connector), and {destination.description} has "
                "none to delete (--prune); nothing was written"
            )
            if not destination.exists(ctx):  # refused before a log that does not exist is created to be read
                raise TransferError(nothing_named)
    applied = destination.apply(incoming, ctx)
    if nothing_named and not ctx.pruned:  # nothing to write, so nothing was (the destination only read)
        raise TransferError(nothing_named)
    if applied.unreadable_values:
        verb = "would be written" if options.dry_run else "were written"
        notes.append(
            f"{applied.unreadable_values} value(s) Connect cannot read back {verb} as-is (--malformed keep): "
            "a task gets no offset for those partitions"
        )
    return TransferReport(
        source=source.description,
        destination=destination.description,
        dry_run=options.dry_run,
        read=len(loaded.records),
        selected=len(incoming) + ctx.pruned,
        written=applied.written,
        diff=applied.diff,
        notes=[*notes, *applied.notes],
        unreadable_values=applied.unreadable_values,
    )


def _prune_hint(names: list[str], destination: Location, ctx: TransferContext) -> str:
    """What to do when the destination holds offsets of connectors the source has no record of: a
    connector reset at the source has none, and a plain transfer leaves its stale offsets at the
    destination (a standalone worker would resume from them). Said only on that refusal; a
    destination that cannot be read then adds nothing to it."""
    if not destination.store:
        return ""
    ctx.role = "to"
    try:
        held = destination.read(ctx).records if destination.exists(ctx) else []
    except Exception:  # the refusal stands without the hint
        return ""
    finally:
        ctx.role = "from"
    found = sorted({n for r in held if r.value is not None and (n := ctx.keys.connector(r.key)) in names})
    if not found:
        return ""
    flags = " ".join(f"--connector {shlex.quote(n)}" for n in found)
    return (
        f". {destination.description} holds offsets of {', '.join(repr(n) for n in found)}: if the source reset "
        f"{'it' if len(found) == 1 else 'them'}, carry the reset over with {flags} --prune (it deletes them there, "
        "and asks first: add --yes where no terminal can answer)"
    )
