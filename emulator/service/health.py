"""Readiness and counters for probes and operators: Connect's read-to-end rule, made visible.

The daemon is ready once the offsets log has been read to the end it had at startup and, with a
Connect cluster, once its config and status topics have been too; before that every offsets read
is refused rather than answered from partial state. It is not ready either while the log's storage
cannot be reached (a Kafka cluster that did not answer its last metadata request): a load balancer
then sends writes elsewhere, or nowhere, instead of to a daemon that can only answer 503 after its
write timeout. Reads of the view go on being served meanwhile.

``/status`` adds what an operator needs to tell a healthy daemon from one that only looks alive:
the end offsets as the reader last saw them and its lag, whether its thread runs and when it last
fetched, its last error (kept after recovery) and when, the records it had to drop, the history
archiver's state and the Connect cluster's readers. Fields that reveal the server's file system
are shown to the ``admin`` scope only (``emulator.server.auth.status``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from emulator.connect_cluster.offsets_topics import ConnectorTopics
from emulator.history.archive import HistoryArchive
from emulator.logs.base import OffsetLog, ReadProgress
from emulator.model.times import format_time_ms
from emulator.view.offset_view import OffsetView

if TYPE_CHECKING:  # the Kafka client behind it is imported only when a Connect cluster is read
    from emulator.connect_cluster import ConnectCluster


class Readiness(TypedDict):
    ready: bool
    error: str | None
    records_read: int
    partitions_at_end: int
    partitions: int
    positions: dict[str, int]
    end_offsets: dict[str, int]
    connect_cluster: NotRequired[dict[str, Any]]
    """Present with a Connect cluster: read progress of its config and status topics."""
    connector_offsets_topics: NotRequired[dict[str, Any]]
    """Present with a Connect cluster: connectors' own offsets topics (KIP-618), their read progress,
    and which topics each source connector's offsets live in."""
    unreachable: NotRequired[str]
    """Present while the log's storage cannot be reached: what failed, and for how long."""


class ReaderHealth(TypedDict):
    """The offsets log's reader: is it running, fetching, failing, dropping."""

    alive: bool
    last_poll_at: str | None
    """When the reader last asked the log for records (found or not)."""
    last_records_at: str | None
    last_error: str | None
    """The latest error of the reader or the log's clients, kept after recovery."""
    last_error_at: str | None
    records_dropped: int


class WriteHealth(TypedDict):
    """The offsets log's own part of the writes since the daemon started: is the disk or the broker slow?"""

    writes: int
    """Writes the log made durable (embedded: transactions, which concurrent requests share; Kafka: appends)."""
    records: int
    mean_ms: float | None
    """Their mean duration, from the write lock or the hand-over to the producer until durable."""
    slow_writes: int
    """Of those, writes that took a second or more (logged as warnings, at most one line a minute,
    each counting those since the last)."""
    last_slow_at: str | None
    last_slow_s: float | None


class Status(Readiness):
    log: str
    lag: dict[str, int]
    """Per partition: end offset - position (0 at the end)."""
    lag_total: int
    reader: ReaderHealth
    view: dict[str, Any]
    live_keys: int
    history: dict[str, Any]
    """The archiver's mode, queue and errors (``{"enabled": false}`` with ``--no-history``)."""
    writes: WriteHealth | None
    """None for a log that does not time its writes (both backends do)."""
    claims_seen: int | None
    """How many connectors are claimed, as the daemon last saw without waiting (the embedded log re-reads
    its claims table every few hundred ms; on Kafka the claims reader tails the claims topic): not a read
    to the end per probe; ``GET /claims`` lists them. None while not known yet."""
    compaction: dict[str, Any] | None
    """The embedded log's compactor (``--compaction-interval``): compactions, the last one, the last
    failure; None on Kafka (the broker compacts) or with ``--compaction-interval never``."""


def iso(seconds: float | None) -> str | None:
    """A wall-clock ``time.time()`` as ISO-8601 UTC, the form every time in the API takes."""
    return None if seconds is None else format_time_ms(int(seconds * 1000))


class Health:
    def __init__(
        self,
        log: OffsetLog,
        view: OffsetView,
        cluster: ConnectCluster | None,
        topics: ConnectorTopics | None = None,
    ) -> None:
        self._log = log
        self._view = view
        self._cluster = cluster
        self._topics = topics

    def readiness(self, progress: ReadProgress | None = None) -> Readiness:
        progress = progress or self._log.progress()
        body: Readiness = {
            "ready": progress.caught_up,
            "error": progress.error,
            "records_read": progress.records_read,
            "partitions_at_end": progress.partitions_done,
            "partitions": len(progress.end_offsets),
            "positions": {str(p): v for p, v in sorted(progress.positions.items())},
            "end_offsets": {str(p): v for p, v in sorted(progress.end_offsets.items())},
        }
        if self._cluster is not None:
            # With a Connect cluster, its config and status topics must be read to their end as well.
            cluster = self._cluster.readiness()
            body["ready"] = progress.caught_up and bool(cluster["ready"])
            body["connect_cluster"] = cluster
        if self._topics is not None:
            # Every connector's own offsets topic is read to its end before the daemon is ready, as the worker's.
            topics = self._topics.readiness()
            body["ready"] = body["ready"] and bool(topics["ready"])
            body["connector_offsets_topics"] = topics
        unreachable = self._log.reachability()
        if unreachable is not None:
            body["ready"] = False
            body["unreachable"] = unreachable
        return body

    def status(self, history: HistoryArchive | None = None) -> Status:
        progress = self._log.progress()
        lag = progress.lag()
        return {
            **self.readiness(progress),
            "log": self._log.description,
            "lag": {str(p): v for p, v in sorted(lag.items())},
            "lag_total": sum(lag.values()),
            "reader": {
                "alive": progress.alive,
                "last_poll_at": iso(progress.last_poll_at),
                "last_records_at": iso(progress.last_records_at),
                "last_error": progress.last_error,
                "last_error_at": iso(progress.last_error_at),
                "records_dropped": progress.records_dropped,
            },
            "view": {**self._view.stats.as_dict(), "listener_failures": self._view.listener_failures},
            "live_keys": self._view.live_keys(),
            "history": {"enabled": False} if history is None else {"enabled": True, **history.status()},
            "writes": self._write_health(),
            "compaction": self._compaction(),
            "claims_seen": self._log.claims_seen(),
        }

    def _compaction(self) -> dict[str, Any] | None:
        status = self._log.compaction()
        return None if status is None else {**status, "last_at": iso(status["last_at"])}

    def _write_health(self) -> WriteHealth | None:
        timings = self._log.write_timings
        if timings is None:
            return None
        t = timings.snapshot()
        return {
            "writes": t.count,
            "records": t.records,
            "mean_ms": round(t.sum_s * 1000 / t.count, 3) if t.count else None,
            "slow_writes": t.slow,
            "last_slow_at": iso(t.last_slow_at),
            "last_slow_s": None if t.last_slow_s is None else round(t.last_slow_s, 3),
        }
