"""Writing planned records: append, wait for the log's acknowledgement, apply to the view.

Every modification of the offsets log (PATCH, DELETE, imports, rollbacks) goes through one
``OffsetsWriter``, so that read-your-writes and the one-at-a-time rule hold for all of them:
a reset racing an alter of the same connector must not interleave their records.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from emulator.codec.murmur2 import partition_for
from emulator.logs.base import OffsetLog
from emulator.model.records import LogRecord
from emulator.service.results import PlannedRecord
from emulator.service.write_guard import NO_AUTH, WriteAuth, WriteGuard
from emulator.view.offset_view import OffsetView

_APPEND_CHUNK = 10_000


class OffsetsWriter:
    def __init__(self, log: OffsetLog, view: OffsetView, guard: WriteGuard, write_timeout_s: float) -> None:
        self._log = log
        self._view = view
        self._guard = guard
        self._write_timeout_s = write_timeout_s
        self.lock = asyncio.Lock()
        """One modification at a time per daemon. Held by ``write``; a caller that must check and
        write atomically (an import diffs against the live view) takes it and calls ``append_locked``."""

    def planned(self, key: bytes, value: bytes | None, existing: bool) -> PlannedRecord:
        """A record to write, placed as Connect's producer places it (murmur2 over the partitions)."""
        return PlannedRecord(key, value, partition_for(key, self._log.partition_count), existing)

    async def write(self, connector: str, records: Sequence[PlannedRecord], auth: WriteAuth = NO_AUTH) -> None:
        """Write ``records`` for ``connector`` under the writer's claim (if any); nothing to do for none."""
        if not records:
            return
        entries = [(r.key, r.value) for r in records]
        async with self.lock:
            await self.append_locked(entries, connector, auth)

    async def append_locked(
        self,
        entries: Sequence[tuple[bytes, bytes | None]],
        connector: str | None = None,
        auth: WriteAuth = NO_AUTH,
    ) -> None:
        """Append (in chunks, each bounded by the write timeout) and apply it to the view once acknowledged.

        The caller holds ``lock``. Chunks keep one huge import from needing one huge timeout.
        """
        for start in range(0, len(entries), _APPEND_CHUNK):
            chunk = entries[start : start + _APPEND_CHUNK]
            if connector is None:
                positions = await asyncio.to_thread(self._log.append, chunk, self._write_timeout_s)
            else:
                positions = await asyncio.to_thread(self._guard.append, connector, auth, chunk, self._write_timeout_s)
            # Read-your-writes without waiting for the reader's next fetch: the log acknowledged
            # exactly these records at exactly these positions (see OffsetView.apply_acknowledged).
            now_ms = time.time_ns() // 1_000_000
            self._view.apply_acknowledged(
                [LogRecord(k, v, p.partition, p.offset, now_ms) for (k, v), p in zip(chunk, positions, strict=True)]
            )
