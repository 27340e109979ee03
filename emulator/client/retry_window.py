"""How long a client keeps asking a daemon that cannot answer now, before it gives up.

A daemon restarted beside its jobs answers ``not_ready`` with ``Retry-After`` until it has read its
log to the end: well under a second for a small log, minutes for millions of records on a slow
broker. The clients ask again for 30 s by default (``emulator.client.http``), which suits an
interactive command and a daemon that restarts; a job that starts beside a big restore needs longer,
and a health script wants an answer at once. So the window is a setting, per client
(``retry_for_s``), for every client of a process (``CONNECT_OFFSETS_RETRY_FOR``, or the command
line's ``--retry-for``), and per Spark source (option ``retryFor``).

The wait for one answer (``timeout_s``, 90 s) is a setting the same way: per client, or for every
client of a process (``CONNECT_OFFSETS_TIMEOUT``, or the command line's ``--timeout``), so that a
health script meets a daemon that accepts connections and never answers within seconds.

A refused connection is asked again only within a window someone chose (any of those three, not
the 30 s default): nothing listens while a daemon restarts, which a job given ``retryFor=10m`` must
ride out, but a mistyped URL is refused too, and an interactive command should say so at once.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

from emulator.model.times import NEVER, parse_duration_s

ENV = "CONNECT_OFFSETS_RETRY_FOR"
DEFAULT_RETRY_FOR_S = 30.0
EXPECTED = "a duration such as 10m, 30s, 500ms, 0 (ask once), or forever (no limit)"

_default: float | None = None


TIMEOUT_ENV = "CONNECT_OFFSETS_TIMEOUT"
DEFAULT_TIMEOUT_S = 90.0
TIMEOUT_EXPECTED = "a positive duration such as 10s, 2m, 500ms"

_default_timeout: float | None = None


class RetryWindowError(ValueError):
    """A retry window (or a timeout) that is not a duration; the message names where it came from."""


NO_LIMIT = frozenset({"forever", "never"})
"""``forever`` (also ``never``, as in "give up never"): no limit, as every duration "or never" of the
project; ``0`` stays "ask once"."""

AMBIGUOUS = (NEVER - NO_LIMIT) - {"", "0"}
"""``none``, ``off``: elsewhere "no limit", but said of retries they read as "no retries" just as well,
and either reading is the wrong one for someone: refused, and the message says what to write."""


def parse_retry_for_s(text: str) -> float:
    """Seconds from ``10m`` / ``30s`` / ``500ms``; ``0`` asks only once; ``forever`` (or ``never``)
    is ``math.inf``: asking again until the daemon answers. ``none``/``off`` are a ``ValueError``."""
    word = text.strip().lower()
    if word in NO_LIMIT:
        return math.inf
    if word in AMBIGUOUS:
        raise ValueError(f"{text!r} could mean no retries or no limit: write 0 or forever")
    seconds = parse_duration_s(text)  # None for 0 (and ""): no retries
    return 0.0 if seconds is None else seconds


def describe_window(seconds: float) -> str:
    """``for up to 30 s`` / ``without limit``, for log lines about a retry window."""
    return "without limit" if math.isinf(seconds) else f"for up to {seconds:g} s"


def use_default_retry_for(seconds: float | None) -> None:
    """What clients built without a window of their own use (None: the environment again)."""
    global _default
    _default = seconds


def default_retry_for_s() -> float:
    """The command line's window, else ``CONNECT_OFFSETS_RETRY_FOR``, else 30 s."""
    if _default is not None:
        return _default
    return _from_environment(ENV, parse_retry_for_s, DEFAULT_RETRY_FOR_S, EXPECTED)


def chosen_retry_for_s() -> float | None:
    """The window someone chose for every client of the process (the command line's, else
    ``CONNECT_OFFSETS_RETRY_FOR``); None when it is only the default."""
    if _default is not None:
        return _default
    return default_retry_for_s() if os.environ.get(ENV, "").strip() else None


def parse_timeout_s(text: str) -> float:
    """Seconds from ``10s`` / ``2m`` / ``500ms`` (a bare number is seconds); 0 and never are refused:
    a client waits for an answer for some time, not for ever, and never not at all."""
    seconds = parse_duration_s(text)
    if seconds is None:
        raise ValueError(f"invalid timeout {text!r}: expected {TIMEOUT_EXPECTED}")
    return seconds


def use_default_timeout(seconds: float | None) -> None:
    """What clients built without a timeout of their own wait for an answer (None: the environment)."""
    global _default_timeout
    _default_timeout = seconds


def default_timeout_s() -> float:
    """The command line's ``--timeout``, else ``CONNECT_OFFSETS_TIMEOUT``, else 90 s."""
    if _default_timeout is not None:
        return _default_timeout
    return _from_environment(TIMEOUT_ENV, parse_timeout_s, DEFAULT_TIMEOUT_S, TIMEOUT_EXPECTED)


def _from_environment(name: str, parse: Callable[[str], float], default: float, expected: str) -> float:
    """The variable ``name`` parsed, ``default`` when unset or blank; a value that does not parse is
    refused naming the variable (a typo there must not silently mean the default)."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        return parse(raw)
    except ValueError:
        raise RetryWindowError(f"{name}: expected {expected}, got {raw!r}") from None
