"""``connect-offsets serve``: the daemon."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from emulator.cli.common import EXIT_OK, EXIT_USAGE
from emulator.server.options import add_options
from emulator.server.settings import Settings


def register(sub: Any) -> None:
    parser = sub.add_parser("serve", help="run the daemon (embedded log unless --bootstrap-servers is given)")
    add_options(parser, Settings)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from emulator.model.errors import EmulatorError
    from emulator.server.wiring import serve

    try:
        serve(args.settings)
    except EmulatorError as exc:  # storage refused at startup: one clear line, no traceback
        print(f"error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
