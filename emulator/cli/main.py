"""``connect-offsets``: run the daemon, or operate on offsets through a running daemon.

Human-readable tables by default, ``--json`` for scripts; errors are one clear line on stderr
with a non-zero exit code (1 = the daemon refused, 2 = bad usage or input, 3 = daemon unreachable,
4 = a write reached the daemon and its answer was lost: it may have been applied, 74 = the output
could not be written to stdout).
Command groups are the other modules of ``emulator.cli``; add one and list it, with the commands it
registers, in ``COMMAND_GROUPS``. A command loads only its own group (``serve`` never imports the HTTP
client, the transfers or Spark's modules: they cost every daemon start 0.1–0.2 s); ``--help``, and a
command line naming none, load them all.

A command's settings (flags backed by ``CONNECT_OFFSETS_*`` variables, see
``emulator.server.options``) are parsed after the command line, so a bad environment value is a
usage error of the command that reads it and never breaks ``--help``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from emulator.cli import restore_sighup
from emulator.cli.common import (
    EXIT_ANSWER_LOST,
    EXIT_CLOSED_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT_FAILED,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Declined,
    Hinted,
    InterruptedBeforeWrite,
    OutputFailed,
    UsageError,
    say,
)
from emulator.cli.environment import unknown_variable_warnings
from emulator.client.errors import OUTCOME_UNKNOWN, AnswerLost, ApiError, AuthenticationError, DaemonUnavailable
from emulator.codec.shown import shown_text
from emulator.server.options import SettingsError, resolve, sources_named

COMMAND_GROUPS: dict[str, tuple[str, ...]] = {
    "emulator.cli.serve": ("serve",),
    "emulator.cli.offsets": ("list", "get", "alter", "reset"),
    "emulator.cli.claims": ("claim", "claims", "release"),
    "emulator.cli.status": ("status",),
    "emulator.cli.history": ("history", "rollback"),
    "emulator.cli.transfer": ("export", "import", "migrate"),
    "emulator.cli.compact": ("compact",),
    "emulator.cli.spark": ("spark-handoff",),
    "emulator.cli.tokens": ("token",),
}
"""Each command group's module and the commands its ``register`` adds (tests/unit/test_cli_imports.py
holds the two to each other), so that a command line is parsed with its command's module alone."""
COMMAND_NAMES = frozenset(name for names in COMMAND_GROUPS.values() for name in names)


class Parser(argparse.ArgumentParser):
    """Refuses abbreviated flags (``--bootstrap-server`` is not ``--bootstrap-servers``): a prefix
    that works today breaks the day a second flag shares it. Sub-parsers are of the same class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        self.command_names: frozenset[str] = frozenset()


def version() -> str:
    from importlib import metadata

    try:
        return metadata.version("connect-offsets-emulator")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """``--version``, whose package metadata (and ``importlib.metadata``) is read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        parser._print_message(f"{parser.prog} {version()}\n", sys.stdout)
        parser.exit()


def build_parser(command: str | None = None) -> Parser:
    """The whole command line; given the ``command`` being run, with only that command's group
    (``command_names`` still lists every command, so that ``command_first`` finds it the same way)."""
    parser = Parser(prog="connect-offsets", description="Kafka Connect offsets: daemon, and operations through it.")
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    for module, names in COMMAND_GROUPS.items():
        if command is None or command in names:
            importlib.import_module(module).register(sub)
    parser.command_names = COMMAND_NAMES
    return parser


def command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, as the parser will find it (``command_first``); None when it names
    none, or asks for the top level's ``--help`` or ``--version`` (which list every command)."""
    tokens = command_first(argv, COMMAND_NAMES)
    return tokens[0] if tokens and tokens[0] in COMMAND_NAMES else None


def command_first(argv: Sequence[str], commands: frozenset[str]) -> list[str]:
    """``connect-offsets --url U get NAME`` → ``connect-offsets get --url U NAME``.

    Every option belongs to a command (``--url``, ``--json``, credentials), but people write
    connection options first, as with kubectl or git; argparse would answer "invalid choice: 'U'".
    Options before the command move right after it, where the command's parser judges them (an
    option the command does not take is still refused, by name). ``--help``/``--version`` first
    keep their top-level meaning."""
    tokens = list(argv)
    for i, token in enumerate(tokens):
        if token in commands:
            if i == 0 or any(t in ("-h", "--help", "--version") for t in tokens[:i]):
                return tokens
            return [token, *tokens[:i], *tokens[i + 1 :]]
        if not token.startswith("-") and (i == 0 or not tokens[i - 1].startswith("-")):
            break  # a word that is neither an option nor an option's value: argparse reports it
    return tokens


