"""What every client-side command shares: the daemon URL and credentials settings, output,
confirmation, and usage errors."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import select
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from emulator.client.credentials import ENV, Credentials, CredentialsError, use_default
from emulator.client.defaults import DEFAULT_URL
from emulator.client.errors import ApiError
from emulator.client.retry_window import (
    EXPECTED,
    TIMEOUT_EXPECTED,
    parse_retry_for_s,
    parse_timeout_s,
    use_default_retry_for,
    use_default_timeout,
)
from emulator.codec.shown import shown_json, shown_text
from emulator.codec.surrogates import printable
from emulator.server.options import HTTP_URL, OPTIONAL_TEXT, Kind, SettingsError, add_options, option

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
EXIT_ANSWER_LOST = 4
"""A write reached the daemon and its answer was lost, or the daemon said it may still land
(``write_outcome_unknown``): it may have been applied (not 3 or 1, which a script may take for
"nothing happened" and send again)."""
EXIT_CLOSED_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a command whose reader went away (``… | head``)."""
EXIT_INTERRUPTED = 130
"""128 + SIGINT: Ctrl-C, reported as a shell reports it, without a Python traceback."""
EXIT_OUTPUT_FAILED = 74
"""sysexits' EX_IOERR: the command's output could not be written to stdout (``> /dev/full``, a full disk)."""

CONNECTION = "connection to the daemon"
RETRY_WINDOW = Kind("duration", EXPECTED, parse_retry_for_s, "DURATION")
TIMEOUT = Kind("duration", TIMEOUT_EXPECTED, parse_timeout_s, "DURATION")


class UsageError(Exception):
    """Bad input from the command line (unreadable file, invalid JSON, bad option values)."""


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """The settings of every command that talks to a running daemon (declared like ``serve``'s).

    Resolving them makes their credentials the process's default for clients
    (``emulator.client.credentials.use_default``), so every command that builds a client carries
    them without passing them along."""

    url: str = option(DEFAULT_URL, HTTP_URL, "daemon URL", group=CONNECTION)
    token: str | None = option(
        None,
        OPTIONAL_TEXT,
        "bearer token (prefer the variable: a flag's value shows in the process list)",
        group=CONNECTION,
    )
    user: str | None = option(
        None,
        OPTIONAL_TEXT,
        "HTTP Basic user (Connect's credentials file); the password comes from CONNECT_OFFSETS_PASSWORD, "
        "else from a prompt",
        group=CONNECTION,
    )
    ca: str | None = option(
        None, OPTIONAL_TEXT, "PEM CA bundle that signed the daemon's certificate (https:// URLs)", group=CONNECTION
    )
    client_cert: str | None = option(
        None, OPTIONAL_TEXT, "PEM client certificate, for a daemon that requires mutual TLS", group=CONNECTION
    )
    client_key: str | None = option(
        None, OPTIONAL_TEXT, "PEM key of --client-cert (unset: inside the certificate file)", group=CONNECTION
    )
    retry_for: float | None = option(
        None,
        RETRY_WINDOW,
        "how long to keep asking a daemon that cannot answer now (still reading its log after a restart, "
        "or its log slow), where asking again is safe; 0: answer with its error at once; forever (or never): "
        "until it answers, however long (none and off are refused: they could mean either); unset: 30s. Given, "
        "a port nobody listens on yet (a daemon restarting) is asked again too",
        group=CONNECTION,
    )
    timeout: float | None = option(
        None,
        TIMEOUT,
        "how long to wait for each answer of a daemon that accepted the connection (one that hangs: exit 3 for a "
        "read; 4 for a write, which may have been applied); unset: 90s, for `status` 10s, for export, import and "
        "migrate 300s (there it also bounds reading a log to its end, and each write)",
        group=CONNECTION,
    )

    def __post_init__(self) -> None:
        use_default(self.credentials())
        use_default_retry_for(self.retry_for)
        use_default_timeout(self.timeout)

    @staticmethod
    def environment(args: argparse.Namespace, environ: Mapping[str, str]) -> Mapping[str, str]:
        """The environment these settings are resolved from: a ``--token`` or ``--user`` given on the
        command line wins over the other mechanism's variable (``--user bob`` with
        ``CONNECT_OFFSETS_TOKEN`` exported is bob), as every flag wins over its own; both flags given
        stays an error."""
        token_flag, user_flag = getattr(args, "token", None), getattr(args, "user", None)
        if (token_flag is None) == (user_flag is None):
            return environ
        other = ENV["user"] if token_flag is not None else ENV["token"]
        return {name: value for name, value in environ.items() if name != other}

    def credentials(self) -> Credentials:
        """The credentials these settings name; a Basic password is asked for when not in the
        environment (never a flag: it would show in the process list and the shell's history)."""
        password = None
        if self.user:
            password = os.environ.get(ENV["password"]) or _prompt(self.user)
        try:
            credentials = Credentials(self.token, self.user, password, self.ca, self.client_cert, self.client_key)
            credentials.verify()
        except CredentialsError as exc:
            # The flags of the files at fault, which ``resolve`` completes with the variable a path came from
            flags = " / ".join("--" + field.replace("_", "-") for field in exc.fields)
            raise SettingsError(f"{flags}: {exc}" if flags else str(exc)) from None
        return credentials


