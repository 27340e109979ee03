"""The files that say who may use the daemon, loaded together and reloaded without a restart.

- ``--credentials-file``: Connect's ``PropertyFileLoginModule`` file (``user=password`` in
  ``java.util.Properties`` syntax), so the file a secured Connect REST API already uses works here
  unchanged. Unlike Connect, an empty file is refused: Connect lets everyone in then, silently.
- ``--tokens-file``: hashed bearer tokens with their scopes (``emulator.server.auth.tokens``).
- ``--scopes-file``: TOML, the scopes of Basic users and of TLS client-certificate subjects::

      [scopes]
      alice = ["admin"]
      "CN=spark-etl,O=Example" = ["write:orders-*", "claim:orders-*"]

  Without a scopes file every Basic user and every certificate the client CA signed is ``admin``:
  what a Connect credentials file means to Connect (whoever logs in may do everything). With one,
  a name it does not list is authenticated but may do nothing.

A file that changed (size, modification time or inode) is reloaded within seconds, and SIGHUP
reloads at once (``emulator.server.auth.reload``). At startup a file that cannot be used stops the
daemon. A reload fails closed instead: what the files now list is in force, so a removed line is
revoked whatever else the file holds. A bad line is left out (logged with file:line), an emptied
file grants nothing, and a deleted or unreadable one grants nothing until it is back (its path is
still watched); an unusable scopes file grants no scope (never "everyone is admin").
"""

from __future__ import annotations

import logging
import os
import threading
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from emulator.server.auth.properties import PropertiesError, parse_properties
from emulator.server.auth.scopes import ScopeError, parse_scopes
from emulator.server.auth.tokens import StoredToken, TokensFileError, parse_tokens_file

log = logging.getLogger(__name__)

ADMIN_WITHOUT_SCOPES_FILE: tuple[str, ...] = ("admin",)


class CredentialsError(ValueError):
    """A credentials, tokens or scopes file that cannot be used; the message names the file and its
    flag (the command line adds the variable when the path came from one: ``options.sources_named``)."""


_USERS = "credentials file (--credentials-file)"
_TOKENS = "tokens file (--tokens-file)"
_SCOPES = "scopes file (--scopes-file)"


@dataclass(frozen=True, slots=True)
class CredentialFiles:
    credentials: Path | None = None
    tokens: Path | None = None
    scopes: Path | None = None

    def paths(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.credentials, self.tokens, self.scopes) if p is not None)


@dataclass(frozen=True, slots=True)
class KnownPrincipals:
    """One consistent reading of the files, swapped whole on reload."""

    users: Mapping[str, str] = field(default_factory=dict)
    """Basic users → passwords (Connect's file keeps them in plain text)."""
    tokens: tuple[StoredToken, ...] = ()
    scopes: Mapping[str, tuple[str, ...]] | None = None
    """Scopes of Basic users and certificate subjects; None: no scopes file (everyone is admin)."""

    def scopes_of(self, name: str) -> tuple[str, ...]:
        return ADMIN_WITHOUT_SCOPES_FILE if self.scopes is None else self.scopes.get(name, ())

    def without_password(self) -> list[str]:
        """The Basic users whose password is empty: a line ``carol`` or ``carol=`` (Java's
        ``Properties``, so Connect's login module, reads it so), who log in with no password."""
        return sorted(user for user, password in self.users.items() if not password)


def empty_password_warning(files: CredentialFiles, known: KnownPrincipals, name_users: bool = True) -> str | None:
    """The warning for users of the credentials file with an empty password, None when there are
    none. Read as Connect reads the file (it admits them too), so said, not refused. ``name_users``
    False: their number only (``/status``, which any authenticated principal reads: the names are
    all one needs to log in as them); never their passwords, which are empty anyway."""
    empty = known.without_password()
    if not empty:
        return None
    who = (
        f"user(s) {', '.join(repr(user) for user in empty)} have"
        if name_users
        else f"{len(empty)} user(s) (named in the daemon's log) have"
    )
    scopes = (
        "as admin (there is no --scopes-file)" if known.scopes is None else "with the scopes the scopes file gives them"
    )
    return (
        f"credentials file {files.credentials}: {who} an empty password (a line without one, which Connect "
        f"reads the same way): anyone who sends such a user name and no password is let in, {scopes}; give "
        "each a password, or remove its line"
    )


@dataclass(slots=True)
class Report:
    """What a lenient reading (a reload) left out or found missing, each naming its file and line."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load(files: CredentialFiles, report: Report | None = None) -> KnownPrincipals:
    """Read every file. Strict without ``report`` (the start: any problem raises ``CredentialsError``,
    an operator is there to fix it). With one (a reload), fail closed: what each file now lists is
    in force, a bad line or entry is left out, an empty file grants nothing, and a missing or
    unreadable one grants nothing until it can be read; each is described in ``report``."""
    users: dict[str, str] = {}
    tokens: list[StoredToken] = []
    scopes: dict[str, tuple[str, ...]] | None = None
    if files.credentials is not None:
        users = _load_users(files.credentials, report)
    if files.tokens is not None:
        tokens = _load_tokens(files.tokens, report)
    if files.scopes is not None:
        scopes = _load_scopes(files.scopes, report)
    return KnownPrincipals(users, tuple(tokens), scopes)


def _read(path: Path, what: str, report: Report | None, grants: str) -> bytes | None:
    """The file's bytes; None (reported) when a reload cannot read it: then it grants nothing."""
    try:
        return path.read_bytes()
    except OSError as exc:
        why = exc.strerror or str(exc)
        if report is None:
            raise CredentialsError(f"cannot read the {what} {path}: {why}") from exc
        report.errors.append(f"cannot read the {what} {path}: {why}; {grants} until it can be read (it is watched for)")
        return None


