"""Connector-specific offsets topics (``offsets.storage.topic``), materialized as the worker's topic is.

Connect reads such a topic with a store of its own for each connector that names it
(``emulator.connect_cluster.offset_stores`` says which). The daemon does the same: as soon as a
source connector's config in the config topic names a topic other than the worker's, that topic
gets a log and a view of its own, read from the beginning and tailed, with the connector store's
isolation level. Rules are the worker topic's: a store answers nothing until it was read to the end,
and ``/readyz`` waits for every store a current config needs. Configs that appear later (a connector
created or reconfigured while the daemon runs) are picked up from the config topic's reader.

Opening a topic talks to the broker (it is created if missing, as Connect's store creates it when it
starts), so it happens on this registry's own thread, never on the config reader's or the event
loop. An open that fails is logged, shown in ``/status`` and retried.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from emulator.connect_cluster.kind import connector_kind
from emulator.connect_cluster.offset_stores import WORKER_ONLY, ConnectorStores, connector_stores
from emulator.connect_cluster.state import ClusterState
from emulator.history.archive import HistoryArchive
from emulator.logs.base import OffsetLog
from emulator.model.errors import ConnectorStoreUnavailable, NotReady, NotReadyYet, TopicMisconfigured
from emulator.model.exactly_once import ExactlyOnceSource, TaskTransactionalIds
from emulator.model.times import format_time_ms
from emulator.view.offset_view import OffsetView

log = logging.getLogger(__name__)
T = TypeVar("T")

_RETRY_S = 5.0


@dataclass(slots=True)
class TopicStore:
    """One connector-specific offsets topic: its log (as the service writes it) and its view."""

    topic: str
    read_committed: bool
    log: OffsetLog
    view: OffsetView
    archive: HistoryArchive | None = None
    """Its own history archive (None with ``--no-history``)."""

    @property
    def ready(self) -> bool:
        progress = self.log.progress()
        return progress.caught_up and progress.error is None

    def close(self) -> None:
        self.log.close()
        if self.archive is not None:
            self.archive.close()


def isolation_name(read_committed: bool) -> str:
    """The consumer's ``isolation.level`` a store reads with, as ``/status`` and the metrics name it."""
    return "read_committed" if read_committed else "read_uncommitted"


StoreKey = tuple[str, bool]
"""(topic, read_committed): two connectors may read one topic at different isolation levels."""
OpenStore = Callable[[str, bool], TopicStore]
"""Opens a topic's log (it exists afterwards), builds its view and starts reading it."""


class _PerConfigChange(Generic[T]):
    """What ``compute`` derives from the connector configs, kept until a config record arrives:
    ``/readyz``, ``/status`` and ``/metrics`` ask on every probe and scrape (benchmarks/RESULTS.md,
    round 16: with 10,000 connectors deriving it from scratch took ~80 ms of the interpreter)."""

    def __init__(self, state: ClusterState, compute: Callable[[], T]) -> None:
        self._state = state
        self._compute = compute
        self._kept: tuple[int, T] | None = None

    def get(self) -> T:
        version = self._state.config_version()  # read first: a record applied meanwhile means recompute next time
        kept = self._kept
        if kept is None or kept[0] != version:
            kept = self._kept = (version, self._compute())
        return kept[1]


@dataclass(frozen=True, slots=True)
class _Derived:
    """What the current configs mean for offsets topics: the stores they need, and per connector its topics."""

    wanted: dict[StoreKey, list[str]]
    """Every store a source connector's current config needs, with the connectors needing it."""
    described: dict[str, dict[str, Any]]
    """``describe_connectors()``: connectors with a store besides the worker's or a fencing record."""


