"""The security settings taken together: what the daemon enforces, and what it refuses to start with.

The one rule that needs all of them at once lives in ``Settings`` (listening beyond loopback
without authentication needs ``--insecure-no-auth``); here the files are loaded, so an empty
credentials file or an unreadable certificate stops the daemon with one line before it listens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from emulator.server.auth.authenticate import Authenticator
from emulator.server.auth.credentials import CredentialFiles, CredentialsError, CredentialStore
from emulator.server.options import SettingsError
from emulator.server.settings import Settings, is_loopback

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class Security:
    authenticator: Authenticator = field(default_factory=Authenticator)
    allowed_hosts: tuple[str, ...] | None = None
    """Host header names (globs) served; None: any (in-process apps, tests)."""
    cors_origins: tuple[str, ...] = ()
    insecure_no_auth: bool = False
    tls: bool = False
    beyond_loopback: bool = False
    """Listening on a non-loopback address: there ``--insecure-no-auth`` opens the port to others (on
    loopback it changes nothing, so it warns of nothing)."""

    def warnings(self) -> list[str]:
        if self.insecure_no_auth and self.beyond_loopback:
            return [
                "--insecure-no-auth: the daemon listens beyond loopback without authentication; anyone who "
                "reaches its port can rewrite the offsets every Connect task resumes from"
            ]
        return []

    def describe(self) -> dict[str, object]:
        """The ``security`` section of ``/status``."""
        described: dict[str, object] = {
            "authentication": self.authenticator.mechanisms() or ["none"],
            "tls": self.tls,
            "insecure_no_auth": self.insecure_no_auth,
            "warnings": self.warnings(),
        }
        store = self.authenticator.store
        if store is not None:
            described["credentials"] = {
                "reloads": store.reloads,
                "skipped": store.skipped,
                "last_error": store.last_error,
            }
        return described


def allowed_hosts(settings: Settings) -> tuple[str, ...]:
    """``--allowed-hosts``, else the loopback names when bound to loopback, else any host."""
    if settings.allowed_hosts:
        return settings.allowed_hosts
    if is_loopback(settings.host):
        return tuple(dict.fromkeys((*LOOPBACK_NAMES, settings.host.strip("[]").lower())))
    return ("*",)


def build_security(settings: Settings) -> Security:
    files = CredentialFiles(settings.credentials_file, settings.tokens_file, settings.scopes_file)
    store: CredentialStore | None = None
    if files.paths():
        try:
            store = CredentialStore(files)
        except CredentialsError as exc:
            raise SettingsError(str(exc)) from None
    return Security(
        Authenticator(store, mtls=settings.tls_client_ca is not None),
        allowed_hosts(settings),
        settings.cors_origins or (),
        settings.insecure_no_auth,
        settings.tls_cert is not None,
        not is_loopback(settings.host),
    )