def main(argv: Sequence[str] | None = None) -> int:
    _closed_standard_streams_to_devnull()
    _print_lone_surrogates_escaped()
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(command_named(argv))
    args, unknown = parser.parse_known_args(command_first(argv, parser.command_names))
    if unknown:  # said by the command's own parser, with its usage, not the top level's
        chosen(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command != "serve":
        _deep_enough_for_jackson()
    try:
        return _run(args)
    except BrokenPipeError:
        return _closed_pipe()
    except OutputFailed as exc:
        print(shown_text(_output_failed(args, exc)), file=sys.stderr)
        _stdout_to_devnull()  # the interpreter's last flush would fail again, with a traceback
        return EXIT_OUTPUT_FAILED
    except KeyboardInterrupt as exc:  # Ctrl-C: ``serve`` has shut down by then (uvicorn re-raises it after)
        before_write = isinstance(exc, InterruptedBeforeWrite)
        print(shown_text(_interrupted(args.command, before_write, getattr(exc, "detail", ""))), file=sys.stderr)
        if getattr(exc, "end_without_finalizing", False):  # emulator.server.starting.InterruptedWhileOpening
            _end_now(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED


_WAYS_IN = {
    "bearer": "a bearer token (--token, or CONNECT_OFFSETS_TOKEN)",
    "basic": "an HTTP Basic user (--user, or CONNECT_OFFSETS_USER, with the password in CONNECT_OFFSETS_PASSWORD)",
}
"""The CLI's way to give each scheme a daemon's 401 may challenge for (``WWW-Authenticate``)."""


CLIENT_RECURSION_LIMIT = 5000


def _deep_enough_for_jackson() -> None:
    """Let a client command parse what the daemon answers, whose records may nest as deep as Jackson
    reads (1,000 levels, docs/protocol.md §9.1) inside an answer's own few: Python's ``json`` stops at
    its recursion limit (1,000 frames less those in use), and ``history`` of a connector holding a
    990-level partition ended in a RecursionError traceback. Not ``serve``: the daemon's own code
    takes any depth without recursing, and its worker threads keep the interpreter's default."""
    if sys.getrecursionlimit() < CLIENT_RECURSION_LIMIT:
        sys.setrecursionlimit(CLIENT_RECURSION_LIMIT)


def _credentials_hint(args: argparse.Namespace, error: AuthenticationError) -> str:
    """After a 401: the daemon speaks of the request ("no credentials"), not of the CLI's flags. Only
    the ways its challenges name are offered (a daemon with tokens alone took a Basic user for a typo
    of the password, and the other way round); all of them when it named none (an older daemon)."""
    settings = getattr(args, "settings", None)
    offered = [way for scheme, way in _WAYS_IN.items() if scheme in error.schemes]
    ways = " or ".join(offered or _WAYS_IN.values())
    if offered and len(offered) < len(_WAYS_IN):
        ways = f"only {ways}"
    if getattr(settings, "token", None) or getattr(settings, "user", None):
        return f"the daemon did not accept the credentials given; it takes {ways}"
    return f"the daemon wants credentials: {ways}"


def _end_now(code: int) -> NoReturn:
    """Exit with everything logged and printed flushed, but without the interpreter's finalization: a
    thread still inside a C library is not stopped there (``InterruptedWhileOpening`` says why)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or failing stream: nothing more to say on it
            stream.flush()
    os._exit(code)


_WRITES = frozenset({"alter", "reset", "rollback", "import", "migrate", "claim", "release", "spark-handoff"})


def _interrupted(command: str, before_write: bool = False, detail: str = "") -> str:
    """A write interrupted after its request left is not undone by the interruption: say so, or a
    user would take "interrupted" for "nothing happened" and run it again on a changed state. At the
    ``[y/N]`` question (or during the dry run before it, or while a transfer read its source) nothing
    was sent that changes anything. A transfer interrupted while writing knows more: ``detail``
    (``emulator.transfer.errors.TransferInterrupted``) says how many records were written."""
    if before_write:
        return f"interrupted: `{command}` sent no change (only its dry run, if any): nothing was changed"
    if detail:
        return f"interrupted: `{command}` {detail}"
    if command not in _WRITES:
        return "interrupted"
    return (
        f"interrupted: what `{command}` had already sent may have been applied; "
        "check the destination (`connect-offsets get`, or a dry run) before running it again"
    )


def _closed_standard_streams_to_devnull() -> None:
    """A process started with stdout or stderr closed (``>&-``, some supervisors) has no
    ``sys.stdout``/``sys.stderr`` (None): ``serve`` exited 1 at once without a word (faulthandler
    refused a missing stderr), or ran and exited 1 on SIGTERM (writing its URL). Worse, the next
    file it opened (the SQLite log) would get descriptor 1 or 2, where a native library's message
    to stdout or stderr would land in the file. Each closed one is opened on /dev/null instead: the
    operator asked not to see it, and nothing else can take its place."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this very one
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
            setattr(sys, name, open(fd, mode, buffering=1, encoding="utf-8", closefd=False))  # noqa: SIM115


def _print_lone_surrogates_escaped() -> None:
    """A partition Connect wrote may hold half a surrogate pair (``emulator.codec.surrogates``),
    which a UTF-8 terminal cannot show: printed as ``\\ud800`` instead of a traceback mid-table."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost parser ``args`` went through (``token mint`` → mint's parser)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices.get(getattr(args, action.dest, None) or "")
            if sub is not None:
                return chosen(sub, args)
    return parser


def _closed_pipe() -> int:
    """``connect-offsets history --json | head``: the reader left, which is no error of ours. Point
    stdout at /dev/null so the interpreter's final flush does not fail again, and exit quietly."""
    _stdout_to_devnull()
    return EXIT_CLOSED_PIPE


def _stdout_to_devnull() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _output_failed(args: argparse.Namespace, exc: OutputFailed) -> str:
    """One line naming stdout and the error; after a write, that the write itself was done (its report
    is what was lost), so that nobody runs it again to see it."""
    line = f"error: cannot write the output to stdout: {exc}"
    if args.command in _WRITES and not getattr(args, "dry_run", False):
        return f"{line}; `{args.command}` itself succeeded (its change was made): only its report was lost"
    return line


class _EscapedFormatter(logging.Formatter):
    """A log record's text as ``say`` prints a line: escaped (``emulator.codec.shown.shown_text``)."""

    def format(self, record: logging.LogRecord) -> str:
        return shown_text(super().format(record))


def _log_warnings_escaped() -> None:
    """The clients' warnings (``asking again every 1 s …``, which quote the daemon's error message)
    reached stderr through logging's last-resort handler, raw: printed instead by a handler of the
    same level and format whose text is escaped. Only where nothing else handles the root logger (a
    command run from a shell; an embedding process or a test harness keeps its own handlers)."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(logging.WARNING)
        handler.setFormatter(_EscapedFormatter("%(message)s"))
        root.addHandler(handler)


def _warn(warnings: Sequence[str]) -> None:
    for warning in warnings:
        say("warning", warning)


def _run(args: argparse.Namespace) -> int:
    # Misspelt variables: the daemon logs them once its log is set up (a JSON log stays JSON), every
    # other command says so on stderr first; so does the daemon when its settings are refused.
    args.env_warnings = unknown_variable_warnings(os.environ)
    if args.command != "serve":
        restore_sighup()
        _log_warnings_escaped()
        _warn(args.env_warnings)
    try:
        settings_type = getattr(args, "settings_type", None)
        if settings_type is None:
            code: int = args.handler(args)
            return code
        environment = getattr(settings_type, "environment", None)  # the settings' say on which variables count
        environ = os.environ if environment is None else environment(args, os.environ)
        args.settings = resolve(settings_type, args, environ)
        try:
            code = args.handler(args)
        except SettingsError as exc:  # a file setting found unusable when used: named as resolve names its own
            raise SettingsError(sources_named(str(exc), settings_type, args, environ)) from None
        return code
    except SettingsError as exc:
        if args.command == "serve":
            _warn(args.env_warnings)
        say("error", exc)
        return EXIT_USAGE
    except DaemonUnavailable as exc:
        say("error", exc)
        return EXIT_UNREACHABLE
    except AnswerLost as exc:
        say("error", exc)
        return EXIT_ANSWER_LOST
    except ApiError as exc:
        if exc.not_a_daemon:  # another service answered: the daemon is not at the URL, as when nothing answers
            say("error", exc.message)
            return EXIT_UNREACHABLE
        say("error", f"{exc.message} (HTTP {exc.status})")
        if isinstance(exc, AuthenticationError):
            say("hint", _credentials_hint(args, exc))
        # The daemon handed the write to its log and got no acknowledgement in time: it may still land, as
        # when the answer is lost (1 told a script "refused: nothing changed", and it sent the write again).
        return EXIT_ANSWER_LOST if exc.kind == OUTCOME_UNKNOWN else EXIT_REFUSED
    except Hinted as exc:
        say("error", f"{exc.error.message} (HTTP {exc.error.status})")
        say("hint", exc.hint)
        return EXIT_REFUSED
    except UsageError as exc:
        say("error", exc)
        return EXIT_USAGE
    except Declined as exc:
        say("aborted", exc)
        return EXIT_REFUSED