class ConnectorTopics:
    """The connector-specific offsets topics a Connect cluster's source connectors use, read and tailed."""

    def __init__(
        self,
        state: ClusterState,
        worker_topic: str,
        bootstrap: str,
        eos: ExactlyOnceSource,
        open_store: OpenStore,
    ) -> None:
        self._state = state
        self.worker_topic = worker_topic
        self._bootstrap = bootstrap
        self.eos = eos
        self._open_store = open_store
        self._lock = threading.Lock()
        self._stores: dict[StoreKey, TopicStore] = {}
        self._failures: dict[StoreKey, tuple[str, float]] = {}
        self._refused: dict[StoreKey, str] = {}
        """Stores whose topic cannot be used as it is (``TopicMisconfigured``): their connectors fail alone."""
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._derived_now = _PerConfigChange(state, self._derive)
        self._per_config: dict[str, tuple[Mapping[str, Any], ConnectorStores | None]] = {}
        """Each connector's config object as last seen, with its stores (None: not a source)."""
        state.add_config_listener(self._changed.set)

    # -- which stores ---------------------------------------------------------------------
    def stores_of(self, connector: str) -> ConnectorStores:
        """The stores Connect builds for ``connector`` now (worker only for sinks and unknown connectors)."""
        config = self._state.snapshot(connector).config
        if config is None or connector_kind(config) != "source":
            return WORKER_ONLY
        return connector_stores(config, self.worker_topic, self._bootstrap, self.eos)

    def fence_ids(self, connector: str) -> TaskTransactionalIds:
        """Transactional ids of tasks 1..N-1 of the last fenced generation (``tasks-fencing-<c>``: N), which
        the leader fences before modifying offsets; task 0's is fenced by the write itself. Made as
        they are fenced: N is whatever the record says."""
        record = self._state.snapshot(connector).task_count_record or 0
        return TaskTransactionalIds(self.eos, connector, record)

    def separate_topic_connectors(self) -> list[str]:
        """Source connectors whose current config gives them an offsets topic besides the worker's."""
        return sorted(name for names in self._wanted().values() for name in names)

    def _wanted(self) -> dict[StoreKey, list[str]]:
        """Every store a source connector's current config needs, with the connectors needing it."""
        return self._derived_now.get().wanted

    def _per_connector(self) -> dict[str, tuple[Mapping[str, Any], ConnectorStores | None]]:
        """Every configured connector's config object with its stores (None: not a source). Incremental:
        a config record replaces one connector's config object, so only connectors whose object changed
        are derived again (with 10,000 connectors a change costs a pass of identity checks, not 10,000
        derivations)."""
        kept = self._per_config
        seen: dict[str, tuple[Mapping[str, Any], ConnectorStores | None]] = {}
        for name, config in self._state.config_objects().items():
            entry = kept.get(name)
            if entry is None or entry[0] is not config:
                source = connector_kind(config) == "source"
                stores = connector_stores(config, self.worker_topic, self._bootstrap, self.eos) if source else None
                entry = (config, stores)
            seen[name] = entry
        self._per_config = seen  # one assignment: a concurrent caller starts from the old map or this one
        return seen

    def _derive(self) -> _Derived:
        connectors = self._per_connector()
        wanted: dict[StoreKey, list[str]] = {}
        described: dict[str, dict[str, Any]] = {}
        for name, (_, stores) in connectors.items():
            if stores is None:
                continue
            if stores.separate_topic and stores.problem is None:
                assert stores.connector_topic is not None
                wanted.setdefault((stores.connector_topic, stores.read_committed), []).append(name)
            if stores != WORKER_ONLY:
                described[name] = stores.describe(self.worker_topic)
        task_counts, pending = self._state.fencing_records()
        for name in set(task_counts) | pending:
            if name in connectors:  # the records of a deleted connector outlive its config
                described.setdefault(name, {})["tasks_fencing"] = {
                    "task_count": task_counts.get(name),
                    "pending_fencing": name in pending,
                }
        return _Derived(wanted, {name: described[name] for name in sorted(described)})

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self._changed.set()
        self._thread = threading.Thread(target=self._run, name="connector-offsets-topics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._changed.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=10)
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            try:
                store.close()
            except Exception:
                log.exception("closing the offsets topic %s failed", store.topic)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._changed.wait(timeout=_RETRY_S)
            self._changed.clear()
            if self._stop.is_set():
                return
            for key, connectors in self._wanted().items():
                with self._lock:
                    if key in self._stores:
                        continue
                self._open(key, connectors)

    def _open(self, key: StoreKey, connectors: list[str]) -> None:
        topic, read_committed = key
        try:
            store = self._open_store(topic, read_committed)
        except Exception as exc:
            message = getattr(exc, "message", None) or repr(exc)
            log.error(
                "cannot read the offsets topic %s of connector(s) %s (retrying every %.0f s): %s",
                topic,
                ", ".join(sorted(connectors)),
                _RETRY_S,
                message,
            )
            with self._lock:
                self._failures[key] = (message, time.time())
                if isinstance(exc, TopicMisconfigured):  # the topic as it is (not compacted): not a wait
                    self._refused[key] = message
            return
        log.info(
            "reading the offsets topic %s (%s) of connector(s) %s",
            topic,
            "read_committed" if read_committed else "read_uncommitted",
            ", ".join(sorted(connectors)),
        )
        with self._lock:
            if self._stop.is_set():
                store.close()
                return
            self._stores[key] = store
            self._failures.pop(key, None)
            self._refused.pop(key, None)

    # -- for requests ---------------------------------------------------------------------
    def store(self, stores: ConnectorStores) -> TopicStore:
        """The connector store of ``stores`` (a separate topic), read to its end; ``NotReady`` until then,
        ``ConnectorStoreUnavailable`` when the daemon cannot read it."""
        if stores.problem is not None:
            raise ConnectorStoreUnavailable(f"The daemon cannot serve this connector's offsets: {stores.problem}")
        assert stores.connector_topic is not None
        key = (stores.connector_topic, stores.read_committed)
        with self._lock:
            store = self._stores.get(key)
            failure = self._failures.get(key)
            refused = self._refused.get(key)
        if store is None and refused is not None:
            # Connect fails this connector alone (its store cannot start): a 500 with the reason, at once;
            # retried in the background, so fixing the topic needs no restart.
            raise ConnectorStoreUnavailable(f"The connector's offsets topic '{stores.connector_topic}': {refused}")
        if store is None:
            self._changed.set()
            why = f"; last attempt: {failure[0]}" if failure is not None else ""
            raise NotReadyYet(
                f"The connector's offsets topic '{stores.connector_topic}' is not open yet{why}; try again"
            )
        progress = store.log.progress()
        if progress.error is not None:
            raise NotReady(f"The connector's offsets topic '{store.topic}' cannot be read: {progress.error}")
        if not progress.caught_up:
            raise NotReadyYet(
                f"The connector's offsets topic '{store.topic}' has not been read to its end yet "
                f"({progress.records_read} records read; {progress.partitions_done}/{len(progress.end_offsets)} "
                "partitions at their end offsets); try again shortly"
            )
        return store

    def open_stores(self) -> list[TopicStore]:
        with self._lock:
            return list(self._stores.values())

    def readiness(self) -> dict[str, Any]:
        """For ``/readyz`` and ``/status``: every store current configs need, ready or not, and why."""
        wanted = self._wanted()
        with self._lock:
            stores = dict(self._stores)
            failures = dict(self._failures)
            refused = set(self._refused)
        topics: list[dict[str, Any]] = []
        for key in sorted(set(wanted) | set(stores)):
            topic, read_committed = key
            entry: dict[str, Any] = {
                "topic": topic,
                "isolation": isolation_name(read_committed),
                "connectors": sorted(wanted.get(key, [])),
                "open": key in stores,
            }
            store = stores.get(key)
            if store is not None:
                progress = store.log.progress()
                entry.update(
                    ready=progress.caught_up and progress.error is None,
                    records_read=progress.records_read,
                    partitions_at_end=progress.partitions_done,
                    partitions=len(progress.end_offsets),
                    lag=sum(progress.lag().values()),
                    live_keys=store.view.live_keys(),
                    # Keys Connect would skip in this topic, by reason, as /status's view counts the worker's.
                    skipped_keys=dict(store.view.stats.skipped_keys),
                    skipped_keys_total=sum(store.view.stats.skipped_keys.values()),
                    error=progress.error,
                    last_error=progress.last_error,
                )
            else:
                failure = failures.get(key)
                entry.update(
                    ready=False,
                    error=None if failure is None else failure[0],
                    error_at=None if failure is None else format_time_ms(int(failure[1] * 1000)),
                    refused=key in refused,
                )
            topics.append(entry)
        return {
            # A topic refused as configured fails its connectors (500), as in Connect; the daemon serves the rest.
            "ready": all(t["ready"] or t.get("refused") for t in topics if t["connectors"]),
            "exactly_once_source": self.eos.support,
            "group_id": self.eos.group_id,
            "topics": topics,
            "connectors": self.describe_connectors(),
        }

    def describe_connectors(self) -> dict[str, dict[str, Any]]:
        """Which offsets topics each source connector uses (those with a store besides the worker's alone),
        and the KIP-618 fencing record of every connector that has one."""
        return dict(self._derived_now.get().described)
