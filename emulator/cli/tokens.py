"""``token mint``: a new bearer token for a service, and the line that lets the daemon accept it.

The token is printed once and never stored: the daemon's tokens file (``--tokens-file``) keeps
only its SHA-256. Append the line to that file; the daemon picks it up within seconds (or on
SIGHUP), without a restart. Give the token to the service as ``CONNECT_OFFSETS_TOKEN``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from emulator.cli.common import EXIT_OK, UsageError, out
from emulator.server.auth.scopes import ScopeError
from emulator.server.auth.tokens import TokensFileError, mint, token_line


def register(sub: Any) -> None:
    p = sub.add_parser(
        "token",
        help="mint a bearer token for a service (prints the token and its tokens-file line)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", required=True)
    m = actions.add_parser("mint", help="a new token and its tokens-file line")
    m.add_argument("name", help="who the token is for (shown in audit logs), e.g. spark-orders")
    m.add_argument(
        "--scope",
        action="append",
        required=True,
        metavar="SCOPE",
        help="read, write, claim or admin, optionally :PATTERN (e.g. write:orders-*); repeatable",
    )
    m.add_argument("--json", action="store_true", help='print {"name", "token", "line"}')
    m.set_defaults(handler=run_mint)


def run_mint(args: argparse.Namespace) -> int:
    token = mint()
    try:
        line = token_line(args.name, token, args.scope)
    except (TokensFileError, ScopeError) as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        out(json.dumps({"name": args.name, "token": token, "line": line}, indent=2))
    else:
        out(
            f"token (shown once; give it to the service as CONNECT_OFFSETS_TOKEN):\n  {token}\n"
            f"line for the daemon's --tokens-file:\n  {line}"
        )
    return EXIT_OK