def _prompt(user: str) -> str:
    if not sys.stdin.isatty():
        raise SettingsError(f"--user {user}: no password (set {ENV['password']}, or run in a terminal to be asked)")
    return getpass.getpass(f"password for {user}: ")


def connector_name(text: str) -> str:
    """A connector name from the command line, or ``UsageError`` when it is not text a URL can carry.

    Python hands over command-line bytes that are not UTF-8 as lone surrogates (``surrogateescape``,
    ``emulator.codec.surrogates``), which no URL and no UTF-8 JSON can hold: say which bytes, once,
    instead of a traceback from the HTTP client. An empty name (``get ''``, an unset shell variable)
    names no connector: the request went to ``/connectors//offsets``, whose 404 blamed a wrong base
    path in the URL."""
    connector_not_empty(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        if _only_escaped(text):  # the bytes as given, and where the first bad one is
            shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            where = f"byte {len(text[: exc.start].encode('utf-8', 'surrogateescape'))}"
        else:
            shown, where = printable(text), f"character {exc.start}"
        raise UsageError(
            f"the connector name '{shown}' is not valid UTF-8 (at {where}); connector names are UTF-8 text: check the "
            "shell's quoting and the terminal's encoding"
        ) from None
    return text


def connector_not_empty(text: str, flag: str = "") -> str:
    """``text``, or ``UsageError`` when it is empty: it names no connector."""
    if not text:
        what = f"{flag} '' names no connector" if flag else "the connector name is empty"
        raise UsageError(f"{what}: name a connector (`connect-offsets list` lists them)")
    return text


def _only_escaped(text: str) -> bool:
    """True when every surrogate in ``text`` stands for a raw byte (``surrogateescape``'s U+DC80–U+DCFF)."""
    return all(not "\ud800" <= c <= "\udfff" or "\udc80" <= c <= "\udcff" for c in text)


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """``--url`` and credentials (resolved into ``args.settings``, a ``ClientSettings``) and ``--json``."""
    add_options(parser, ClientSettings)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


class OutputFailed(Exception):
    """Writing the command's output to stdout failed (not a closed pipe: ``BrokenPipeError`` is the
    reader going away); the command's own work is done by then."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error


def out(text: str) -> None:
    """Print ``text`` on stdout, flushed, so that a stdout that cannot take it (a full disk) fails here,
    as ``OutputFailed``, and not in the interpreter's last flush as a traceback. Its lines are the
    command's own layout; anything unprintable within them (a daemon's message, a name from the log)
    is escaped (``emulator.codec.shown.shown_text``), so that it cannot drive the terminal."""
    try:
        print(shown_text(text, lines=True))
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputFailed(exc) from exc


def emit(args: argparse.Namespace, data: Any, text: Callable[[], str]) -> None:
    out(json_text(data) if getattr(args, "json", False) else text())


def json_text(data: Any) -> str:
    """``data`` as indented JSON for stdout, with what ``json.dumps`` leaves raw (C1 controls such as
    CSI, bidirectional overrides, separators) as JSON escapes: the same JSON to a parser, and no
    terminal control to a person reading it. Every raw newline of ``json.dumps``'s output is its
    layout (inside strings it writes ``\\n``), so each line is escaped on its own."""
    return "\n".join(shown_json(line) for line in json.dumps(data, indent=2, ensure_ascii=False).split("\n"))


def say(label: str, text: object) -> None:
    """One line on stderr, ``label: text`` (``error``, ``warning``, ``note``, ``hint``, ``aborted``),
    ``text`` escaped (``emulator.codec.shown.shown_text``): error texts quote the daemon, the log and
    records, where a hostile writer may have put terminal controls. The one way the CLI says things
    on stderr."""
    print(f"{label}: {shown_text(str(text))}", file=sys.stderr)


def compact(value: Any) -> str:
    """A partition or an offset on one line, each unprintable character escaped (``emulator.codec.shown``)."""
    return shown_json(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))


def add_confirmation_option(parser: argparse.ArgumentParser) -> None:
    """``--yes``: for commands that change offsets, which otherwise ask on a terminal."""
    parser.add_argument(
        "--yes", action="store_true", help="change offsets without asking (scripts; required when stdin is no terminal)"
    )


class Declined(Exception):
    """The person at the terminal answered no: nothing was changed."""


class InterruptedBeforeWrite(KeyboardInterrupt):
    """Ctrl-C while a command only read its input, planned (its dry run) or asked ``[y/N]``: nothing
    was changed."""


class Hinted(Exception):
    """The daemon refused, and the CLI knows which of its own flags or commands answer that: printed
    as the daemon's error, then ``hint: …`` (the daemon speaks in API terms, ``claim_epoch=1``)."""

    def __init__(self, error: ApiError, hint: str) -> None:
        super().__init__(error.message)
        self.error = error
        self.hint = hint


