"""Data source options as Spark hands them over (strings), checked with messages that name the option."""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from emulator.client.credentials import Credentials, CredentialsError
from emulator.client.defaults import DEFAULT_URL
from emulator.client.errors import ApiError, UnaddressableConnector
from emulator.client.retry_window import EXPECTED, parse_retry_for_s
from emulator.model.connectors import control_characters
from emulator.spark.committer import DaemonOffsets

log = logging.getLogger(__name__)


class OptionError(ValueError):
    """A data source option is missing or malformed."""


def daemon_url(options: Mapping[str, str]) -> str:
    return options.get("url") or os.environ.get("CONNECT_OFFSETS_URL") or DEFAULT_URL


def daemon_credentials(options: Mapping[str, str]) -> Credentials:
    """Options ``token``, ``user``/``password``, ``ca``, ``clientCert``/``clientKey``, each
    falling back to its ``CONNECT_OFFSETS_*`` variable (``emulator.client.credentials``)."""
    try:
        return Credentials.from_options(options)
    except CredentialsError as exc:
        raise OptionError(str(exc)) from exc


def daemon_retry_for(options: Mapping[str, str]) -> float | None:
    """Option ``retryFor``: how long the query's start keeps asking a daemon that cannot answer now
    (restoring a big log after a restart); None: the process default (``CONNECT_OFFSETS_RETRY_FOR``
    in the driver's environment, else 30 s: ``emulator.client.retry_window``)."""
    raw = options.get("retryFor")
    if raw is None or raw == "":
        return None
    try:
        return parse_retry_for_s(raw)
    except ValueError:
        raise OptionError(f"option retryFor must be {EXPECTED}, got {raw!r}") from None


@dataclass(frozen=True)
class DaemonAccess:
    """Where a source's daemon is and how to ask it, resolved once from its options (``url``,
    credentials, ``retryFor``, each falling back to its ``CONNECT_OFFSETS_*`` variable) so that
    every source, and the history rows, resolve them alike."""

    url: str
    credentials: Credentials
    retry_for_s: float | None

    @classmethod
    def of(cls, options: Mapping[str, str]) -> DaemonAccess:
        return cls(daemon_url(options), daemon_credentials(options), daemon_retry_for(options))

    def offsets(self) -> DaemonOffsets:
        return DaemonOffsets(self.url, credentials=self.credentials, retry_for_s=self.retry_for_s)


def int_option(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise OptionError(f"option {name} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise OptionError(f"option {name} must be >= {minimum}, got {value}")
    return value


def bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, got {raw!r}")


ACCESS_OPTIONS = ("url", "token", "user", "password", "ca", "clientCert", "clientKey", "retryFor")
"""What every source takes to find and ask the daemon (``DaemonAccess``)."""


def only_known(options: Mapping[str, str], source: str, known: Iterable[str], prefix: str | None = None) -> None:
    """Refuse an option the source does not read: Spark passes options through without a word, so
    ``maxLinesPerTriger`` would silently read everything at once. Spark lower-cases option names;
    the message suggests the closest known one as documented."""
    names = {name.lower(): name for name in (*ACCESS_OPTIONS, *known)}
    for given in options:
        if given.lower() in names or (prefix is not None and given.lower().startswith(prefix)):
            continue
        close = difflib.get_close_matches(given.lower(), list(names), n=1)
        hint = f"; did you mean {names[close[0]]}?" if close else ""
        extra = f", and {prefix}* options" if prefix else ""
        raise OptionError(
            f"{source} has no option {given!r}{hint} (it takes {', '.join(sorted(names.values()))}{extra})"
        )


def skipped_for_its_name(exc: ApiError | UnaddressableConnector, name: str, source: str) -> bool:
    """Whether ``exc`` is the daemon refusing ``name`` in a URL for its control characters, or the
    client refusing to put it in one as it holds half a surrogate pair (``UnaddressableConnector``)
    (then a WARNING is logged): a source reading every connector skips that one and reads the
    others, since the name is in the log but no request may name it (as in Connect). The surrogate
    case failed the whole read, every connector's rows with it, once one such name was listed."""
    refused = exc.status == 400 and control_characters(name) if isinstance(exc, ApiError) else True
    if not refused:
        return False
    log.warning("%s: connector %r skipped: no request may name it (%s)", source, name, exc)
    return True
