"""``connect-offsets``: run the daemon, or operate on offsets through a running daemon.

Human-readable tables by default, ``--json`` for scripts; errors are one clear line on stderr
with a non-zero exit code (1 = the daemon refused, 2 = bad usage or input, 3 = daemon unreachable).
Command groups are the other modules of ``emulator.cli``; add one and list it in ``COMMAND_GROUPS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from emulator.cli.common import EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE, UsageError
from emulator.client.http import ApiError, DaemonUnavailable

COMMAND_GROUPS = [
    "emulator.cli.serve",
    "emulator.cli.offsets",
    "emulator.cli.claims",
    "emulator.cli.history",
    "emulator.cli.transfer",
    "emulator.cli.spark",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="connect-offsets", description="Kafka Connect offsets: daemon, and operations through it."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_GROUPS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
    except DaemonUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except ApiError as exc:
        print(f"error: {exc.message} (HTTP {exc.status})", file=sys.stderr)
        return EXIT_REFUSED
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE

