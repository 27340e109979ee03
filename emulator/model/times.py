"""Times and durations as operators type them: ISO-8601, epoch milliseconds or ``now-1h``; ``30d``.

One parser for the REST API, the CLI and the settings, so that a time accepted in one place is
accepted everywhere with the same meaning (naive ISO times are UTC, never the server's zone: a
rollback must not depend on where the daemon happens to run). ``now-<duration>`` is what an
operator types during an incident ("the offsets as of ten minutes ago"); it is resolved where it is
parsed, so the CLI resolves it with the client's clock and prints the time it used, and the REST API
with the daemon's.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_SIZE = re.compile(r"^\s*(\d+)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?\s*$", re.IGNORECASE)
_SIZE_UNIT = {"b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2}
_SIZE_UNIT |= {"g": 1024**3, "gb": 1024**3, "gib": 1024**3}
NEVER = frozenset({"", "0", "none", "never", "forever", "off"})
RELATIVE_TIME_PATTERN = r"^now(-\d{1,15}(\.\d{1,9})?(ms|s|m|h|d|w))?$"
"""``now``, or ``now-`` and a duration with its unit (``now-1h``, ``now-1.5d``); the OpenAPI document
publishes it as is."""
_RELATIVE = re.compile(RELATIVE_TIME_PATTERN)
_TIME_FORMS = "ISO-8601 (e.g. 2024-05-01T12:00:00Z), epoch milliseconds, or now-<duration> (e.g. now-1h, now-30m)"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_TIME_MS = -62_135_596_800_000
"""0001-01-01T00:00:00Z: the earliest time an answer can print (``format_time_ms``)."""
MAX_TIME_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the latest."""


def parse_time_ms(text: str, now_ms: int | None = None) -> int:
    """Epoch milliseconds from ``1700000000000``, ISO-8601 (``2024-05-01T12:00:00Z``; naive = UTC),
    ``now`` or ``now-<duration>`` (``now-1h``, ``now-90m``, ``now-2d``; before ``now_ms``, by default
    this machine's clock).

    Raises ``ValueError`` with a message naming the accepted forms, or the range: a time that
    cannot be printed back (before year 1, after year 9999) is refused here rather than failing
    later with an ``OverflowError``.
    """
    value = text.strip()
    if _RELATIVE.match(value) is not None:
        ms = _before(time.time_ns() // 1_000_000 if now_ms is None else now_ms, value[len("now-") :])
    elif re.fullmatch(r"-?\d+", value):
        # Checked on the digits first: int() of a 5,000-digit text fails with its own, unrelated, limit.
        ms = int(value) if len(value.lstrip("-")) <= 20 else MAX_TIME_MS + 1
    else:
        try:
            parsed = datetime.fromisoformat(value.replace("z", "Z"))
        except ValueError:
            raise ValueError(f"invalid time {text!r}: expected {_TIME_FORMS}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        ms = int(parsed.timestamp() * 1000)
    if not MIN_TIME_MS <= ms <= MAX_TIME_MS:
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise ValueError(
            f"time {shown!r} is out of range: expected a time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z "
            f"(epoch milliseconds {MIN_TIME_MS}..{MAX_TIME_MS})"
        )
    return ms


def is_relative_time(text: str) -> bool:
    """Whether ``parse_time_ms`` reads ``text`` against the clock (``now``, ``now-1h``)."""
    return _RELATIVE.match(text.strip()) is not None


def _before(now_ms: int, duration: str) -> int:
    """``now_ms`` less ``duration`` (``1h``; empty for ``now`` itself)."""
    if not duration:
        return now_ms
    match = _DURATION.match(duration)
    assert match is not None  # the pattern admitted only durations
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    return now_ms - round(seconds * 1000)


def format_time_ms(ms: int) -> str:
    """ISO-8601 UTC with milliseconds, the form every history answer uses."""
    # Integer arithmetic: ms / 1000 as a float loses the last millisecond near year 9999.
    return (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_duration_s(text: str) -> float | None:
    """Seconds from ``30d`` / ``12h`` / ``90m`` / ``3600s`` / ``500ms`` / ``2w`` (bare number = seconds).

    ``None`` for "keep forever" (``0``, ``none``, ``never``, ``forever``, ``off``).
    """
    if text.strip().lower() in NEVER:
        return None
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"invalid duration {text!r}: expected e.g. 30d, 12h, 90m, 3600s, 500ms, or 'never'")
    seconds = float(match.group(1)) * _UNIT_S[(match.group(2) or "s").lower()]
    if seconds <= 0:
        return None
    return seconds


def parse_size_bytes(text: str) -> int:
    """Bytes from ``67108864`` / ``64MiB`` / ``512k`` (binary units)."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"invalid size {text!r}: expected bytes, optionally with K/M/G (binary), e.g. 64MiB")
    size = int(match.group(1)) * _SIZE_UNIT[(match.group(2) or "b").lower()]
    if size <= 0:
        raise ValueError(f"invalid size {text!r}: must be positive")
    return size
