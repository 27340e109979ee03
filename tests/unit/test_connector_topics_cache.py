"""Which connectors' own offsets topics to read is derived from the config topic once per change, and
only for the connectors a change touched.

``/readyz`` (every probe), ``/status`` and ``/metrics`` (every scrape) ask which stores the current
configs need and which topics each source connector uses; with 10,000 connectors deriving that took
~80 ms of the interpreter each time, on the event loop. It is kept until a config record arrives, and
a record then costs the derivation of its own connector only — so what must hold is that every config
change is seen at once, that nothing is derived again without one, and that a connector's fencing
records are described as they change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from emulator.connect_cluster import offsets_topics
from emulator.connect_cluster.offsets_topics import ConnectorTopics
from emulator.connect_cluster.state import ClusterState
from emulator.model.exactly_once import DISABLED
from emulator.model.records import LogRecord

WORKER_TOPIC = "connect-offsets"
offset = 0


def config_record(name: str, own_topic: str | None, deleted: bool = False) -> LogRecord:
    global offset
    offset += 1
    properties: dict[str, Any] = {"connector.class": "FileStreamSourceConnector", "name": name}
    if own_topic is not None:
        properties["offsets.storage.topic"] = own_topic
    value = None if deleted else json.dumps({"properties": properties}).encode()
    return LogRecord(f"connector-{name}".encode(), value, 0, offset, 0)


def registry(state: ClusterState) -> ConnectorTopics:
    def never_opened(topic: str, read_committed: bool) -> offsets_topics.TopicStore:
        raise AssertionError("the registry's thread is not started here")

    return ConnectorTopics(state, WORKER_TOPIC, "broker:9092", DISABLED, never_opened)


def wanted(topics: ConnectorTopics) -> dict[str, list[str]]:
    return {t["topic"]: t["connectors"] for t in topics.readiness()["topics"]}


def test_every_config_change_is_seen_by_the_next_readiness() -> None:
    state = ClusterState()
    topics = registry(state)
    state.apply_config([config_record("a", "own-1")])
    assert wanted(topics) == {"own-1": ["a"]}
    assert topics.describe_connectors()["a"]["connector_topic"] == "own-1"

    state.apply_config([config_record("a", "own-2"), config_record("b", "own-1")])
    assert wanted(topics) == {"own-1": ["b"], "own-2": ["a"]}
    assert topics.describe_connectors()["a"]["connector_topic"] == "own-2"

    state.apply_config([config_record("a", None, deleted=True), config_record("b", None)])
    assert wanted(topics) == {}
    assert topics.describe_connectors() == {}
    assert topics.separate_topic_connectors() == []


def test_nothing_is_derived_again_until_a_config_record_arrives(monkeypatch: pytest.MonkeyPatch) -> None:
    state = ClusterState()
    state.apply_config([config_record(f"c{i}", "own-1" if i % 2 else None) for i in range(100)])
    topics = registry(state)
    calls: list[str] = []
    derive = offsets_topics.connector_stores

    def counted(config: Any, *args: Any) -> Any:
        calls.append(config["name"])
        return derive(config, *args)

    monkeypatch.setattr(offsets_topics, "connector_stores", counted)
    topics.readiness()
    assert sorted(calls) == sorted(f"c{i}" for i in range(100))  # each connector's config read once

    for _ in range(5):
        topics.readiness()
        topics.describe_connectors()
    assert len(calls) == 100

    calls.clear()
    state.apply_config([config_record("c0", "own-2")])
    assert wanted(topics)["own-2"] == ["c0"]
    assert calls == ["c0"]  # the one connector the record changed, not all 100 again

    calls.clear()
    state.apply_config([config_record("c1", None, deleted=True)])
    assert "c1" not in wanted(topics)["own-1"]
    assert calls == []


def task_count_record(name: str, count: int) -> LogRecord:
    global offset
    offset += 1
    return LogRecord(f"tasks-fencing-{name}".encode(), json.dumps({"task-count": count}).encode(), 0, offset, 0)


def tasks_commit(name: str, tasks: int) -> list[LogRecord]:
    global offset
    records = []
    for task in range(tasks):
        offset += 1
        records.append(LogRecord(f"task-{name}-{task}".encode(), json.dumps({"properties": {}}).encode(), 0, offset, 0))
    offset += 1
    records.append(LogRecord(f"commit-{name}".encode(), json.dumps({"tasks": tasks}).encode(), 0, offset, 0))
    return records


def test_fencing_records_are_described_as_they_change_for_configured_connectors_only() -> None:
    state = ClusterState()
    topics = registry(state)
    state.apply_config([config_record("a", None), *tasks_commit("a", 2)])
    assert topics.describe_connectors() == {"a": {"tasks_fencing": {"task_count": None, "pending_fencing": True}}}

    state.apply_config([task_count_record("a", 2)])
    assert topics.describe_connectors() == {"a": {"tasks_fencing": {"task_count": 2, "pending_fencing": False}}}

    state.apply_config([config_record("a", None, deleted=True)])  # the fencing record outlives the config
    assert topics.describe_connectors() == {}
