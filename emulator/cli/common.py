"""What every client-side command shares: the daemon URL setting, output, and usage errors."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emulator.client.http import DEFAULT_URL
from emulator.server.options import HTTP_URL, add_options, option

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


class UsageError(Exception):
    """Bad input from the command line (unreadable file, invalid JSON, bad option values)."""


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """The settings of every command that talks to a running daemon (declared like ``serve``'s)."""

    url: str = option(DEFAULT_URL, HTTP_URL, "daemon URL", group="connection to the daemon")


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """``--url`` (resolved into ``args.settings``, a ``ClientSettings``) and ``--json``."""
    add_options(parser, ClientSettings)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def emit(args: argparse.Namespace, data: Any, text: Callable[[], str]) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False) if getattr(args, "json", False) else text())


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
