"""What every client-side command shares: the daemon URL option, output, and usage errors."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from emulator.client.http import DEFAULT_URL
from emulator.server.settings import env_name

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


class UsageError(Exception):
    """Bad input from the command line (unreadable file, invalid JSON, bad option values)."""


def add_client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default=os.environ.get(env_name("--url"), DEFAULT_URL),
        help=f"daemon URL (default {DEFAULT_URL}; env CONNECT_OFFSETS_URL)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def emit(args: argparse.Namespace, data: Any, text: Callable[[], str]) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False) if getattr(args, "json", False) else text())


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
