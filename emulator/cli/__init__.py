"""``connect-offsets``: the command line (one module per command group).

``main`` is the console script. It makes ``SIGHUP`` harmless for ``serve`` before importing the
rest: the default action of ``SIGHUP`` ends the process, and the imports and parsing before the
daemon installs its own handler (``emulator.server.auth.reload``) took 1–1.6 s, in which a
supervisor's reload (``ExecReload=kill -HUP $MAINPID``) of a daemon just (re)started killed it
with exit 129 and nothing logged. What is left is the interpreter's own start.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Sequence
from typing import Any

_SIGHUP_BEFORE: Any = None
"""The ``SIGHUP`` disposition ``main`` replaced (None: it replaced none)."""


def main(argv: Sequence[str] | None = None) -> int:
    global _SIGHUP_BEFORE
    if "serve" in (sys.argv[1:] if argv is None else argv) and hasattr(signal, "SIGHUP"):
        with contextlib.suppress(ValueError):  # not the main thread: left as it is
            _SIGHUP_BEFORE = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    from emulator.cli.main import main as run

    return run(argv)


def restore_sighup() -> None:
    """Give ``SIGHUP`` back its disposition for a command that turned out not to be ``serve``
    (``connect-offsets get serve``: a connector named serve)."""
    global _SIGHUP_BEFORE
    if _SIGHUP_BEFORE is not None:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGHUP, _SIGHUP_BEFORE)
        _SIGHUP_BEFORE = None


def build_parser() -> Any:
    from emulator.cli.main import build_parser as build

    return build()


__all__ = ["build_parser", "main", "restore_sighup"]
