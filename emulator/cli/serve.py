"""``connect-offsets serve``: the daemon."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from emulator.cli.common import EXIT_OK, EXIT_USAGE, UsageError
from emulator.server.settings import add_serve_arguments, settings_from_args


def register(sub: Any) -> None:
    parser = sub.add_parser("serve", help="run the daemon (embedded log unless --bootstrap-servers is given)")
    add_serve_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    from emulator.model.errors import OffsetsError
    from emulator.server.wiring import serve

    try:
        serve(settings)
    except OffsetsError as exc:  # storage refused at startup: one clear line, no traceback
        print(f"error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
