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

log = logging.getLogger(__name__)


class BackgroundCommitter:
    def __init__(self, url: str, connector: str, credentials: Credentials | None = None) -> None:
        self.url, self.connector, self.credentials = url, connector, credentials
        self._pending: Sequence[Entry] | None = None
        self._wake = threading.Condition()
        self._busy = False
        self._thread = threading.Thread(target=self._loop, name=f"commit-{connector}", daemon=True)
        self._thread.start()

    def submit(self, entries: Sequence[Entry]) -> None:
        with self._wake:
            self._pending = entries
            self._wake.notify()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until nothing is pending or in flight (tests, orderly shutdowns)."""
        with self._wake:
            return self._wake.wait_for(lambda: self._pending is None and not self._busy, timeout_s)

    def _loop(self) -> None:
        daemon = DaemonOffsets(self.url, credentials=self.credentials)
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._pending is not None)
                entries: Sequence[Entry] = self._pending or []
                self._pending, self._busy = None, True
            try:
                daemon.commit(self.connector, entries)
            except ClientError as exc:
                log.warning(
                    "connect-file %s: could not commit %s to the daemon at %s (a later commit, the listener or "
                    "spark-handoff will publish it): %s",
                    self.connector,
                    [offset for _, offset in entries],
                    self.url,
                    exc,
                )
            except Exception:  # the thread must survive anything to keep committing later batches
                log.exception("connect-file %s: unexpected error while committing", self.connector)
            finally:
                with self._wake:
                    self._busy = False
                    self._wake.notify_all()


_committers: dict[tuple[str, str, Credentials | None], BackgroundCommitter] = {}
_guard = threading.Lock()


def committer_for(url: str, connector: str, credentials: Credentials | None = None) -> BackgroundCommitter:
    with _guard:
        found = _committers.get((url, connector, credentials))
        if found is None:
            found = _committers[(url, connector, credentials)] = BackgroundCommitter(url, connector, credentials)
        return found
