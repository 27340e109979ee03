"""Reading the history archive for the API: a connector's changes, and its offsets as of a time.

Archive reads open files and may take seconds on a large archive, so they run in a worker thread,
never on the event loop. They are answered only from a log read to its end: before the replay
reached the end, the archive may lack records.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from emulator.history.archive import HistoryArchive
from emulator.history.query import (
    HistoryPage,
    HistoryReader,
    PastState,
    Place,
    connector_history,
    not_in_history,
    state_as_of,
    unread_files_said,
)
from emulator.model.errors import ConnectorNotFound
from emulator.model.times import format_time_ms
from emulator.service.checks import ConnectorChecks


async def read_past(archive: HistoryArchive, connector: str, at_ms: int, epoch: int | None = None) -> PastState:
    """The connector's raw state at ``at_ms`` (in ``epoch`` alone, if given), rebuilt from the archive
    in a worker thread."""
    reader = HistoryReader(archive.directory, archive, max_ms=at_ms)
    return await asyncio.to_thread(state_as_of, reader, connector, at_ms, epoch)


class HistoryQueries:
    def __init__(self, checks: ConnectorChecks) -> None:
        self._checks = checks

    async def changes(
        self,
        archive: HistoryArchive,
        connector: str,
        *,
        partition: Mapping[str, Any] | None,
        from_ms: int | None,
        to_ms: int | None,
        limit: int,
        before: Place | None = None,
    ) -> HistoryPage:
        """A connector's changes, newest first (see ``emulator.history.query.connector_history``)."""
        self._checks.ensure_ready()
        reader = HistoryReader(archive.directory, archive, min_ms=from_ms, max_ms=to_ms)
        try:
            return await asyncio.to_thread(
                connector_history,
                reader,
                connector,
                partition=partition,
                from_ms=from_ms,
                to_ms=to_ms,
                limit=limit,
                before=before,
            )
        except ConnectorNotFound as exc:  # not in what was read: a file not read whole may hold its records
            said = unread_files_said(exc, reader.report)
            if said is exc:
                raise
            raise said from None

    async def as_of(
        self, archive: HistoryArchive, connector: str, at_ms: int, must_know: bool = True, epoch: int | None = None
    ) -> PastState:
        """The connector's offsets as they were at ``at_ms`` (in ``epoch`` alone, if given); unknown
        then is not found (``must_know``)."""
        self._checks.ensure_ready()
        past = await read_past(archive, connector, at_ms, epoch)
        if must_know and not past.known:
            raise not_in_history(
                f"Connector {connector} not found in the offsets history at or before {format_time_ms(at_ms)}",
                None,
                None,
                past.report,
            )
        return past
