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
reloads at once (``emulator.server.auth.reload``). A reload that fails keeps the credentials
already in force and logs why; at startup the same failure stops the daemon.
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
    """A credentials, tokens or scopes file that cannot be used; the message names the file."""


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


def load(files: CredentialFiles) -> KnownPrincipals:
    users: dict[str, str] = {}
    tokens: list[StoredToken] = []
    scopes: dict[str, tuple[str, ...]] | None = None
    if files.credentials is not None:
        users = _load_users(files.credentials)
    if files.tokens is not None:
        tokens = _load_tokens(files.tokens)
    if files.scopes is not None:
        scopes = _load_scopes(files.scopes)
    return KnownPrincipals(users, tuple(tokens), scopes)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CredentialsError(f"cannot read the {what} {path}: {exc.strerror or exc}") from exc


def _load_users(path: Path) -> dict[str, str]:
    try:
        users = parse_properties(_read(path, "credentials file (--credentials-file)"))
    except PropertiesError as exc:
        raise CredentialsError(f"credentials file {path}: {exc}") from exc
    if not users:
        raise CredentialsError(
            f"credentials file {path} lists no user: Connect would then let every request in, the daemon refuses "
            "to. Add user=password lines, or leave --credentials-file out"
        )
    return users


def _load_tokens(path: Path) -> list[StoredToken]:
    text = _read(path, "tokens file (--tokens-file)").decode("utf-8", "replace")
    try:
        tokens = parse_tokens_file(text)
    except TokensFileError as exc:
        raise CredentialsError(f"tokens file {path}: {exc}") from exc
    if not tokens:
        raise CredentialsError(
            f"tokens file {path} lists no token: add lines from `connect-offsets token mint`, "
            "or leave --tokens-file out"
        )
    return tokens


def _load_scopes(path: Path) -> dict[str, tuple[str, ...]]:
    try:
        document = tomllib.loads(_read(path, "scopes file (--scopes-file)").decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CredentialsError(f"scopes file {path} is not TOML: {exc}") from exc
    unknown = set(document) - {"scopes"}
    table = document.get("scopes", {})
    if unknown or not isinstance(table, dict):
        raise CredentialsError(f'scopes file {path}: expected one [scopes] table of name = ["scope", ...]')
    scopes: dict[str, tuple[str, ...]] = {}
    for name, listed in table.items():
        if not isinstance(listed, list) or not all(isinstance(s, str) for s in listed):
            raise CredentialsError(f'scopes file {path}: {name!r} must be a list of scopes, e.g. ["read:orders-*"]')
        try:
            scopes[name] = parse_scopes(listed)
        except ScopeError as exc:
            raise CredentialsError(f"scopes file {path}, {name!r}: {exc}") from exc
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

    @property
    def current(self) -> KnownPrincipals:
        return self._current

    def reload(self) -> bool:
        """Read every file again; True if the new reading is in force."""
        with self._lock:
            signature = _signature(self.files.paths())
            try:
                loaded = load(self.files)
            except CredentialsError as exc:
                self._signature = signature  # do not retry the same broken file every poll
                self.last_error = str(exc)
                log.error("credentials not reloaded, the previous ones stay in force: %s", exc)
                return False
            self._current, self._signature, self.last_error = loaded, signature, None
            self.reloads += 1
        log.info(
            "credentials reloaded: %d user(s), %d token(s), %s",
            len(loaded.users),
            len(loaded.tokens),
            "no scopes file" if loaded.scopes is None else f"{len(loaded.scopes)} scoped name(s)",
        )
        return True

    def reload_if_changed(self) -> bool:
        if _signature(self.files.paths()) == self._signature:
            return False
        return self.reload()
