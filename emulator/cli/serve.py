"""``connect-offsets serve``: the daemon."""

from __future__ import annotations

import argparse
import faulthandler
import os
import time
from typing import Any

from emulator.cli.common import EXIT_OK, EXIT_USAGE, say
from emulator.server.options import add_options, sources_named
from emulator.server.permissions import restrict_umask
from emulator.server.settings import Settings


def register(sub: Any) -> None:
    parser = sub.add_parser("serve", help="run the daemon (embedded log unless --bootstrap-servers is given)")
    add_options(parser, Settings)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Startup failures that are the user's to fix (storage refused, a missing topic, a port in
    use) are one line on stderr and exit 2, whatever the log handlers do with the rest."""
    from emulator.server.listen import ListenError, listen_early

    settings: Settings = args.settings
    # Before anything is created: the daemon's data and files are its user's alone (0700, 0600).
    # Nothing the daemon writes is meant for other users; exports are other commands' processes.
    restrict_umask()
    # Listening before the heavy imports below: a client connecting during the start waits for its
    # answer instead of being refused (emulator.server.listen.listen_early).
    early = listen_early(settings.host, settings.port)
    bound_at = time.monotonic()  # the starting server's grace counts from here (emulator.server.starting)
    from emulator.model.errors import OffsetsError
    from emulator.server.wiring import serve

    # A native crash in one of our threads (SQLite, an extension module) would end the process
    # without a word in its log; this prints "Fatal Python error: Segmentation fault" and every
    # Python thread's stack on stderr first. (librdkafka's own threads block signals: a crash there
    # still ends the process silently, with signal 11; docs/operations.md, "Faults".)
    faulthandler.enable(all_threads=True)
    try:
        serve(settings, early, warnings=getattr(args, "env_warnings", ()), bound_at=bound_at)
    except OffsetsError as exc:
        say("error", _named(exc.message, args))
        return EXIT_USAGE
    except ListenError as exc:
        say("error", _named(str(exc), args))
        return EXIT_USAGE
    return EXIT_OK


def _named(message: str, args: argparse.Namespace) -> str:
    """A startup refusal that names a flag (``choose another --port``) also names the variable the
    value came from, as a refused setting does (``emulator.server.options.sources_named``).

    The storage's own refusals name a directory, not the setting that chose it (the embedded log and
    the archive are also opened by other commands and by the library): an operator who never typed
    ``--data-dir`` is told which setting to change, and where it came from."""
    return sources_named(_directory_named(message, args.settings), Settings, args, os.environ)


def _directory_named(message: str, settings: Settings) -> str:
    """Only a refusal of the directory itself (``data directory /srv/x is not a directory``,
    ``history directory …``): a full disk under it or a file of another owner in it is not the
    setting's fault, and their messages already say what to do."""
    if any(flag in message for flag in ("--data-dir", "--history-dir")):
        return message
    if f"history directory {settings.history_root}" in message:
        if settings.history_dir is not None:
            return f"--history-dir: {message}"
        return f"--data-dir: {message}; the history is kept under <data-dir>/history unless --history-dir moves it"
    if f"data directory {settings.data_dir.absolute()}" in message:
        return f"--data-dir: {message}"
    return message
