"""The text log is one line per event, whatever a message quotes; a traceback keeps its lines."""

from __future__ import annotations

import logging
import sys

from emulator.server.log_format import formatter


def _record(message: str, *args: object, exc_info: bool = False) -> logging.LogRecord:
    return logging.LogRecord(
        "emulator.test", logging.WARNING, __file__, 1, message, args, sys.exc_info() if exc_info else None
    )


def test_unprintable_characters_of_a_message_are_escaped_as_python_writes_them() -> None:
    line = formatter("text").format(_record("refused %s", "x\nFORGED\x1b[2J\r\u2028\x85"))
    assert line.endswith(" WARNING emulator.test: refused x\\nFORGED\\x1b[2J\\r\\u2028\\x85")
    assert line.isprintable()


def test_a_plain_message_is_unchanged() -> None:
    assert (
        formatter("text")
        .format(_record("opened %s", "embedded:///srv/data"))
        .endswith(" WARNING emulator.test: opened embedded:///srv/data")
    )


def test_a_traceback_after_the_message_keeps_its_lines() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        line = formatter("text").format(_record("failed: %s", "a\nb", exc_info=True))
    first, *rest = line.split("\n")
    assert first.endswith("failed: a\\nb")
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "ValueError: boom"
