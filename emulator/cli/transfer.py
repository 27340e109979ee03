"""``export``, ``import``, ``migrate``: byte-exact offset transfers between stores and files.

``export`` reads a store (by default the daemon at ``--url``) into a file, ``import`` writes a file
into a store (by default the daemon), ``migrate`` goes from any location to any other (topic to
topic, cluster to cluster, standalone file to a topic, …). All three plan a diff first and print
it; ``--dry-run`` stops there. Locations are described in ``emulator.transfer.locations.parse``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from emulator.cli.common import (
    EXIT_ANSWER_LOST,
    EXIT_OK,
    EXIT_OUTPUT_FAILED,
    EXIT_REFUSED,
    EXIT_USAGE,
    ClientSettings,
    InterruptedBeforeWrite,
    UsageError,
    add_confirmation_option,
    confirm,
    connector_not_empty,
    json_text,
    out,
    say,
)
from emulator.codec.shown import shown_text
from emulator.formats.diff import render_text
from emulator.formats.model import FormatError
from emulator.model.errors import LogConfigError, OffsetsError, WriteOutcomeUnknown
from emulator.server.options import add_options
from emulator.server.settings import parse_kafka_config
from emulator.transfer import (
    FILE_KINDS,
    Location,
    LocationError,
    Progress,
    TransferError,
    TransferOptions,
    TransferReport,
    is_file_location,
    parse_location,
    transfer,
)
from emulator.transfer.errors import OutputIncomplete, TransferInterrupted
from emulator.transfer.locations.files import FileLocation

LOCATIONS_HELP = (
    "kafka://HOST:PORT/TOPIC, embedded:DIR (or a .sqlite3 file), http://DAEMON, standalone:PATH, cdc:PATH "
    "(JSON lines), kip875:PATH, snapshot:PATH (Avro); bare paths ending in .offsets/.jsonl/.json/.avro also work; "
    "a file kind's PATH - is standard input (--from) or standard output (--to)"
)

TRANSFER_TIMEOUT_S = 300.0
"""A transfer's ``--timeout`` when unset: reading a whole log to its end, and each write, take longer
than one answer of a daemon."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "export",
        help="export offsets from a store (default: the daemon) to a file",
        description="Export offsets to a file. " + LOCATIONS_HELP,
    )
    p.add_argument("--from", dest="source", default=None, help="where to read (default: the daemon at --url)")
    p.add_argument("--to", dest="destination", required=True, help="the file to write: " + LOCATIONS_HELP)
    _common(p)
    p.set_defaults(handler=run_export)

    p = sub.add_parser(
        "import",
        help="import offsets from a file into a store (default: the daemon)",
        description="Import offsets from a file. " + LOCATIONS_HELP,
    )
    p.add_argument("--from", dest="source", required=True, help="the file to read: " + LOCATIONS_HELP)
    p.add_argument("--to", dest="destination", default=None, help="where to write (default: the daemon at --url)")
    _common(p)
    p.set_defaults(handler=run_import)

    p = sub.add_parser(
        "migrate",
        help="copy offsets from any location to any other (topic, cluster, embedded log, daemon, file)",
        description="Copy offsets between locations, bytes unchanged, re-placed by murmur2 for the destination's "
        "partition count. " + LOCATIONS_HELP,
    )
    p.add_argument("--from", dest="source", required=True, help=LOCATIONS_HELP)
    p.add_argument("--to", dest="destination", required=True, help=LOCATIONS_HELP)
    _common(p)
    p.set_defaults(handler=run_migrate)


