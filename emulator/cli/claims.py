"""``claim``, ``claims``, ``release``: one owner per connector, through a running daemon."""

from __future__ import annotations

import argparse
from typing import Any

from emulator.cli.common import EXIT_OK, add_client_options, connector_name, emit
from emulator.client.http import OffsetsClient
from emulator.codec.shown import shown_name


def register(sub: Any) -> None:
    p = sub.add_parser("claim", help="claim a connector's offsets for one owner (fences older owners)")
    add_client_options(p)
    p.add_argument("name")
    p.add_argument("--owner", required=True, help="who writes from now on (e.g. a Spark query id, your name)")
    p.add_argument("--force", action="store_true", help="claim even while the Connect cluster runs the connector")
    p.set_defaults(handler=run_claim)

    p = sub.add_parser("claims", help="show a connector's current claim, or (without a name) every current claim")
    add_client_options(p)
    p.add_argument("name", nargs="?", help="the connector (omitted: every claim the credentials may read)")
    p.set_defaults(handler=run_show)

    p = sub.add_parser("release", help="release a connector's claim")
    add_client_options(p)
    p.add_argument("name")
    p.add_argument("--epoch", type=int, required=True, help="the epoch of the claim to release")
    p.set_defaults(handler=run_release)


def _text(claim: dict[str, Any]) -> str:
    return f"{shown_name(claim['connector'])}: claimed by {claim['owner']!r}, epoch {claim['epoch']}"


def run_claim(args: argparse.Namespace) -> int:
    connector_name(args.name)
    with OffsetsClient(args.settings.url) as client:
        claim = client.claim(args.name, args.owner, force=args.force)
    emit(args, claim, lambda: _text(claim) + f"\nwrite with: --claim-epoch {claim['epoch']}")
    return EXIT_OK


def run_show(args: argparse.Namespace) -> int:
    if args.name is None:
        return run_list(args)
    connector_name(args.name)
    with OffsetsClient(args.settings.url) as client:
        claim = client.current_claim(args.name)
    emit(args, claim, lambda: _text(claim) if claim else f"{shown_name(args.name)}: not claimed")
    return EXIT_OK


def run_list(args: argparse.Namespace) -> int:
    """Every current claim (``GET /claims``), one line each; ``--json``: the list as the daemon answers it."""
    with OffsetsClient(args.settings.url) as client:
        claims = client.claims()
    emit(args, claims, lambda: "\n".join(_text(claim) for claim in claims) if claims else "(no claims)")
    return EXIT_OK


def run_release(args: argparse.Namespace) -> int:
    connector_name(args.name)
    with OffsetsClient(args.settings.url) as client:
        client.release(args.name, args.epoch)
    emit(args, {"released": True}, lambda: f"{shown_name(args.name)}: claim with epoch {args.epoch} released")
    return EXIT_OK
