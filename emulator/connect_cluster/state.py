"""Connector states materialized from Connect's config and status topics, exactly as Connect reads them.

The rules are ``KafkaConfigBackingStore.ConsumeCallback`` (config topic) and
``KafkaStatusBackingStore.read`` (status topic), record by record, including their quirks, because
the herder's offsets checks are decided on this state (``DistributedHerder.modifyConnectorOffsetsChecks``):

- a connector exists iff it has a live ``connector-<c>`` config;
- its target state comes from ``target-state-<c>`` (``state.v2`` preferred, ``state`` as the fallback
  older workers understand); a config without one counts as ``STARTED``; a removed target state of a
  connector that still has a config reverts to ``STARTED``;
- its task count is the latest ``commit-<c>`` ``{"tasks":N}``, 0 when there is none, and is dropped
  with the config;
- KIP-618's ``tasks-fencing-<c>`` ``{"task-count":N}``: how many tasks of the previous generation the
  leader last fenced (or must fence: a task commit after it leaves the connector pending fencing);
  kept across the connector's removal, as Connect keeps it.

Bad records are what Connect logs and skips: we do the same and count them per reason, so an
operator sees them in ``/status`` and the reader never stops on them.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from emulator.codec.values import CodecError, loads_lenient
from emulator.connect_cluster.java_text import parse_int
from emulator.model.records import LogRecord

log = logging.getLogger(__name__)

TARGET_STATE_PREFIX = "target-state-"
CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_TASKS_PREFIX = "commit-"
TASK_COUNT_PREFIX = "tasks-fencing-"
# Config records we recognise but do not need (restarts, session keys, log levels).
_OTHER_CONFIG_PREFIXES = ("restart-connector-", "logger-cluster-")
_SESSION_KEY = "session-key"

CONNECTOR_STATUS_PREFIX = "status-connector-"
_OTHER_STATUS_PREFIXES = ("status-task-", "status-topic-")

TARGET_STATES = frozenset({"STARTED", "PAUSED", "STOPPED"})
STATUS_STATES = frozenset({"UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "DESTROYED", "RESTARTING", "STOPPED"})


@dataclass(frozen=True, slots=True)
class ConnectorStatus:
    """``status-connector-<c>``: what the worker running the connector last reported."""

    state: str
    trace: str | None
    worker_id: str | None
    generation: int
    version: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "trace": self.trace,
            "worker_id": self.worker_id,
            "generation": self.generation,
            "version": self.version,
        }


@dataclass(frozen=True, slots=True)
class ConnectorSnapshot:
    """One connector as the herder sees it (``ClusterConfigState`` plus its status)."""

    name: str
    config: dict[str, Any] | None
    target_state: str | None
    task_count: int
    inconsistent: bool
    status: ConnectorStatus | None
    task_count_record: int | None = None
    """KIP-618's ``tasks-fencing-<c>``: the task count the leader last fenced; None without one."""
    pending_fencing: bool = False
    """Task configs were committed after that record: the next generation needs zombie fencing first."""

    @property
    def exists(self) -> bool:
        return self.config is not None


