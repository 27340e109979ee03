"""``history`` and ``rollback``: the offsets archive through a running daemon.

``history NAME`` lists changes newest first, with who made each of the daemon's own changes and from
where (``--as-of T`` prints the offsets as they were at T instead); ``rollback NAME --to T`` writes
the state at T back, and with ``--dry-run`` only prints the diff. Times are ISO-8601 (naive = UTC),
epoch milliseconds or ``now-<duration>``; they are checked here so a typo is a usage error (exit 2),
not a round trip. ``--as-of`` takes ``--partition`` (one partition's offset at T) and refuses
``--from``, ``--to`` and ``--limit``, which belong to a list of changes; a ``--from`` later than
``--to`` is refused (usage, exit 2) rather than answered "(no changes in that range)". A relative time is
resolved once, with this machine's clock, and the time it stands for is printed on stderr, so a dry
run's time can be given to the real rollback.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from emulator.cli.common import (
    EXIT_OK,
    Hinted,
    UsageError,
    add_client_options,
    add_confirmation_option,
    compact,
    confirm,
    connector_name,
    emit,
    say,
)
from emulator.cli.offsets import offsets_table
from emulator.client.errors import ApiError
from emulator.client.history import HistoryClient
from emulator.codec.shown import shown_json, shown_name, shown_text
from emulator.model.times import format_time_ms, is_relative_time, parse_time_ms

_T = "T (ISO-8601, epoch ms or now-<duration> such as now-1h)"


def register(sub: Any) -> None:
    p = sub.add_parser("history", help="show a connector's offset changes from the history archive (newest first)")
    add_client_options(p)
    p.add_argument("name")
    p.add_argument("--partition", help='only this partition, as JSON (e.g. \'{"filename":"/data/in.txt"}\')')
    p.add_argument("--from", dest="from_time", metavar="T", help=f"changes at or after {_T}")
    p.add_argument("--to", dest="to_time", metavar="T", help=f"changes at or before {_T}")
    p.add_argument("--limit", type=int, default=None, help="at most this many changes (default 1000)")
    p.add_argument("--as-of", metavar="T", help=f"print the connector's offsets as they were at {_T} instead")
    p.add_argument(
        "--epoch",
        type=int,
        metavar="N",
        help="with --as-of: as epoch N of the archive had them (an earlier epoch, after the log lost records)",
    )
    p.set_defaults(handler=run_history)

    p = sub.add_parser("rollback", help="roll a connector's offsets back to their state at a past time")
    add_client_options(p)
    p.add_argument("name")
    p.add_argument("--to", dest="to_time", metavar="T", required=True, help=f"the time to go back to: {_T}")
    p.add_argument("--dry-run", action="store_true", help="print the diff; write nothing")
    p.add_argument(
        "--epoch",
        type=int,
        metavar="N",
        help="the state at --to in epoch N of the archive (an earlier epoch, after the log lost records)",
    )
    p.add_argument(
        "--allow-damaged",
        action="store_true",
        help="write the state rebuilt from a damaged history archive all the same (it may never have existed; "
        "refused without this)",
    )
    add_confirmation_option(p)
    p.set_defaults(handler=run_rollback)


def _time(option: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        ms = parse_time_ms(value)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from exc
    if is_relative_time(value):
        print(shown_text(f"{option} {value.strip()}: {format_time_ms(ms)}"), file=sys.stderr)
    return ms


def _partition(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        partition = json.loads(value)
    except ValueError as exc:
        raise UsageError(f"--partition is not valid JSON: {exc}") from exc
    if not isinstance(partition, dict):
        raise UsageError('--partition must be a JSON object, e.g. \'{"filename":"/data/in.txt"}\'')
    return partition


def run_history(args: argparse.Namespace) -> int:
    connector_name(args.name)
    if args.epoch is not None and args.as_of is None:
        raise UsageError("--epoch needs --as-of (it picks the epoch whose offsets at that time are shown)")
    if args.as_of is not None:
        return _as_of(args)
    if args.limit is not None and args.limit < 1:  # the daemon's 400 was exit 1, "refused", for a usage error
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    from_ms, to_ms = _range(args.from_time, args.to_time)
    with HistoryClient(args.settings.url) as client:
        page = client.history(
            args.name, partition=_partition(args.partition), from_time=from_ms, to_time=to_ms, limit=args.limit
        )
    emit(args, page, lambda: history_text(page))
    return EXIT_OK


def _range(from_time: str | None, to_time: str | None) -> tuple[int | None, int | None]:
    """``--from`` and ``--to`` resolved, refused when ``--from`` is later: no change lies in such a range,
    and the daemon answers it with an empty page, which printed "(no changes in that range)" as if the
    archive held none (``--from now --to now-1h`` reads naturally and is backwards)."""
    from_ms, to_ms = _time("--from", from_time), _time("--to", to_time)
    if from_ms is not None and to_ms is not None and from_ms > to_ms:
        raise UsageError(
            f"--from {format_time_ms(from_ms)} is later than --to {format_time_ms(to_ms)}: no change can lie in "
            "that range; give the earlier time to --from (changes are listed newest first either way)"
        )
    return from_ms, to_ms


def _as_of(args: argparse.Namespace) -> int:
    """``--as-of T``: the offsets at one time; ``--partition`` narrows them to one, and the flags of a
    list of changes (``--from``, ``--to``, ``--limit``) are refused rather than ignored."""
    given = (("--from", args.from_time), ("--to", args.to_time), ("--limit", args.limit))
    unused = [flag for flag, value in given if value is not None]
    if unused:
        raise UsageError(
            f"{', '.join(unused)}: not with --as-of, which prints the offsets at one time (--partition narrows "
            "them to one partition); leave out --as-of to list changes"
        )
    partition = _partition(args.partition)
    at = _time("--as-of", args.as_of)
    with HistoryClient(args.settings.url) as client:
        past = client.past_offsets(args.name, at or 0, args.epoch)
    if past.warning:  # on stderr in both modes: the rows (or the JSON) stay what a script reads
        say("warning", past.warning)
    rows = past.offsets
    if partition is not None:  # types count, as in Java's Map.equals (1.0 is not 1), key order does not
        wanted = _canonical(partition)
        rows = [row for row in rows if _canonical(row["partition"]) == wanted]
    emit(args, {"offsets": rows}, lambda: offsets_table(rows))
    return EXIT_OK


def _canonical(partition: Any) -> str:
    return json.dumps(partition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def run_rollback(args: argparse.Namespace) -> int:
    connector_name(args.name)
    to_ms = _time("--to", args.to_time)
    target = to_ms if to_ms is not None else 0
    with HistoryClient(args.settings.url) as client:
        if not args.dry_run:

            def plan() -> tuple[str, int]:
                planned = client.rollback(args.name, target, dry_run=True, epoch=args.epoch)
                return rollback_text(planned), len(planned.get("changes", []))

            confirm(args, f"Roll {args.name} back to {format_time_ms(target)}", plan)
        try:
            result = client.rollback(
                args.name, target, dry_run=args.dry_run, allow_damaged=args.allow_damaged, epoch=args.epoch
            )
        except ApiError as exc:
            if exc.kind != "history_damaged":
                raise
            raise Hinted(
                exc,
                "restore the damaged archive file(s) from a backup and roll back again; or see the rebuilt state "
                f"with --dry-run and set the offsets by hand (connect-offsets alter {args.name} --file ...); or add "
                "--allow-damaged to write the rebuilt state anyway",
            ) from exc
    emit(args, result, lambda: rollback_text(result))
    return EXIT_OK


def history_text(page: dict[str, Any]) -> str:
    changes = page.get("changes", [])
    lines: list[str] = []
    # Two values of one partition from two epochs are not one history: then each says its epoch.
    epochs = sorted({c["epoch"] for c in changes if c.get("epoch") is not None})
    epoch_head = f"  {'EPOCH':>5}" if len(epochs) > 1 else ""
    if not changes:
        lines.append("(no changes in that range)")
    else:
        lines.append(f"{'TIME':<24}{epoch_head}  {'ORIGIN':<16}  {'WHO':<24}  {'AT':>12}  PARTITION  ->  OFFSET")
        for c in changes:
            origin = c["origin"] + (f" {c['operation']}" if c.get("operation") else "")
            who = who_text(c)
            at = f"{c['kafka_partition']}@{c['kafka_offset']}"
            if c["value"] is None:
                offset = "(deleted)"
            else:
                offset = compact(c["offset"]) if c["offset"] is not None else shown_json(c["value"])
            partition = compact(c["partition"]) if c["partition"] is not None else shown_json(c["key"])
            epoch = f"  {c.get('epoch', ''):>5}" if epoch_head else ""
            lines.append(f"{c['time']:<24}{epoch}  {origin:<16}  {who:<24}  {at:>12}  {partition}  ->  {offset}")
    if len(epochs) > 1:
        lines.append(
            f"note: these changes span archive epochs {', '.join(map(str, epochs))}: a new epoch begins when the "
            "log no longer holds records the archive holds (lost acknowledged writes, a re-created or restored "
            f"log); the log now holds epoch {epochs[-1]}'s values, an earlier epoch's changes after it began are "
            "not in it (--as-of now --epoch N shows the offsets as epoch N left them; docs/history.md, Epochs)"
        )
    if page.get("truncated"):
        lines.append("(older changes exist: raise --limit or narrow --from/--to)")
    lines.extend(_damage_lines(page))
    return "\n".join(lines)


def who_text(change: dict[str, Any]) -> str:
    """``principal@host`` for the daemon's own writes (the client's port is left out: it changes with
    every connection), ``-`` when the archive does not know (external records, older archive files)."""
    principal = change.get("principal")
    if principal is None:
        return "-"
    remote = change.get("remote")
    if not remote:
        return shown_name(str(principal))
    host = remote.rsplit(":", 1)[0] if remote.count(":") == 1 or remote.startswith("[") else remote
    return shown_name(f"{principal}@{host}")


def rollback_text(result: dict[str, Any]) -> str:
    lines = [shown_text(str(result.get("message", "")))]
    if result.get("damaged_files"):  # the message says UNRELIABLE; the damage lines come first, not after
        lines.extend(_damage_lines(result))
    for c in result.get("changes", []):
        before = "(absent)" if c["current_value"] is None else shown_json(c["current_value"])
        after = "(delete)" if c["target_value"] is None else shown_json(c["target_value"])
        key = shown_json(c["key"])
        lines.append(f"  {c['action']:<7}  partition {c['kafka_partition']:>3}  {key}  {before}  ->  {after}")
    return "\n".join(lines)


def _damage_lines(body: dict[str, Any]) -> list[str]:
    return [
        shown_text(f"warning: damaged archive file {d['file']}: {d['problem']}") for d in body.get("damaged_files", [])
    ]