def _skipped(report: Report, what: str, path: Path, skipped: list[tuple[int, str]]) -> None:
    report.errors.extend(f"{what} {path}:{number}: {why}; line skipped" for number, why in skipped)


def _load_users(path: Path, report: Report | None = None) -> dict[str, str]:
    data = _read(path, _USERS, report, "no Basic user is accepted")
    if data is None:
        return {}
    skipped: list[tuple[int, str]] = []
    try:
        users = parse_properties(data, None if report is None else skipped)
    except PropertiesError as exc:
        raise CredentialsError(f"{_USERS} {path}: {exc}") from exc
    if report is not None:
        _skipped(report, "credentials file", path, skipped)
        if not users:
            report.warnings.append(f"credentials file {path} lists no user: no Basic user is accepted")
    elif not users:
        raise CredentialsError(
            f"credentials file {path} lists no user: Connect would then let every request in, the daemon refuses "
            "to. Add user=password lines, or leave --credentials-file out"
        )
    return users


def _load_tokens(path: Path, report: Report | None = None) -> list[StoredToken]:
    data = _read(path, _TOKENS, report, "no token is accepted")
    if data is None:
        return []
    skipped: list[tuple[int, str]] = []
    try:
        tokens = parse_tokens_file(data.decode("utf-8", "replace"), None if report is None else skipped)
    except TokensFileError as exc:
        raise CredentialsError(f"{_TOKENS} {path}: {exc}") from exc
    if report is not None:
        _skipped(report, "tokens file", path, skipped)
        if not tokens:
            report.warnings.append(f"tokens file {path} lists no token: no token is accepted")
    elif not tokens:
        raise CredentialsError(
            f"tokens file {path} lists no token: add lines from `connect-offsets token mint`, "
            "or leave --tokens-file out"
        )
    return tokens


def _load_scopes(path: Path, report: Report | None = None) -> dict[str, tuple[str, ...]]:
    """On a reload, a scopes file that cannot be read or parsed grants no scope to anyone: without
    it everyone would be admin, so it never counts as absent."""
    data = _read(path, _SCOPES, report, "no Basic user or certificate subject has a scope")
    if data is None:
        return {}

    def refuse(message: str) -> dict[str, tuple[str, ...]]:
        if report is None:
            raise CredentialsError(message)
        report.errors.append(f"{message}; no Basic user or certificate subject has a scope until it is fixed")
        return {}

    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return refuse(f"{_SCOPES} {path} is not TOML: {exc}")
    unknown = set(document) - {"scopes"}
    table = document.get("scopes", {})
    if unknown or not isinstance(table, dict):
        return refuse(f'{_SCOPES} {path}: expected one [scopes] table of name = ["scope", ...]')
    scopes: dict[str, tuple[str, ...]] = {}
    for name, listed in table.items():
        try:
            if not isinstance(listed, list) or not all(isinstance(s, str) for s in listed):
                raise CredentialsError(f'{_SCOPES} {path}: {name!r} must be a list of scopes, e.g. ["read:orders-*"]')
            try:
                scopes[name] = parse_scopes(listed)
            except ScopeError as exc:
                raise CredentialsError(f"{_SCOPES} {path}, {name!r}: {exc}") from exc
        except CredentialsError as exc:
            if report is None:
                raise
            report.errors.append(f"{exc}; {name!r} has no scope")
    return scopes


def _signature(paths: tuple[Path, ...]) -> tuple[tuple[int, int, int] | None, ...]:
    signature: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            signature.append(None)
        else:
            signature.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(signature)


class CredentialStore:
    """The principals in force; ``reload`` and ``reload_if_changed`` are blocking (file reads):
    call them off the event loop."""

    def __init__(self, files: CredentialFiles) -> None:
        self.files = files
        self._lock = threading.Lock()
        self._signature = _signature(files.paths())
        self._current = load(files)
        self.last_error: str | None = None
        self.reloads = 0
        self.skipped = 0
        """Problems of the last reload (lines or entries left out, files that could not be read)."""

    @property
    def current(self) -> KnownPrincipals:
        return self._current

    def reload(self) -> bool:
        """Read every file again and put what they now list in force, failing closed (``load``
        with a report): a revoked token or user never outlives a reload. True if every line
        was read; else the problems are logged as errors and kept in ``last_error``."""
        with self._lock:
            signature = _signature(self.files.paths())
            report = Report()
            loaded = load(self.files, report)
            self._current, self._signature = loaded, signature
            self.last_error = "; ".join(report.errors) or None
            self.skipped = len(report.errors)
            self.reloads += 1
        for error in report.errors:
            log.error("credentials reloaded without: %s", error)
        for warning in report.warnings:
            log.warning("credentials reloaded: %s", warning)
        empty_passwords = empty_password_warning(self.files, loaded)
        if empty_passwords is not None:
            log.warning("credentials reloaded: %s", empty_passwords)
        log.info(
            "credentials reloaded: %d user(s), %d token(s), %s",
            len(loaded.users),
            len(loaded.tokens),
            "no scopes file" if loaded.scopes is None else f"{len(loaded.scopes)} scoped name(s)",
        )
        if (self.files.credentials or self.files.tokens) and not loaded.users and not loaded.tokens:
            log.error("credentials reloaded: no user and no token is in force; only client certificates (if any) are")
        return not report.errors

    def reload_if_changed(self) -> bool:
        if _signature(self.files.paths()) == self._signature:
            return False
        return self.reload()
