"""The daemon's log lines: one event per line on stderr, as text for people or JSON for collectors.

``--log-format text`` (default) keeps the line people read: ``time LEVEL logger: message``.
``--log-format json`` writes one JSON object per line with ``time`` (ISO-8601 UTC, milliseconds),
``level``, ``logger``, ``message``, an ``exception`` when there is one, and the record's structured
fields at the top level, so a collector (Loki, Elasticsearch, CloudWatch) can filter on
``principal`` or ``status`` without parsing the message. Every logger of the process goes through
the same handler, the HTTP server's and librdkafka's included.

Structured fields travel on the log record as ``extra={FIELDS: {...}}``; in text they are already
part of the message (an access or audit line states them), so the text format does not repeat them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from emulator.codec.shown import shown_text
from emulator.server import invalid_requests

FIELDS = "fields"
"""The ``LogRecord`` attribute holding a line's structured fields (``extra={FIELDS: {...}}``)."""

FORMATS = ("text", "json")

_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_RESERVED = frozenset({"time", "level", "logger", "message", "exception"})


def fields(**values: Any) -> dict[str, Any]:
    """``extra=`` for a line with structured fields: ``log.info("...", extra=fields(status=200))``."""
    return {FIELDS: values}


class JsonFormatter(logging.Formatter):
    """One JSON object per record; never raises (a value JSON cannot encode is written as text)."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = getattr(record, FIELDS, None)
        if isinstance(extra, Mapping):
            # The fixed keys win: a field may not disguise a line's level or origin.
            body.update({str(k): v for k, v in extra.items() if str(k) not in _RESERVED})
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            body["exception"] = record.exc_text
        if record.stack_info:
            body["stack"] = self.formatStack(record.stack_info)
        return json.dumps(body, ensure_ascii=False, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message``, one line per event whatever the message holds: every character
    ``str.isprintable`` refuses (a newline, a carriage return, ESC, U+2028) escaped as in a Python
    string literal (``emulator.codec.shown.shown_text``). Messages quote what clients send (connector
    names, partitions, owners, refused values): a newline in one wrote a second line that a reader or
    a log collector took for the daemon's own, an escape sequence drove the terminal of whoever
    followed the log. A traceback, which the formatter adds after the message, keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        return text if text.isprintable() else shown_text(text)


def formatter(log_format: str) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return TextFormatter(_TEXT)
    raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {log_format!r}")


def configure_logging(level: str, log_format: str = "text") -> None:
    """Send every logger's records to stderr in ``log_format`` at ``level`` and above.

    Replaces the root logger's handlers (``logging.basicConfig`` would keep an earlier one), so
    calling it twice does not print lines twice. uvicorn's line per request it cannot parse is
    counted and throttled (``emulator.server.invalid_requests``).
    """
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    invalid_requests.install()
