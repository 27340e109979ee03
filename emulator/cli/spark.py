"""``spark-handoff``: publish a Spark query's last completed batch from its checkpoint.

For a driver that crashed (or ran without ``OffsetCommitListener``): the checkpoint alone says how
far Spark got (``offsets/N`` with ``commits/N``), and this command commits that batch's end offset
so the Connect connector resumes exactly after Spark's output. It reads the checkpoint files itself
and never imports pyspark. Commits are monotonic and idempotent: running it twice, or against an
older checkpoint, never moves the connector backwards.

A ``connect-file`` or ``connect-debezium`` offset names its connector: ``--connector`` must be that
name. A connector the daemon does not know is made only with ``--create``, as ``alter`` does. A
claimed connector takes the commit only with ``--claim-epoch`` (the claim's epoch), as ``alter``.
"""

from __future__ import annotations

import argparse
from typing import Any

from emulator.cli.common import EXIT_OK, Hinted, UsageError, add_client_options, compact, connector_not_empty, emit
from emulator.cli.offsets import claim_hints
from emulator.client.errors import ApiError
from emulator.codec.shown import shown_name
from emulator.spark.checkpoint import CheckpointError, latest_completed_batch, parse_offset
from emulator.spark.committer import DaemonOffsets, SinkOffsetsUnsupported
from emulator.spark.handoff import HandoffError, entries_for, order_for


def register(sub: Any) -> None:
    p = sub.add_parser(
        "spark-handoff",
        help="commit a Spark query's last completed batch (from its checkpoint) to a connector",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_client_options(p)
    p.add_argument("--checkpoint", required=True, help="the query's checkpointLocation (local path or file: URI)")
    p.add_argument("--connector", required=True, help="the connector (or, with --kind sink, group connect-NAME)")
    p.add_argument("--source-index", type=int, default=0, help="which source of the query (default 0)")
    p.add_argument(
        "--kind",
        choices=("source", "sink"),
        default="source",
        help="source: a source connector's offsets (default); sink: Kafka-shaped offsets to group connect-NAME",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be committed; write nothing")
    p.add_argument(
        "--create", action="store_true", help="allow a connector that has no offsets yet (Connect itself answers 404)"
    )
    p.add_argument("--claim-epoch", type=int, help="write as the holder of this claim (see `claim`)")
    p.set_defaults(handler=run_handoff)


def run_handoff(args: argparse.Namespace) -> int:
    connector_not_empty(args.connector, "--connector")
    if args.source_index < 0:
        raise UsageError("--source-index must be >= 0")
    try:
        batch = latest_completed_batch(args.checkpoint)
        if batch is None:
            emit(
                args,
                {"batch": None, "written": [], "skipped": []},
                lambda: f"{args.checkpoint}: no completed batch yet; nothing to hand off",
            )
            return EXIT_OK
        offset = parse_offset(batch.source(args.source_index))
    except CheckpointError as exc:
        raise UsageError(str(exc)) from exc
    if offset is None:
        raise UsageError(f"batch {batch.batch_id} has no offset for source {args.source_index}")
    try:
        named, entries = entries_for(offset, args.source_index, args.kind)
    except HandoffError as exc:
        raise UsageError(str(exc)) from exc
    if named is not None and named != args.connector:
        raise UsageError(
            f"--connector {args.connector!r}, but the checkpoint's offset (batch {batch.batch_id}, source "
            f"{args.source_index}) names connector {named!r}: its position belongs to {named!r} only "
            f"(--connector {named})"
        )
    with DaemonOffsets(args.settings.url) as daemon, claim_hints(daemon.client, args.connector):
        try:
            if not args.create and daemon.offsets(args.connector, args.kind) is None:
                raise UsageError(
                    f"the daemon at {daemon.url} has no {args.kind} connector {args.connector!r}: "
                    "spark-handoff makes one only with --create (a mistyped --connector would otherwise "
                    "start a new connector)"
                )
            outcome = daemon.commit(
                args.connector,
                entries,
                args.kind,
                dry_run=args.dry_run,
                order=order_for(offset),
                create=args.create,
                claim_epoch=args.claim_epoch,
            )
        except SinkOffsetsUnsupported as exc:
            raise UsageError(str(exc)) from exc
        except ApiError as exc:  # made meanwhile by nobody: the daemon's own 404
            if args.create or exc.kind != "connector_not_found":
                raise
            raise Hinted(exc, "to give it its first offsets, add --create") from exc
    data = {"batch": batch.batch_id, "source_index": args.source_index, **outcome.as_dict()}

    def text() -> str:
        target = f"{args.kind} offsets of {shown_name(args.connector)}"
        lines = [f"batch {batch.batch_id}, source {args.source_index} -> {target}"]
        verb = "would write" if args.dry_run else "wrote"
        lines += [f"  {verb} {compact(w['partition'])} -> {compact(w['offset'])}" for w in outcome.written]
        lines += [
            f"  kept {compact(s['partition'])} at {compact(s['current'])} ({s['reason']})" for s in outcome.skipped
        ]
        return "\n".join(lines)

    emit(args, data, text)
    return EXIT_OK
