"""``connect-debezium``'s own commits: the daemon first, then the engine, off the trigger's path.

``reader.commit(end)`` (one batch late, docs/spark.md) hands the batch end to one background thread,
which commits its offsets to the daemon through ``DaemonOffsets`` (monotonic, with Debezium's
order) and only then acknowledges the change to the engine, which lets Debezium confirm the
position to the database (for Postgres, the replication slot's ``confirmed_flush_lsn``). That order
is the no-gap rule: the database is never told to forget a change the daemon's offsets do not cover
yet, so whoever resumes from the daemon finds every change after them.

An offset the daemon already holds counts as committed ("unchanged": the listener or
``spark-handoff`` published it first). One the daemon refused as older than what it holds is not
acknowledged (the slot stays behind; a later batch acknowledges past it). A failed commit is logged
and left to the next batch, the listener or ``spark-handoff``; the engine is then simply not
acknowledged, which costs retained WAL, never a change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from emulator.client.credentials import Credentials
from emulator.client.errors import ClientError
from emulator.spark.committer import DaemonOffsets, UnreadableOffsets, claim_advice
from emulator.spark.debezium_offsets import DebeziumOffset, debezium_backwards_reason
from emulator.spark.debezium_process import EngineError
from emulator.spark.newest_wins import NewestWinsCommitter

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PendingCommit:
    offset: DebeziumOffset
    generation: int


def held_by_daemon(skipped_reasons: list[str]) -> bool:
    """Whether the daemon now holds every entry of a commit: each was written or already there."""
    return all(reason == "unchanged" for reason in skipped_reasons)


class DebeziumCommitter(NewestWinsCommitter[PendingCommit]):
    """One thread per reader: commit the newest pending batch end, then acknowledge it."""

    expected_errors = (ClientError, EngineError, UnreadableOffsets)

    def __init__(
        self,
        url: str,
        connector: str,
        acknowledge: Callable[[int, int], object],
        credentials: Credentials | None = None,
        claim_epoch: int | None = None,
    ) -> None:
        """``claim_epoch``: commit as the holder of that claim on the connector (option ``claimEpoch``)."""
        self._acknowledge = acknowledge
        self.claim_epoch = claim_epoch
        self.committed_seq = 0
        self.errors: list[str] = []
        super().__init__(url, connector, credentials)

    def submit(self, offset: DebeziumOffset, generation: int) -> None:
        """Newest wins: an older pending end is superseded (commits are monotonic anyway)."""
        self._submit(PendingCommit(offset, generation))

    def _failed(self, item: PendingCommit, exc: Exception) -> None:
        message = f"connect-debezium {self.connector}: committing change {item.offset.seq} failed: {exc}"
        log.warning("%s (a later batch, the listener or spark-handoff publishes it)", message)
        self.errors.append(message)

    def _commit(self, daemon: DaemonOffsets, pending: PendingCommit) -> None:
        offset = pending.offset
        if offset.entries:
            with claim_advice(self.connector, self.claim_epoch, "connect-debezium's option claimEpoch"):
                outcome = daemon.commit(
                    self.connector,
                    offset.connect_entries(),
                    order=debezium_backwards_reason,
                    claim_epoch=self.claim_epoch,
                )
            reasons = [str(s.get("reason")) for s in outcome.skipped]
            if not held_by_daemon(reasons):
                log.info(
                    "connect-debezium %s: the daemon kept newer offsets than change %d (%s); not acknowledging it",
                    self.connector,
                    offset.seq,
                    reasons,
                )
                return
        self._acknowledge(offset.seq, pending.generation)
        self.committed_seq = max(self.committed_seq, offset.seq)
