"""Source-side commits off the micro-batch's critical path.

``reader.commit(end)`` runs inside Spark's planning of the next batch, so a synchronous GET + PATCH
would lengthen every trigger. The reader only hands the newest end offset to one background thread
per (daemon, connector, kind) in its long-lived driver-side worker and returns; the thread commits the
newest pending offset (older ones are superseded: commits are monotonic). If the worker is killed
first, the pending commit is lost, which is no worse than ``commit`` arriving one batch late: the
listener or ``spark-handoff`` publishes the last completed batch.

A source given ``claimEpoch`` commits as the holder of that claim on its connector; a commit the
daemon refuses for the claim is logged as a WARNING saying which epoch was given and what to
change (``ClaimRefused``), never skipped without a word.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from emulator.client.credentials import Credentials
from emulator.client.errors import ClientError
from emulator.spark.committer import DaemonOffsets, Entry, Kind, SinkOffsetsUnsupported, claim_advice
from emulator.spark.newest_wins import NewestWinsCommitter

log = logging.getLogger(__name__)


class BackgroundCommitter(NewestWinsCommitter[Sequence[Entry]]):
    """``source`` names the Spark source in the log (``connect-file``, ``connect-kafka``); ``kind``
    says whose offsets the entries are: a source connector's, or a sink's consumer group."""

    expected_errors = (ClientError, SinkOffsetsUnsupported)

    def __init__(
        self,
        url: str,
        connector: str,
        credentials: Credentials | None = None,
        kind: Kind = "source",
        source: str = "connect-file",
        claim_epoch: int | None = None,
    ) -> None:
        self.kind, self.source, self.claim_epoch = kind, source, claim_epoch  # before the thread starts
        super().__init__(url, connector, credentials)

    def submit(self, entries: Sequence[Entry]) -> None:
        self._submit(entries)

    def _commit(self, daemon: DaemonOffsets, item: Sequence[Entry]) -> None:
        with claim_advice(self.connector, self.claim_epoch, f"{self.source}'s option claimEpoch"):
            daemon.commit(self.connector, item, self.kind, claim_epoch=self.claim_epoch)

    def _failed(self, item: Sequence[Entry], exc: Exception) -> None:
        log.warning(
            "%s %s: could not commit %s to the daemon at %s (a later commit, the listener or "
            "spark-handoff will publish it): %s",
            self.source,
            self.connector,
            [offset for _, offset in item],
            self.url,
            exc,
        )


_committers: dict[tuple[str, str, Credentials | None, Kind, int | None], BackgroundCommitter] = {}
_guard = threading.Lock()


def committer_for(
    url: str,
    connector: str,
    credentials: Credentials | None = None,
    kind: Kind = "source",
    source: str = "connect-file",
    claim_epoch: int | None = None,
) -> BackgroundCommitter:
    """One committer per daemon, connector, credentials, kind and claim epoch: a query that takes a
    newer claim commits with the new epoch, not through the thread that holds the old one."""
    with _guard:
        key = (url, connector, credentials, kind, claim_epoch)
        found = _committers.get(key)
        if found is None:
            found = _committers[key] = BackgroundCommitter(url, connector, credentials, kind, source, claim_epoch)
        return found
