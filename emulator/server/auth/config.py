"""The security settings taken together: what the daemon enforces, and what it refuses to start with.

The one rule that needs all of them at once lives in ``Settings`` (listening beyond loopback
without authentication needs ``--insecure-no-auth``); here the files are loaded, so an empty
credentials file or an unreadable certificate stops the daemon with one line before it listens.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from emulator.server.auth.authenticate import Authenticator
from emulator.server.auth.credentials import (
    CredentialFiles,
    CredentialsError,
    CredentialStore,
    empty_password_warning,
)
from emulator.server.auth.hosts import HostRule, is_ip_literal
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

    ip_literal_hosts: bool = False
    """``Host`` may also be any IP address (``ip_literal_hosts``)."""
    metrics_host: str | None = None
    """``--metrics-host`` when ``--metrics-port`` is given."""

    def warnings(self, name_users: bool = True) -> list[str]:
        """What weakens the daemon's protection, for the log at start and for ``/status``;
        ``name_users`` False for ``/status``: any authenticated principal reads it, and the name of
        a user with an empty password is all one needs to log in as that user."""
        found = []
        store = self.authenticator.store
        if store is not None:
            empty_passwords = empty_password_warning(store.files, store.current, name_users)
            if empty_passwords is not None:
                found.append(empty_passwords)
        if self.metrics_host is not None and not is_loopback(self.metrics_host):
            found.append(
                f"--metrics-host {self.metrics_host}: the metrics port listens beyond loopback without "
                "authentication; anyone who reaches it reads metrics naming every connector, topic and consumer "
                "group"
            )
        open_port = self.insecure_no_auth and self.beyond_loopback
        if open_port:
            found.append(
                "--insecure-no-auth: the daemon listens beyond loopback without authentication; anyone who "
                "reaches its port can rewrite the offsets every Connect task resumes from"
            )
        if self.authenticator.enabled:
            return found  # a rebound page, or another site's, has no credentials to send
        # Beyond loopback, no list at all (an in-process app) means any host; on loopback, the default names.
        hosts = self.allowed_hosts if self.allowed_hosts is not None else ("*",) if open_port else ()
        if "*" in hosts:
            found.append(
                "--allowed-hosts accepts any Host header without authentication: through DNS rebinding, any web "
                "page opened in a browser that reaches this port can rewrite offsets (its requests are then "
                "same-origin, so the cross-site request checks pass them); list the names clients use, or turn "
                "authentication on"
            )
        elif open_port and self.ip_literal_hosts:
            found.append(
                "the Host header must be an IP address or one of this machine's names "
                f"({', '.join(self.allowed_hosts or ())}), against DNS rebinding (a web page rewriting offsets "
                "through a browser); give --allowed-hosts with the names clients use to reach the daemon"
            )
        if "*" in self.cors_origins:
            found.append(
                "--cors-origins '*' without authentication: any web site opened in a browser that reaches this "
                "port can read every connector's offsets (its writes stay refused); list the origins of your own "
                "UIs, or turn authentication on"
            )
        return found

    def describe(self) -> dict[str, object]:
        """The ``security`` section of ``/status``."""
        described: dict[str, object] = {
            "authentication": self.authenticator.mechanisms() or ["none"],
            "tls": self.tls,
            "insecure_no_auth": self.insecure_no_auth,
            "warnings": self.warnings(name_users=False),
        }
        store = self.authenticator.store
        if store is not None:
            described["credentials"] = {
                "reloads": store.reloads,
                "skipped": store.skipped,
                "last_error": store.last_error,
            }
        return described


def allowed_hosts(settings: Settings, host: str | None = None, authenticates: bool | None = None) -> tuple[str, ...]:
    """``--allowed-hosts``; else the loopback names when bound to loopback; else, beyond loopback
    with authentication, any host (a rebound page has no credentials); else (``--insecure-no-auth``)
    the loopback names and this machine's own names, and IP addresses (``ip_literal_hosts``): a
    rebound page's requests are same-origin, and would otherwise write offsets unauthenticated.

    ``host`` and ``authenticates``: of another port than the API's (the metrics port: its
    ``--metrics-host``, never authenticated)."""
    host = settings.host if host is None else host
    authenticates = settings.authenticates if authenticates is None else authenticates
    if settings.allowed_hosts:
        return settings.allowed_hosts
    if is_loopback(host):
        return tuple(dict.fromkeys((*LOOPBACK_NAMES, host.strip("[]").lower())))
    if authenticates:
        return ("*",)
    own = [socket.gethostname(), socket.getfqdn()]
    if not is_ip_literal(host.strip("[]")):
        own.append(host)
    return tuple(dict.fromkeys(n.strip().lower() for n in (*LOOPBACK_NAMES, *own) if n.strip()))


def ip_literal_hosts(settings: Settings, host: str | None = None, authenticates: bool | None = None) -> bool:
    """Are IP addresses accepted as ``Host`` beside ``allowed_hosts``? When the names are this
    machine's own (no ``--allowed-hosts``, no authentication, beyond loopback)."""
    host = settings.host if host is None else host
    authenticates = settings.authenticates if authenticates is None else authenticates
    return not settings.allowed_hosts and not is_loopback(host) and not authenticates


def metrics_host_rule(settings: Settings) -> HostRule:
    """The metrics port's ``Host`` check: the API's rule for an unauthenticated port on ``--metrics-host``."""
    host = settings.metrics_host
    return HostRule.of(allowed_hosts(settings, host, False), ip_literal_hosts(settings, host, False))


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
        ip_literal_hosts(settings),
        settings.metrics_host if settings.metrics_port is not None else None,
    )