_CTRL_C_CHECK_S = 0.2


def _answer_line() -> str:
    """The line typed at the question. Ctrl-C at a blocking ``readline`` is lost when its SIGINT lands
    between Python's last look for signals and the ``read`` call: the handler only flags it, and the
    read, begun after the signal, is never interrupted (the command then waited for ever; seen under
    load in tests/integration/test_cli_findings.py, 2 hangs in 36). Waiting in short ``select`` calls
    lets Python run the handler within ``_CTRL_C_CHECK_S``; a terminal in line mode is readable once a
    whole line is typed. Where ``select`` cannot wait on a terminal (Windows), it reads as before."""
    if os.name != "nt":
        while not select.select([sys.stdin], [], [], _CTRL_C_CHECK_S)[0]:
            pass
    return sys.stdin.readline()


def confirm(args: argparse.Namespace, question: str, plan: Callable[[], tuple[str, int]]) -> None:
    """Ask before a command changes offsets: show what would change (``plan`` answers the dry run's
    text and how many changes it holds), then ``question [y/N]``. ``--yes`` skips this; without a
    terminal to ask on, refuse rather than change offsets nobody confirmed. A plan that changes
    nothing needs no answer."""
    if getattr(args, "yes", False):
        return
    if not sys.stdin.isatty():
        raise UsageError(
            f"{question}? This changes offsets and there is no terminal to confirm on (stdin is not a terminal): "
            "pass --yes to go ahead, or --dry-run to see the change"
        )
    try:
        text, changes = plan()
        print(shown_text(text, lines=True), file=sys.stderr)
        if changes == 0:
            return
        sys.stderr.write(f"{question}? [y/N] ")
        sys.stderr.flush()
        answer = _answer_line()
    except KeyboardInterrupt:  # only the dry run was sent
        raise InterruptedBeforeWrite from None
    if answer.strip().lower() not in ("y", "yes"):
        raise Declined("nothing was changed")
