"""Source-side commits off the micro-batch's critical path.

``reader.commit(end)`` runs inside Spark's planning of the next batch, so a synchronous GET + PATCH
would lengthen every trigger. The reader only hands the newest end offset to one background thread
per (daemon, connector) in its long-lived driver-side worker and returns; the thread commits the
newest pending offset (older ones are superseded: commits are monotonic). If the worker is killed
first, the pending commit is lost, which is no worse than ``commit`` arriving one batch late: the
listener or ``spark-handoff`` publishes the last completed batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from emulator.client.credentials import Credentials
from emulator.client.http import ClientError
from emulator.spark.committer import DaemonOffsets, Entry
from emulator.spark.newest_wins import NewestWinsCommitter

log = logging.getLogger(__name__)


class BackgroundCommitter(NewestWinsCommitter[Sequence[Entry]]):
    expected_errors = (ClientError,)

    def submit(self, entries: Sequence[Entry]) -> None:
        self._submit(entries)

    def _commit(self, daemon: DaemonOffsets, item: Sequence[Entry]) -> None:
        daemon.commit(self.connector, item)

    def _failed(self, item: Sequence[Entry], exc: Exception) -> None:
        log.warning(
            "connect-file %s: could not commit %s to the daemon at %s (a later commit, the listener or "
            "spark-handoff will publish it): %s",
            self.connector,
            [offset for _, offset in item],
            self.url,
            exc,
        )


_committers: dict[tuple[str, str, Credentials | None], BackgroundCommitter] = {}
_guard = threading.Lock()


def committer_for(url: str, connector: str, credentials: Credentials | None = None) -> BackgroundCommitter:
    with _guard:
        found = _committers.get((url, connector, credentials))
        if found is None:
            found = _committers[(url, connector, credentials)] = BackgroundCommitter(url, connector, credentials)
        return found
