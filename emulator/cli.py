"""``connect-offsets``: run the daemon, or operate on offsets through a running daemon.

Human-readable tables by default, ``--json`` for scripts; errors are one clear line on stderr
with a non-zero exit code (1 = the daemon refused, 2 = bad usage or input, 3 = daemon unreachable).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emulator.client import DEFAULT_URL, ApiError, DaemonUnavailable, OffsetsClient
from emulator.settings import add_serve_arguments, env_name, settings_from_args

EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="connect-offsets", description="Kafka Connect offsets: daemon, and operations through it."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the daemon (embedded log unless --bootstrap-servers is given)")
    add_serve_arguments(serve)

    def client_command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument(
            "--url",
            default=os.environ.get(env_name("--url"), DEFAULT_URL),
            help=f"daemon URL (default {DEFAULT_URL}; env CONNECT_OFFSETS_URL)",
        )
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")
        return p

    client_command("list", "list connectors with offsets")
    client_command("get", "show a connector's offsets").add_argument("name")
    alter = client_command("alter", 'alter offsets from a KIP-875 JSON file ({"offsets":[...]})')
    alter.add_argument("name")
    alter.add_argument("--file", required=True, help="path of the JSON body, or - for standard input")
    alter.add_argument("--dry-run", action="store_true", help="show the records that would be written; write nothing")
    alter.add_argument(
        "--create",
        action="store_true",
        help="allow a connector that has no offsets yet (Connect itself would answer 404)",
    )
    reset = client_command("reset", "reset (delete) every offset of a connector")
    reset.add_argument("name")
    reset.add_argument(
        "--dry-run", action="store_true", help="show the tombstones that would be written; write nothing"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        try:
            settings = settings_from_args(args)
        except ValueError as exc:
            parser.error(str(exc))
        from emulator.daemon import serve
        from emulator.errors import EmulatorError

        try:
            serve(settings)
        except EmulatorError as exc:  # storage refused at startup: one clear line, no traceback
            print(f"error: {exc.message}", file=sys.stderr)
            return EXIT_USAGE
        return 0
    try:
        return _run_client_command(args)
    except DaemonUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except ApiError as exc:
        print(f"error: {exc.message} (HTTP {exc.status})", file=sys.stderr)
        return EXIT_REFUSED
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


class UsageError(Exception):
    """Bad input from the command line (unreadable file, invalid JSON)."""


def _run_client_command(args: argparse.Namespace) -> int:
    with OffsetsClient(args.url) as client:
        if args.command == "list":
            names = client.connectors()
            _emit(args, names, lambda: "\n".join(names) if names else "(no connectors)")
        elif args.command == "get":
            rows = client.offsets(args.name)
            _emit(args, {"offsets": rows}, lambda: _offsets_table(rows))
        elif args.command == "alter":
            body = _read_body(args.file)
            result = client.alter(args.name, body, dry_run=args.dry_run, create=args.create)
            _emit(args, result, lambda: _modify_text(result))
        elif args.command == "reset":
            result = client.reset(args.name, dry_run=args.dry_run)
            _emit(args, result, lambda: _modify_text(result))
    return 0


def _read_body(path: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(body, dict) or not isinstance(body.get("offsets"), list):
        raise UsageError(
            f'{path} must hold a KIP-875 body: {{"offsets": [{{"partition": {{...}}, "offset": {{...}}}}]}}'
        )
    return body


def _emit(args: argparse.Namespace, data: Any, text: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else text())


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _offsets_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no offsets)"
    cells = [(_compact(r["partition"]), _compact(r["offset"])) for r in rows]
    width = max(len("PARTITION"), *(len(c[0]) for c in cells))
    lines = [f"{'PARTITION':<{width}}  OFFSET"]
    lines += [f"{p:<{width}}  {o}" for p, o in sorted(cells)]
    return "\n".join(lines)


def _modify_text(result: dict[str, Any]) -> str:
    lines = [str(result.get("message", ""))]
    for record in result.get("records", []):
        lines.append(f"  partition {record['kafka_partition']:>3}  {record['key']}  ->  {record['value']}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
