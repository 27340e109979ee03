"""The offsets log as the service sees it when history is on: every append registers its origin.

A wrapper rather than an edit of each write path, so that any present or future way the service
writes (alter, reset, rollback, imports) is attributed to the daemon without having to remember to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emulator.history.origins import OriginRegistry, current_write_origin
from emulator.logs.base import OffsetLog, ReadProgress, RecordSink
from emulator.records import Position


class TrackedLog(OffsetLog):
    """Delegates everything to ``inner``; ``append`` also tells ``origins`` where records landed.

    Attributes specific to a backend (``compact``, ``end_offsets``, ...) are reached through
    ``__getattr__``; ``inner`` is the wrapped log for code that needs the concrete class.
    """

    def __init__(self, inner: OffsetLog, origins: OriginRegistry) -> None:
        self.inner = inner
        self.origins = origins

    @property
    def description(self) -> str:
        return self.inner.description

    @property
    def partition_count(self) -> int:
        return self.inner.partition_count

    def open(self) -> None:
        self.inner.open()

    def start_reading(self, sink: RecordSink) -> None:
        self.inner.start_reading(sink)

    def progress(self) -> ReadProgress:
        return self.inner.progress()

    def append(self, entries: Sequence[tuple[bytes, bytes | None]], timeout_s: float = 30.0) -> list[Position]:
        operation, connector = current_write_origin()
        ticket = self.origins.begin(operation, connector, entries)
        try:
            positions = self.inner.append(entries, timeout_s)
        except BaseException:
            ticket.failed()
            raise
        ticket.landed(positions)
        return positions

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
