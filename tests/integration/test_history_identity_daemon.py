"""One history archive per log, through real daemons: a data directory moved with ``mv``, and a Kafka
topic reached through another ``--bootstrap-servers`` string, keep the archive they had.

Before, the archive's directory was named after the log's description (the SQLite file's path, the
bootstrap string and topic): either change started a new, empty archive, re-archived the whole log
as ``external`` and left the old archive behind.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from emulator.client.history import HistoryClient
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def patch(url: str, connector: str, pos: int) -> None:
    with HistoryClient(url) as client:
        client.alter(connector, {"offsets": [{"partition": {"file": "a.txt"}, "offset": {"pos": pos}}]}, create=True)


def changes(url: str, connector: str) -> list[tuple[Any, ...]]:
    with HistoryClient(url) as client:
        found = client.history(connector, limit=1000)["changes"]
    return [(c["origin"], c["operation"], c["offset"]) for c in found]


@pytest.mark.slow
def test_an_embedded_data_directory_moved_with_mv_keeps_its_history(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    name = unique("moved")
    daemon = daemon_factory("--data-dir", str(tmp_path / "before"))
    patch(daemon.url, name, 1)
    assert changes(daemon.url, name) == [("daemon", "PATCH", {"pos": 1})]
    daemon.stop()

    shutil.move(tmp_path / "before", tmp_path / "after")
    moved = daemon_factory("--data-dir", str(tmp_path / "after"))
    patch(moved.url, name, 2)
    assert changes(moved.url, name) == [("daemon", "PATCH", {"pos": 2}), ("daemon", "PATCH", {"pos": 1})], (
        "the change made before the move is still the daemon's, and archived once"
    )
    assert len(os.listdir(tmp_path / "after" / "history")) == 1, "no second archive beside the first"


@pytest.mark.slow
@pytest.mark.kafka
def test_a_kafka_daemon_restarted_with_another_bootstrap_string_keeps_its_history(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    """127.0.0.1:PORT, then localhost:PORT: the same cluster (by its id) and topic, so the same archive."""
    topic, name, data = kafka_broker.unique_topic("identity"), unique("rebooted"), tmp_path / "data"
    common = ["--offsets-topic", topic, "--offsets-partitions", "3", "--data-dir", str(data)]
    daemon = daemon_factory("--bootstrap-servers", f"127.0.0.1:{kafka_broker.port}", *common)
    patch(daemon.url, name, 1)
    assert changes(daemon.url, name) == [("daemon", "PATCH", {"pos": 1})]
    daemon.stop()

    renamed = daemon_factory("--bootstrap-servers", f"localhost:{kafka_broker.port}", *common)
    patch(renamed.url, name, 2)
    assert changes(renamed.url, name) == [("daemon", "PATCH", {"pos": 2}), ("daemon", "PATCH", {"pos": 1})], (
        "the change made through 127.0.0.1 is still the daemon's, and archived once"
    )
    assert len(os.listdir(data / "history")) == 1, "no second archive beside the first"
