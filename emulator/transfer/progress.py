"""Progress lines on stderr for long work, so a 1M-record migration does not look like a hang.

Short transfers print nothing: below ``PROGRESS_THRESHOLD`` records a line would be noise. Lines
are rate-limited (``every_s``) except the closing one of a phase (``force``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from emulator.codec.shown import shown_text

PROGRESS_THRESHOLD = 10_000
"""Above this many records, long phases report progress on stderr."""


class Progress:
    """Where a transfer's phases report how far they got (``enabled=False``: ``--quiet``)."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 2.0, enabled: bool = True) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._every_s = every_s
        self._enabled = enabled
        self._last = 0.0

    def report(self, what: str, done: int, total: int | None, force: bool = False) -> None:
        if not self._enabled or max(done, total or 0) <= PROGRESS_THRESHOLD:
            return
        now = time.monotonic()
        if not force and now - self._last < self._every_s:
            return
        self._last = now
        suffix = f"/{total}" if total is not None else ""
        print(shown_text(f"{what}: {done}{suffix} records"), file=self._stream, flush=True)

    def ticker(self, what: str) -> Callable[[int, int | None], None]:
        """``report(what, …)`` as the readers and writers of ``emulator.formats`` call it (their ``Tick``)."""
        return lambda done, total: self.report(what, done, total)

    def note(self, text: str) -> None:
        """A line the operator must see whatever the size (warnings), even with ``--quiet``; escaped
        (``emulator.codec.shown.shown_text``) like every line the CLI prints, since it names
        locations and may quote a log's or a broker's words."""
        print(shown_text(text), file=self._stream, flush=True)
