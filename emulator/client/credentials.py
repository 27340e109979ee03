"""What a client presents to a daemon that requires authentication, and which daemons it trusts.

Every client of this project (the sync and async clients, the history client, the
``OffsetBackingStore`` adapter, Spark's committers and listeners, transfers to ``http(s)://``,
the CLI) takes a ``Credentials``; left out, it is read from the environment, so a Spark job or a
CI step is configured without code:

=============================== ==================================================================
``CONNECT_OFFSETS_TOKEN``       a bearer token (``connect-offsets token mint``)
``CONNECT_OFFSETS_USER``        HTTP Basic user (Connect's credentials file) …
``CONNECT_OFFSETS_PASSWORD``    … and its password
``CONNECT_OFFSETS_CA``          PEM CA bundle that signed the daemon's certificate (``https://``)
``CONNECT_OFFSETS_CLIENT_CERT`` PEM client certificate for mutual TLS …
``CONNECT_OFFSETS_CLIENT_KEY``  … and its key (unset: inside the certificate file)
=============================== ==================================================================

``https://user:password@host`` URLs work too (httpx sends the URL's user as Basic credentials);
the clients never print the password back (``redact``).

A program that resolved its own settings (the CLI's ``--token``/``--user``/``--ca`` flags) makes
them the process's default with ``use_default``; clients built without credentials then use those
instead of the environment.
"""

from __future__ import annotations

import base64
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

ENV = {
    "token": "CONNECT_OFFSETS_TOKEN",
    "user": "CONNECT_OFFSETS_USER",
    "password": "CONNECT_OFFSETS_PASSWORD",
    "ca": "CONNECT_OFFSETS_CA",
    "client_cert": "CONNECT_OFFSETS_CLIENT_CERT",
    "client_key": "CONNECT_OFFSETS_CLIENT_KEY",
}


_OPTION_NAMES = {
    "token": "token",
    "user": "user",
    "password": "password",
    "ca": "ca",
    "client_cert": "clientCert",
    "client_key": "clientKey",
}


class CredentialsError(ValueError):
    """Credentials that cannot be used as given (both a token and a user, an unreadable CA, ...).

    ``fields`` are the ``Credentials`` fields at fault (``ca``, ``client_cert``, ``client_key``), so
    a caller names them as its user gave them: the CLI as ``--ca``, which it then says came from
    ``CONNECT_OFFSETS_CA`` when it did (``emulator.cli.common``)."""

    def __init__(self, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = fields


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a client presents, and which daemons it trusts: a bearer ``token`` or a Basic ``user`` and
    ``password`` (not both), a ``ca`` bundle for an ``https://`` daemon whose certificate the system does
    not trust, a ``client_cert`` (and ``client_key``, unless it is in the certificate file) for mutual
    TLS. All optional; ``from_env`` reads the ``CONNECT_OFFSETS_*`` variables above. Inconsistent fields
    raise ``CredentialsError`` (a ``ValueError``, not a ``ClientError``) when built, unreadable files
    when a client is built with them; the secrets never show in its ``repr``."""

    token: str | None = None
    user: str | None = None
    password: str | None = None
    ca: str | None = None
    client_cert: str | None = None
    client_key: str | None = None

    def __post_init__(self) -> None:
        if self.token and self.user:
            raise CredentialsError("give either a token or a user, not both")
        if self.client_key and not self.client_cert:
            raise CredentialsError("a client key needs its client certificate")

    def __repr__(self) -> str:  # never show a secret in a traceback or a log line
        shown = {k: ("***" if k in ("token", "password") else v) for k, v in self._fields().items() if v}
        return f"Credentials({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    def _fields(self) -> dict[str, str | None]:
        return {name: getattr(self, name) for name in ENV}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Credentials:
        env = os.environ if environ is None else environ
        return cls(**{name: (env.get(var) or None) for name, var in ENV.items()})

    @classmethod
    def from_options(cls, options: Mapping[str, str], environ: Mapping[str, str] | None = None) -> Credentials:
        """Data source options (``token``, ``user``, ``password``, ``ca``, ``clientCert``,
        ``clientKey``), each falling back to its environment variable."""
        env = cls.from_env(environ)
        given = {name: options.get(_OPTION_NAMES[name]) or None for name in ENV}
        return cls(**{name: given[name] or getattr(env, name) for name in ENV})

    def headers(self) -> dict[str, str]:
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.user:
            pair = f"{self.user}:{self.password or ''}".encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
        return {}

    def verify(self) -> ssl.SSLContext | bool:
        """httpx's ``verify``: True (the system's and certifi's CAs) unless a CA or a client
        certificate asks for a context of our own."""
        if not self.ca and not self.client_cert:
            return True
        if self.ca:
            try:
                context = ssl.create_default_context(cafile=self.ca)
            except (OSError, ssl.SSLError) as exc:
                raise CredentialsError(f"cannot load the CA bundle {self.ca}: {_why(exc)}", ("ca",)) from exc
        else:
            import certifi

            context = ssl.create_default_context(cafile=certifi.where())
        if self.client_cert:
            try:
                context.load_cert_chain(self.client_cert, self.client_key)
            except (OSError, ssl.SSLError) as exc:
                raise self._chain_error(exc) from exc
        return context

    def _chain_error(self, exc: OSError | ssl.SSLError) -> CredentialsError:
        """Which file failed: ``load_cert_chain``'s OSError does not say which of the two it could
        not open, so each is opened again to find out; what the two hold together (a key that is not
        the certificate's) names both."""
        given = [("client_cert", "client certificate", self.client_cert), ("client_key", "client key", self.client_key)]
        files = [(field, what, path) for field, what, path in given if path]
        if not isinstance(exc, ssl.SSLError):
            for field, what, path in files:
                try:
                    with open(path, "rb"):  # only whether it opens
                        pass
                except OSError as unreadable:
                    return CredentialsError(f"cannot read the {what} {path}: {_why(unreadable)}", (field,))
        if not self.client_key:
            return CredentialsError(
                f"cannot load the client certificate {self.client_cert}: {_why(exc)}; without a client key, the "
                "private key must be in the certificate file",
                ("client_cert",),
            )
        return CredentialsError(
            f"cannot load the client certificate {self.client_cert} with the key {self.client_key}: {_why(exc)}",
            ("client_cert", "client_key"),
        )


def _why(exc: OSError | ssl.SSLError) -> str:
    """An OSError's reason without its ``[Errno 2]`` prefix; an SSL error as OpenSSL words it."""
    if isinstance(exc, ssl.SSLError):
        return str(exc)
    return exc.strerror or str(exc)


_default: Credentials | None = None


def use_default(credentials: Credentials | None) -> None:
    """Make ``credentials`` what clients built without any use (None: the environment again)."""
    global _default
    _default = credentials


def default_credentials() -> Credentials:
    return _default if _default is not None else Credentials.from_env()


def redact(url: str) -> str:
    """``url`` without a password in it, for messages and reports."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
