"""One background thread that commits the newest pending item and drops the ones it superseded.

Every Spark source of ours commits from ``reader.commit(end)``, inside Spark's planning of the next batch,
so a synchronous round trip to the daemon would lengthen every trigger. Commits are monotonic, so
only the newest pending end matters: an older one that has not started yet is simply replaced.
``flush`` exists for orderly shutdowns and tests; every other wait is the thread's own.
"""

from __future__ import annotations

import logging
import threading
from typing import ClassVar, Generic, TypeVar

from emulator.client.credentials import Credentials
from emulator.spark.committer import DaemonOffsets

log = logging.getLogger(__name__)

T = TypeVar("T")


class NewestWinsCommitter(Generic[T]):
    """Subclasses say how to commit one item and which failures are expected (logged as a warning
    by ``_failed``); anything else is logged with its traceback. The thread survives both, so a
    later batch still commits."""

    expected_errors: ClassVar[tuple[type[Exception], ...]] = ()

    def __init__(self, url: str, connector: str, credentials: Credentials | None = None) -> None:
        self.url, self.connector, self.credentials = url, connector, credentials
        self._pending: T | None = None
        self._busy = False
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name=f"commit-{connector}", daemon=True)
        self._thread.start()

    def _submit(self, item: T) -> None:
        with self._wake:
            self._pending = item
            self._wake.notify_all()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until nothing is pending or in flight (tests, orderly shutdowns)."""
        with self._wake:
            return self._wake.wait_for(lambda: self._pending is None and not self._busy, timeout_s)

    def _commit(self, daemon: DaemonOffsets, item: T) -> None:
        raise NotImplementedError

    def _failed(self, item: T, exc: Exception) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        daemon: DaemonOffsets | None = None  # made in the first commit's try: a setting it refuses is logged there
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._pending is not None)
                item = self._pending
                self._pending, self._busy = None, True
            assert item is not None
            try:
                if daemon is None:
                    daemon = DaemonOffsets(self.url, credentials=self.credentials)
                self._commit(daemon, item)
            except self.expected_errors as exc:
                self._failed(item, exc)
            except Exception:  # the thread must survive anything to keep committing later batches
                log.exception("%s: unexpected error while committing", self._thread.name)
            finally:
                with self._wake:
                    self._busy = False
                    self._wake.notify_all()
