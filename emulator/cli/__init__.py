"""``connect-offsets``: the command line (one module per command group)."""

from emulator.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
