"""Credentials → ``Principal``: HTTP Basic (Connect's scheme), bearer tokens, TLS client certificates.

An ``Authorization`` header wins over a client certificate: a service that holds both presents
the identity it chose. Credentials that are present but wrong are refused (401) on every route,
public ones included, so a typo never passes silently as anonymous. Without any credentials the
principal is anonymous; whether that may pass is the route's rule (``emulator.server.auth.policy``).

Basic follows Connect's ``JaasBasicAuthFilter``: the scheme is case-insensitive, the user name ends
at the first ``:`` and must not be empty, the rest is the password (UTF-8). Passwords and tokens
are compared through their SHA-256 with ``hmac.compare_digest``, and an unknown user costs the same
comparison as a known one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from emulator.model.errors import Unauthenticated
from emulator.model.principal import ANONYMOUS_NAME, Principal
from emulator.server.auth import tokens
from emulator.server.auth.credentials import ADMIN_WITHOUT_SCOPES_FILE, CredentialStore

REALM = "connect-offsets"
REFUSED = "User cannot access the resource."
"""Connect's own text for a refused login (``JaasBasicAuthFilter``), kept for Connect's clients."""

_UNUSED = hashlib.sha256(b"\0unknown user\0").digest()


class Authenticator:
    """``store`` None and ``mtls`` False: authentication is off, every request is an anonymous admin
    (the daemon then listens on loopback only, or was started with ``--insecure-no-auth``)."""

    def __init__(self, store: CredentialStore | None = None, mtls: bool = False) -> None:
        self.store = store
        self.mtls = mtls

    @property
    def enabled(self) -> bool:
        return self.store is not None or self.mtls

    def mechanisms(self) -> list[str]:
        known = self.store.current if self.store is not None else None
        found = []
        if known is not None and known.users:
            found.append("basic")
        if known is not None and known.tokens:
            found.append("token")
        if self.mtls:
            found.append("mtls")
        return found

    def challenges(self) -> tuple[str, ...]:
        mechanisms = self.mechanisms()
        offered = []
        if "basic" in mechanisms:
            offered.append(f'Basic realm="{REALM}", charset="UTF-8"')
        if "token" in mechanisms:
            offered.append(f'Bearer realm="{REALM}"')
        return tuple(offered)

    def principal(self, authorization: str | None, certificate_subject: str | None, remote: str | None) -> Principal:
        """Who sent the request; raises ``Unauthenticated`` for credentials that do not hold."""
        if not self.enabled:
            return Principal(ANONYMOUS_NAME, "none", ADMIN_WITHOUT_SCOPES_FILE, remote)
        if authorization:
            return self._from_header(authorization, remote)
        if certificate_subject is not None and self.mtls:
            return Principal(certificate_subject, "mtls", self._scopes_of(certificate_subject), remote)
        return Principal(ANONYMOUS_NAME, "none", (), remote)

    def refused(self, why: str) -> Unauthenticated:
        return Unauthenticated(f"{REFUSED} ({why})", self.challenges())

    def _scopes_of(self, name: str) -> tuple[str, ...]:
        return self.store.current.scopes_of(name) if self.store is not None else ADMIN_WITHOUT_SCOPES_FILE

    def _from_header(self, header: str, remote: str | None) -> Principal:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() == "basic":
            return self._basic(value.strip(), remote)
        if scheme.lower() == "bearer":
            return self._bearer(value.strip(), remote)
        raise self.refused(f"unsupported authorization scheme {scheme[:20]!r}")

    def _basic(self, value: str, remote: str | None) -> Principal:
        users = self.store.current.users if self.store is not None else {}
        if not users:
            raise self.refused("Basic authentication is not enabled on this daemon")
        try:
            decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            raise self.refused("malformed Basic credentials") from None
        user, sep, password = decoded.partition(":")
        if not sep or not user:
            raise self.refused("malformed Basic credentials: no user name before ':'")
        stored = users.get(user)
        expected = hashlib.sha256(stored.encode("utf-8", "surrogatepass")).digest() if stored is not None else _UNUSED
        given = hashlib.sha256(password.encode("utf-8", "surrogatepass")).digest()
        if not hmac.compare_digest(expected, given) or stored is None:
            raise self.refused("wrong user name or password")
        return Principal(user, "basic", self._scopes_of(user), remote)

    def _bearer(self, value: str, remote: str | None) -> Principal:
        known = self.store.current.tokens if self.store is not None else ()
        if not known:
            raise self.refused("bearer tokens are not enabled on this daemon")
        found = tokens.find(known, value)
        if found is None:
            raise self.refused("unknown token")
        return Principal(found.name, "token", found.scopes, remote)