class _Skip(Exception):
    """A record Connect would log and ignore; the message says why."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def _java_type(value: object) -> str:
    """The Java class Connect names in its log lines for a value of this shape."""
    if value is None:
        return "null"
    return {
        bool: "java.lang.Boolean",
        int: "java.lang.Long",
        float: "java.lang.Double",
        str: "java.lang.String",
        list: "java.util.ArrayList",
        dict: "java.util.HashMap",
    }.get(type(value), type(value).__name__)


def _int_value(value: object) -> int:
    """``KafkaConfigBackingStore.intValue``: an Integer or a Long (cast to int, i.e. low 32 bits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        wrapped = value & 0xFFFF_FFFF
        return wrapped - (1 << 32) if wrapped >> 31 else wrapped
    raise _Skip("bad_commit", "Expected integer value to be either Integer or Long")


def parse_task_key(key: str) -> tuple[str, int] | None:
    """``KafkaConfigBackingStore.parseTaskId``: ``task-<connector>-<n>``, split on every ``-``.

    Java's ``String.split`` drops trailing empty strings, so ``task-a-`` has two parts and is refused.
    """
    parts = key.split("-")
    while parts and parts[-1] == "":
        parts.pop()
    if len(parts) < 3:
        return None
    try:
        number = parse_int(parts[-1])
    except ValueError:
        return None
    return "-".join(parts[1:-1]), number


class ClusterState:
    """The herder's view of one Connect cluster, updated from the reader threads.

    Thread-safe: the config and status readers apply records under one lock and request handlers
    read snapshots under it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._configs: dict[str, dict[str, Any]] = {}
        self._target_states: dict[str, str] = {}
        self._task_counts: dict[str, int] = {}
        self._task_configs: dict[tuple[str, int], dict[str, Any]] = {}
        self._deferred: dict[str, dict[int, dict[str, Any]]] = {}
        self._inconsistent: set[str] = set()
        self._statuses: dict[str, ConnectorStatus] = {}
        self._task_count_records: dict[str, int] = {}
        self._pending_fencing: set[str] = set()
        self._config_listeners: list[Callable[[], None]] = []
        self.config_records = 0
        self.status_records = 0
        self.skipped: Counter[str] = Counter()

    # ------------------------------------------------------------------ reads

    def snapshot(self, name: str) -> ConnectorSnapshot:
        with self._lock:
            config = self._configs.get(name)
            return ConnectorSnapshot(
                name=name,
                config=None if config is None else dict(config),
                target_state=self._target_states.get(name),
                task_count=self._task_counts.get(name, 0),
                inconsistent=name in self._inconsistent,
                status=self._statuses.get(name),
                task_count_record=self._task_count_records.get(name),
                pending_fencing=name in self._pending_fencing,
            )

    def configs(self) -> dict[str, dict[str, Any]]:
        """Every live connector config (copies), for deciding which offsets topics to read."""
        with self._lock:
            return {name: dict(config) for name, config in self._configs.items()}

    def config_objects(self) -> dict[str, Mapping[str, Any]]:
        """Every live connector config as held, not copied: a config record replaces a connector's whole
        dict and nothing mutates one once applied, so a reader may keep what it derived from a config
        for as long as it gets the same object back (``is``). Callers must not modify them."""
        with self._lock:
            return dict(self._configs)

    def fencing_records(self) -> tuple[dict[str, int], frozenset[str]]:
        """KIP-618's task-count records and the connectors with a fencing round due (task configs newer
        than their task-count record), for every connector that has either."""
        with self._lock:
            return dict(self._task_count_records), frozenset(self._pending_fencing)

    def config_version(self) -> int:
        """Changes whenever a config-topic record was applied: what ``configs()``, the task-count records
        and pending fencings depend on, so a reader may keep what it derived from them until it changes."""
        return self.config_records

    def add_config_listener(self, listener: Callable[[], None]) -> None:
        """Have ``listener()`` called after every batch of config records (on the reader thread: it
        must only note the change and return)."""
        self._config_listeners.append(listener)

    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self._configs)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "connectors": len(self._configs),
                "config_records": self.config_records,
                "status_records": self.status_records,
                "skipped_records": dict(self.skipped),
                "skipped_records_total": sum(self.skipped.values()),
            }

    # ------------------------------------------------------------------ config topic

    def apply_config(self, records: Sequence[LogRecord]) -> None:
        """Records of the config topic, in log order (a ``RecordSink``)."""
        for record in records:
            with self._lock:
                self.config_records += 1
                try:
                    self._apply_config(record)
                except _Skip as skip:
                    self.skipped[skip.reason] += 1
                    log.error("config topic %d@%d: %s", record.partition, record.offset, skip)
        for listener in self._config_listeners:
            try:
                listener()
            except Exception:  # a listener must never stop the config reader
                log.exception("config listener %r failed", listener)

    def _apply_config(self, record: LogRecord) -> None:
        if record.key is None:
            raise _Skip("null_key", "Discarding config update record with a null key")
        key = record.key.decode("utf-8", errors="replace")  # StringDeserializer
        value = self._parse(record.value, "config")
        if key.startswith(TARGET_STATE_PREFIX):
            self._target_state(key[len(TARGET_STATE_PREFIX) :], value)
        elif key.startswith(CONNECTOR_PREFIX):
            self._connector_config(key[len(CONNECTOR_PREFIX) :], value)
        elif key.startswith(TASK_PREFIX):
            task = parse_task_key(key)
            if task is None:
                raise _Skip("bad_task_key", f"Ignoring task configuration because {key} couldn't be parsed")
            self._task_config(task, value)
        elif key.startswith(COMMIT_TASKS_PREFIX):
            self._tasks_commit(key[len(COMMIT_TASKS_PREFIX) :], value)
        elif key.startswith(TASK_COUNT_PREFIX):
            self._task_count_record(key[len(TASK_COUNT_PREFIX) :], value)
        elif key.startswith(_OTHER_CONFIG_PREFIXES) or key == _SESSION_KEY:
            return
        else:
            raise _Skip("unknown_key", f"Discarding config update record with invalid key: {key}")

    @staticmethod
    def _parse(raw: bytes | None, topic: str) -> Any:
        if raw is None:
            return None
        try:
            return loads_lenient(raw)
        except CodecError as exc:
            raise _Skip("unparseable", f"Failed to convert {topic} data to Kafka Connect format: {exc}") from exc

    def _target_state(self, name: str, value: Any) -> None:
        if value is None:
            self._target_states.pop(name, None)
            if name in self._configs:
                self._target_states[name] = "STARTED"
            return
        if not isinstance(value, dict):
            raise _Skip(
                "bad_target_state",
                f"Ignoring target state for connector '{name}' because it is in the wrong format: {_java_type(value)}",
            )
        state = value.get("state.v2")
        if state is not None and not isinstance(state, str):
            log.error("Invalid data for target state for connector '%s': 'state.v2' field should be a String", name)
            state = None
        if state is None:
            state = value.get("state")
            if not isinstance(state, str):
                raise _Skip(
                    "bad_target_state",
                    f"Invalid data for target state for connector '{name}': 'state' field should be a String "
                    f"but is {_java_type(state)}",
                )
        if state not in TARGET_STATES:
            raise _Skip("bad_target_state", f"Invalid target state for connector '{name}': {state}")
        self._target_states[name] = state

    def _connector_config(self, name: str, value: Any) -> None:
        if value is None:
            self._remove_connector(name)
            return
        if not isinstance(value, dict):
            raise _Skip(
                "bad_connector_config",
                f"Ignoring configuration for connector '{name}' because it is in the wrong format: {_java_type(value)}",
            )
        properties = value.get("properties")
        if not isinstance(properties, dict):
            raise _Skip(
                "bad_connector_config",
                f"Invalid data for config for connector '{name}': 'properties' field should be a Map but is "
                f"{_java_type(properties)}",
            )
        self._configs[name] = properties
        self._target_states.setdefault(name, "STARTED")  # connectors created by 0.9 workers

    def _task_config(self, task: tuple[str, int], value: Any) -> None:
        name, number = task
        if value is None:
            raise _Skip("bad_task_config", f"Ignoring task configuration for task {name}-{number}: unexpectedly null")
        properties = value.get("properties") if isinstance(value, dict) else None
        if not isinstance(properties, dict):
            raise _Skip("bad_task_config", f"Invalid data for config of task {name}-{number}")
        self._deferred.setdefault(name, {})[number] = properties

    def _tasks_commit(self, name: str, value: Any) -> None:
        if name not in self._configs:
            # Deleted connector whose config and tombstone were compacted away: Connect ignores the commit.
            self._remove_connector(name)
            return
        if not isinstance(value, dict):
            raise _Skip(
                "bad_commit",
                f"Ignoring connector tasks configuration commit for connector '{name}' because it is in the "
                f"wrong format: {_java_type(value)}",
            )
        count = _int_value(value.get("tasks"))
        deferred = self._deferred.get(name)
        ids = set(deferred or ())
        if len(ids) < count or any(i not in ids for i in range(count)):
            self._inconsistent.add(name)  # compaction left an incomplete set: Connect waits for the next one
        else:
            for number, properties in (deferred or {}).items():
                self._task_configs[(name, number)] = properties
            self._inconsistent.discard(name)
        if deferred is not None:
            deferred.clear()
        self._task_counts[name] = count
        # Task configs newer than the latest task count record: a round of zombie fencing is due.
        self._pending_fencing.add(name)

    def _task_count_record(self, name: str, value: Any) -> None:
        """``processTaskCountRecord``: KIP-618's record of how many tasks the leader fenced."""
        if not isinstance(value, dict):
            raise _Skip(
                "bad_task_count",
                f"Ignoring task count record for connector '{name}' because it is in the wrong format: "
                f"{_java_type(value)}",
            )
        try:
            count = _int_value(value.get("task-count"))
        except _Skip as skip:
            raise _Skip("bad_task_count", str(skip)) from None
        self._task_count_records[name] = count
        self._pending_fencing.discard(name)

    def _remove_connector(self, name: str) -> None:
        """``processConnectorRemoval``: the target state is left alone (its own tombstone removes it)."""
        self._configs.pop(name, None)
        self._task_counts.pop(name, None)
        for task in [t for t in self._task_configs if t[0] == name]:
            del self._task_configs[task]
        self._deferred.pop(name, None)

    # ------------------------------------------------------------------ status topic

    def apply_status(self, records: Sequence[LogRecord]) -> None:
        """Records of the status topic, in log order per partition (a ``RecordSink``)."""
        for record in records:
            with self._lock:
                self.status_records += 1
                try:
                    self._apply_status(record)
                except _Skip as skip:
                    self.skipped[skip.reason] += 1
                    log.error("status topic %d@%d: %s", record.partition, record.offset, skip)

    def _apply_status(self, record: LogRecord) -> None:
        if record.key is None:
            raise _Skip("null_key", "Discarding status record with a null key")
        key = record.key.decode("utf-8", errors="replace")
        if key.startswith(_OTHER_STATUS_PREFIXES):
            return
        if not key.startswith(CONNECTOR_STATUS_PREFIX):
            raise _Skip("unknown_key", f"Discarding record with invalid key {key}")
        name = key[len(CONNECTOR_STATUS_PREFIX) :]
        if not name:
            raise _Skip("unknown_key", f"Discarding record with invalid connector status key {key}")
        if record.value is None:
            self._statuses.pop(name, None)
            return
        self._statuses[name] = self._parse_status(name, self._parse(record.value, "status"))

    @staticmethod
    def _parse_status(name: str, value: Any) -> ConnectorStatus:
        """``parseConnectorStatus``: any cast that would fail in Java skips the record."""
        if not isinstance(value, dict):
            raise _Skip("bad_status", f"Invalid connector status type {_java_type(value)} for connector {name}")
        state, trace, worker, generation, version = (
            value.get(k) for k in ("state", "trace", "worker_id", "generation", "version")
        )
        if (
            not isinstance(state, str)
            or state not in STATUS_STATES
            or not (trace is None or isinstance(trace, str))
            or not (worker is None or isinstance(worker, str))
            or not (version is None or isinstance(version, str))
            or not isinstance(generation, int)
            or isinstance(generation, bool)
        ):
            raise _Skip("bad_status", f"Failed to deserialize connector status for connector {name}")
        wrapped = generation & 0xFFFF_FFFF  # Long.intValue()
        return ConnectorStatus(state, trace, worker, wrapped - (1 << 32) if wrapped >> 31 else wrapped, version)