def _common(p: argparse.ArgumentParser) -> None:
    """``--url`` is the shared ``ClientSettings`` (checked like every command's, env CONNECT_OFFSETS_URL);
    the daemon it names is used when --from/--to is omitted."""
    add_options(p, ClientSettings)
    p.add_argument("--connector", action="append", default=[], metavar="NAME", help="only this connector (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the diff; write nothing")
    p.add_argument("--json", action="store_true", help="print the report (diff included) as JSON")
    p.add_argument(
        "--malformed",
        choices=["refuse", "skip", "keep"],
        default="refuse",
        help="records whose keys Connect ignores or whose values Connect cannot read back: refuse the transfer "
        "(default), skip them, or copy them as-is (counted in the report)",
    )
    p.add_argument("--live-only", action="store_true", help="leave the source's tombstones out")
    p.add_argument(
        "--unwrap-envelopes",
        action="store_true",
        help='turn schema-envelope keys {"schema":null,"payload":[…]} (Flink CDC, Debezium 1.x) into Connect keys',
    )
    p.add_argument(
        "--prune",
        action="store_true",
        help="also delete the destination's records of the transferred connectors that the source lacks",
    )
    p.add_argument(
        "--write-all", action="store_true", help="also write records that change nothing (default: changes only)"
    )
    p.add_argument("--show-unchanged", action="store_true", help="list unchanged entries in the diff too (text output)")
    p.add_argument(
        "--partitions",
        type=int,
        default=25,
        help="partitions when the destination topic or embedded log must be created (default 25)",
    )
    p.add_argument("--replication-factor", type=int, default=-1, help="when creating a topic (-1: broker default)")
    p.add_argument(
        "--kafka-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="librdkafka setting for every kafka:// location (repeatable)",
    )
    p.add_argument("--from-kafka-config", action="append", default=[], metavar="KEY=VALUE", help="source only")
    p.add_argument("--to-kafka-config", action="append", default=[], metavar="KEY=VALUE", help="destination only")
    p.add_argument(
        "--name",
        default=None,
        help="connector (engine) name for bare CDC states or a bare KIP-875 body (Flink CDC's default: engine)",
    )
    p.add_argument(
        "--risingwave", action="store_true", help='CDC export: write RisingWave\'s shape (adds "isHeartbeat":false)'
    )
    p.add_argument(
        "--diff-limit",
        type=int,
        default=None,
        help="entries listed per connector in the diff (default 20 for text, all for --json; 0: all)",
    )
    p.add_argument(
        "--store",
        choices=["effective", "connector", "worker"],
        default=None,
        help="a daemon source only: effective (default: each connector as Connect reads it, from its own offsets "
        "topic when it has one), connector (connectors' own topics alone) or worker (the worker's log alone)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_confirmation_option(p)


def _options(args: argparse.Namespace) -> TransferOptions:
    if args.partitions <= 0:
        raise UsageError(f"--partitions must be positive, got {args.partitions}")
    try:
        shared = parse_kafka_config(args.kafka_config)
        from_config = {**shared, **parse_kafka_config(args.from_kafka_config)}
        to_config = {**shared, **parse_kafka_config(args.to_kafka_config)}
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    for name in args.connector:  # a transfer selects by the keys' names, whatever bytes the shell gave
        connector_not_empty(name, "--connector")
    return TransferOptions(
        connectors=frozenset(args.connector),
        malformed=args.malformed,
        live_only=args.live_only,
        unwrap_envelopes=args.unwrap_envelopes,
        prune=args.prune,
        write_all=args.write_all,
        dry_run=args.dry_run,
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        kafka_config_from=from_config,
        kafka_config_to=to_config,
        name=args.name,
        risingwave=args.risingwave,
        timeout_s=args.settings.timeout or TRANSFER_TIMEOUT_S,
        diff_limit=_diff_limit(args),
        store=args.store,
    )


def _diff_limit(args: argparse.Namespace) -> int | None:
    if args.diff_limit is None:
        return None if args.json else 20
    if args.diff_limit < 0:
        raise UsageError(f"--diff-limit must be 0 (all) or positive, got {args.diff_limit}")
    return args.diff_limit or None


def _location(text: str) -> Location:
    try:
        return parse_location(text)
    except LocationError as exc:
        raise UsageError(str(exc)) from exc


def run_export(args: argparse.Namespace) -> int:
    destination = _location(args.destination)
    if not is_file_location(destination):
        raise UsageError(f"export writes a file ({', '.join(sorted(FILE_KINDS))}); to copy between stores use migrate")
    return _run(args, _location(args.source or args.settings.url), destination)


def run_import(args: argparse.Namespace) -> int:
    source = _location(args.source)
    if not is_file_location(source):
        raise UsageError(f"import reads a file ({', '.join(sorted(FILE_KINDS))}); to copy between stores use migrate")
    return _run(args, source, _location(args.destination or args.settings.url))


def run_migrate(args: argparse.Namespace) -> int:
    return _run(args, _location(args.source), _location(args.destination))


def _run(args: argparse.Namespace, source: Location, destination: Location) -> int:
    options = _options(args)
    if options.store is not None and source.kind != "daemon":
        hint = " (a kafka:// location reads exactly the topic it names)" if source.kind == "kafka" else ""
        raise UsageError(
            f"--store picks which of a daemon's stores is read, so it needs a daemon to read from (--from "
            f"http://…); {source.description} is not a daemon{hint}"
        )
    progress = Progress(enabled=not args.quiet)
    try:
        if options.prune and not options.dry_run:
            # --prune deletes the destination's records the source lacks: show the plan, then ask.

            def plan() -> tuple[str, int]:
                planned = transfer(source, destination, dataclasses.replace(options, dry_run=True), progress)
                return _text(args, planned), _change_count(planned)

            confirm(args, f"Write these changes to {destination.description}, deletions included", plan)
        report = transfer(source, destination, options, progress)
    except TransferInterrupted as exc:  # Ctrl-C: the transfer says what it had written (emulator.cli.main)
        if exc.nothing_written:
            raise InterruptedBeforeWrite from None
        raise
    except OutputIncomplete as exc:  # standard output refused the file: as every command's output (README)
        say("error", exc)
        return EXIT_OUTPUT_FAILED
    except (FormatError, LocationError) as exc:
        say("error", f"{exc}; nothing was written")
        return EXIT_USAGE
    except TransferError as exc:
        say("error", exc)
        return EXIT_USAGE
    except LogConfigError as exc:  # a log location that cannot be opened as given: bad input, before any write
        say("error", f"{exc.message}; nothing was written")
        return EXIT_USAGE
    except WriteOutcomeUnknown as exc:  # handed to the log, unacknowledged (or a commit that never came back)
        say(
            "error",
            f"{exc.message}; the write may still land: see what the destination holds (the same "
            "command with --dry-run) before writing again",
        )
        return EXIT_ANSWER_LOST
    except OffsetsError as exc:
        # The log refused (a write, bad records). Refused after some chunks of a direct write, it is
        # ``WritePartlyApplied``, whose message says how many records are in effect and that the same
        # command writes the rest: exit 1 as the daemon's ``write_partly_applied`` does, since running
        # it again is what a script should do.
        say("error", exc.message)
        return EXIT_REFUSED
    _print(args, report, out if not _writes_stdout(destination) else _err)
    return EXIT_OK


def _writes_stdout(destination: Location) -> bool:
    """``KIND:-`` as the destination: standard output holds the file, so the report goes to stderr."""
    return isinstance(destination, FileLocation) and destination.stdio


def _err(text: str) -> None:
    print(shown_text(text, lines=True), file=sys.stderr)


def _print(args: argparse.Namespace, report: TransferReport, show: Callable[[str], None]) -> None:
    if args.json:
        show(json_text(report.as_dict()))
        return
    for note in report.notes:
        say("note", note)
    show(_text(args, report))


def _change_count(report: TransferReport) -> int:
    """From the diff's summary, which counts every entry; the listed entries stop at --diff-limit."""
    summary: dict[str, int] = report.diff["summary"]
    return sum(summary.get(status, 0) for status in ("added", "changed", "removed"))


def _text(args: argparse.Namespace, report: TransferReport) -> str:
    verb = "would write" if report.dry_run else "wrote"
    head = f"{report.source} -> {report.destination}: read {report.read} record(s), {report.selected} selected, "
    written = "" if report.dry_run else f" ({report.written} record(s) written)"
    lines = [f"{head}{verb} {_change_count(report)} change(s){written}"]
    if report.dry_run:
        lines.append("Dry run: nothing was written.")
    lines.append(render_text(report.diff, show_unchanged=args.show_unchanged))
    return "\n".join(lines)
