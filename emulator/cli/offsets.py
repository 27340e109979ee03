"""``list``, ``get``, ``alter``, ``reset``: Connect's offsets operations through a running daemon."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from emulator.cli.common import (
    EXIT_OK,
    Hinted,
    InterruptedBeforeWrite,
    UsageError,
    add_client_options,
    add_confirmation_option,
    compact,
    confirm,
    connector_name,
    emit,
)
from emulator.client.errors import ClientError, FencedError, NotFoundError, NotStoppedError
from emulator.client.http import Auth, OffsetsClient
from emulator.codec.shown import shown_json, shown_name, shown_text
from emulator.formats.file_kinds import STREAM_TIMEOUT_S, NotRegularFileError, StreamError, read_source, read_stdin


def register(sub: Any) -> None:
    p = sub.add_parser("list", help="list connectors with offsets")
    add_client_options(p)
    p.set_defaults(handler=run_list)

    p = sub.add_parser("get", help="show a connector's offsets")
    add_client_options(p)
    p.add_argument("name")
    _kind_option(p)
    p.set_defaults(handler=run_get)

    p = sub.add_parser("alter", help='alter offsets from a KIP-875 JSON file ({"offsets":[...]})')
    add_client_options(p)
    p.add_argument("name")
    p.add_argument("--file", required=True, help="path of the JSON body, or - for standard input")
    p.add_argument("--dry-run", action="store_true", help="show the records that would be written; write nothing")
    p.add_argument(
        "--create", action="store_true", help="allow a connector that has no offsets yet (Connect itself answers 404)"
    )
    p.add_argument("--claim-epoch", type=int, help="write as the holder of this claim (see `claim`)")
    _kind_option(p)
    p.add_argument(
        "--quiet", action="store_true", help="no progress lines, and no dry run's closing summary, on stderr"
    )
    p.set_defaults(handler=run_alter)

    p = sub.add_parser("reset", help="reset (delete) every offset of a connector")
    add_client_options(p)
    p.add_argument("name")
    p.add_argument("--dry-run", action="store_true", help="show the tombstones that would be written; write nothing")
    p.add_argument("--claim-epoch", type=int, help="write as the holder of this claim (see `claim`)")
    _kind_option(p)
    add_confirmation_option(p)
    p.set_defaults(handler=run_reset)


def _kind_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kind",
        choices=("source", "sink"),
        default=None,
        help="sink: the consumer group connect-NAME's offsets (only needed without the daemon's --config-topic)",
    )


def run_list(args: argparse.Namespace) -> int:
    with OffsetsClient(args.settings.url) as client:
        names = client.connectors()
    emit(args, names, lambda: "\n".join(shown_name(n) for n in names) if names else "(no connectors)")
    return EXIT_OK


def run_get(args: argparse.Namespace) -> int:
    with OffsetsClient(args.settings.url) as client:
        rows = client.offsets(connector_name(args.name), kind=args.kind)
    emit(args, {"offsets": rows}, lambda: offsets_table(rows))
    return EXIT_OK


@contextmanager
def claim_hints(client: OffsetsClient, name: str) -> Iterator[None]:
    """A write refused for a claim, answered with the flags that resolve it, from the connector's
    current claim (one more request, only after a refusal; none when that request fails too)."""
    try:
        yield
    except (NotStoppedError, FencedError) as exc:
        if exc.kind not in ("claim_held", "fenced"):
            raise
        try:
            claim = client.current_claim(name)
        except ClientError:
            raise exc from None
        if claim is None:
            hint = (
                f"{name} has no claim now: write without --claim-epoch, or take one with "
                f"`connect-offsets claim {name} --owner …`"
            )
        else:
            hint = (
                f"its holder {claim['owner']!r} writes with --claim-epoch {claim['epoch']}; "
                f"to end that claim: `connect-offsets release {name} --epoch {claim['epoch']}`"
            )
        raise Hinted(exc, hint) from exc


def run_alter(args: argparse.Namespace) -> int:
    """Progress lines on stderr for a large body (as a transfer shows them: 70,000 partitions took
    seconds in silence, nearly all of it the daemon's planning), and after a long dry run a one-line
    summary there, since its listing scrolls past; stdout stays what scripts parse."""
    from emulator.transfer.progress import Progress  # here: the package costs `get` and `list` 0.1 s

    connector_name(args.name)
    progress = Progress(enabled=not args.quiet)
    body = read_body(args.file)
    partitions = len(body["offsets"])
    progress.report(f"read {'standard input' if args.file == '-' else args.file}", partitions, partitions, force=True)
    summary = None
    with OffsetsClient(args.settings.url) as client, claim_hints(client, args.name):
        where = f"{client.url}/connectors/{args.name}/offsets" + (" (dry run)" if args.dry_run else "")
        progress.report(f"sending to {where}", 0, partitions, force=True)
        try:
            result = client.alter(
                args.name,
                body,
                dry_run=args.dry_run,
                create=args.create,
                auth=Auth(claim_epoch=args.claim_epoch),
                kind=args.kind,
            )
        except NotFoundError as exc:
            # Connect's 404 for a connector without offsets is right for the API, but at a terminal the
            # next question is how to give it its first ones; a sink's come from its consumer group.
            if args.create or args.kind == "sink" or exc.kind != "connector_not_found":
                raise
            raise Hinted(exc, "to give it its first offsets, add --create") from exc
        progress.report(f"answered by {where}", partitions, partitions, force=True)
        if args.dry_run and not args.quiet and len(result.get("records", [])) > LONG_LISTING:
            summary = dry_run_summary(client, args.name, result["records"])
    emit(args, result, lambda: modify_text(result))
    if summary is not None:
        progress.note(summary)
    return EXIT_OK


LONG_LISTING = 100
"""Records a dry run lists beyond which it ends with a summary on stderr: more than a screen or two,
where the message at the top has scrolled away and nobody counts lines."""


def dry_run_summary(client: OffsetsClient, name: str, records: list[dict[str, Any]]) -> str | None:
    """How the partitions of a dry run's records compare with what the connector's records hold now
    (one more read, only for a long listing): changed, unchanged (the same bytes again), new, and reset
    among the changed. Bytes, not parsed JSON: a record that would rewrite an offset of the same meaning
    in other bytes does change the log, and comparing raw records needs no parsing of 70,000 values
    (parsing both sides took longer than the rest of the command's own work, 2026-11-29). None for a
    sink's consumer-group changes, which say their own action on each line."""
    if any("consumer_group" in record for record in records):
        return None
    planned = {r["key"].encode(): None if r["value"] is None else r["value"].encode() for r in records}
    now = client.records([name])
    changed = unchanged = new = reset = 0
    for key, value in planned.items():
        before = now.get(key)
        if before == value:  # the same offset again, or a reset of a partition that has none
            unchanged += 1
        elif before is None:
            new += 1
        else:
            changed += 1
            reset += value is None
    resets = f" ({reset:,} of them reset)" if reset else ""
    return (
        f"dry run of {len(planned):,} partition(s): {changed:,} changed{resets}, {unchanged:,} unchanged, "
        f"{new:,} new; nothing was written"
    )


def run_reset(args: argparse.Namespace) -> int:
    connector_name(args.name)
    auth = Auth(claim_epoch=args.claim_epoch)
    with OffsetsClient(args.settings.url) as client, claim_hints(client, args.name):
        if not args.dry_run:

            def plan() -> tuple[str, int]:
                planned = client.reset(args.name, dry_run=True, auth=auth, kind=args.kind)
                return modify_text(planned), len(planned.get("records", []))

            confirm(args, f"Reset every offset of {args.name}", plan)
        result = client.reset(args.name, dry_run=args.dry_run, auth=auth, kind=args.kind)
    emit(args, result, lambda: modify_text(result))
    return EXIT_OK


def read_body(path: str) -> dict[str, Any]:
    source = "standard input (--file -)" if path == "-" else path  # "- is not valid JSON" read as a typo
    try:
        # Standard input as a transfer's ``KIND:-`` reads it (docs/transfers.md): a terminal is refused
        # at once (the command sat waiting for EOF without a word), a pipe is read within the timeout.
        data = read_stdin(STREAM_TIMEOUT_S) if path == "-" else read_source(Path(path), timeout_s=STREAM_TIMEOUT_S)
        text = data.decode("utf-8")
    except KeyboardInterrupt:  # Ctrl-C while the body was still being read: nothing was sent
        raise InterruptedBeforeWrite from None
    except (NotRegularFileError, StreamError) as exc:
        raise UsageError(f"--file -: {exc}" if path == "-" else str(exc)) from exc
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{source} is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{source} is not valid JSON: {exc}") from exc
    if not isinstance(body, dict) or not isinstance(body.get("offsets"), list):
        raise UsageError(
            f'{source} must hold a KIP-875 body: {{"offsets": [{{"partition": {{...}}, "offset": {{...}}}}]}}'
        )
    return body


def offsets_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no offsets)"
    cells = [(compact(r["partition"]), compact(r["offset"])) for r in rows]
    width = max(len("PARTITION"), *(len(c[0]) for c in cells))
    lines = [f"{'PARTITION':<{width}}  OFFSET"]
    lines += [f"{p:<{width}}  {o}" for p, o in sorted(cells)]
    return "\n".join(lines)


def modify_text(result: dict[str, Any]) -> str:
    """The daemon's message, then each planned change of a dry run: a log record (a tombstone shows
    as ``(delete)``), or for a sink connector a change to its consumer group (names, keys and values
    escaped as ``emulator.codec.shown`` says)."""
    lines = [shown_text(str(result.get("message", "")))]
    for record in result.get("records", []):
        if "consumer_group" in record:
            topic = record["kafka_topic"]
            where = f"{shown_name(topic)}[{record['kafka_partition']}]" if topic else "(whole group)"
            offset = "" if record["kafka_offset"] is None else f" -> {record['kafka_offset']}"
            lines.append(f"  group {shown_name(record['consumer_group'])}  {record['action']}  {where}{offset}")
        else:
            value = "(delete)" if record["value"] is None else shown_json(record["value"])
            lines.append(f"  partition {record['kafka_partition']:>3}  {shown_json(record['key'])}  ->  {value}")
    return "\n".join(lines)
