"""With ``--config-topic``/``--status-topic`` the daemon applies Connect's herder rules to offsets requests.

Every config and status record here is written by Apache Kafka 4.3.0's own ``KafkaConfigBackingStore``
and ``KafkaStatusBackingStore`` (through the Java oracle), the stores a distributed herder uses:
``putConnectorConfig`` creates, ``putTaskConfigs`` starts tasks (``[]`` is what stopping writes),
``putTargetState`` pauses/stops/resumes, ``removeConnectorConfig`` deletes. Expected messages are
Connect's (``DistributedHerder.modifyConnectorOffsetsChecks``, ``AbstractHerder.connectorOffsets``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator.codec.murmur2 import partition_for
from emulator.connect_cluster import ConnectCluster
from emulator.model.connectors import not_found_message, not_stopped_message
from emulator.model.errors import ERROR_HEADER, NotReady
from emulator.service.results import ALTERED, RESET
from tests.fixtures.broker import TANSU_TAIL_FETCH_WAIT_MS, TansuBroker
from tests.fixtures.connect_cluster import (
    ConnectClusterDaemon,
    config,
    connect_cluster_args,
    connector_status,
    remove,
    stop,
    target,
    tasks,
)
from tests.fixtures.daemon import free_port
from tests.integration.connect_helpers import JAVA_ONE_RECORD_PER_BATCH, eventually, unique
from tests.oracle import JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]

FILE_OFFSET = [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 42}}]


@pytest.mark.slow
def test_an_unknown_connector_is_404_even_with_offsets_in_the_topic(cluster: ConnectClusterDaemon) -> None:
    name = unique("ghost")
    cluster.oracle.offsets_write(
        cluster.broker.bootstrap,
        cluster.offsets_topic,
        name,
        [(T.jmap([("filename", "/data/in.txt")]), T.jmap([("position", T.long(7))]))],
        partitions=cluster.offsets_partitions,
        extra_config=JAVA_ONE_RECORD_PER_BATCH,
    )
    records = eventually(
        lambda: cluster.http.get("/offsets/records", params={"connector": name}).json()["records"], bool
    )
    assert records, "the daemon never read the offsets Java wrote"
    assert name not in cluster.http.get("/connectors").json(), "Connect lists configured connectors only"
    expected = {"error_code": 404, "message": not_found_message(name)}
    for response in (cluster.get(name), cluster.patch(name, FILE_OFFSET), cluster.delete(name)):
        assert (response.status_code, response.json()) == (404, expected)
        assert response.headers[ERROR_HEADER] == "connector_not_found"


@pytest.mark.slow
def test_get_connectors_lists_the_clusters_configured_connectors_as_connect_does(
    cluster: ConnectClusterDaemon,
) -> None:
    """Connect's ``GET /connectors`` is ``ClusterConfigState.connectors()``: every connector with a live
    config, with offsets or not, sink or source; a connector with offsets but no config is not one."""
    fresh, stopped, removed, ghost = (unique(p) for p in ("fresh", "stopped", "removed", "ghost"))
    cluster.write(config(removed), *stop(removed))
    cluster.write(remove(removed))
    java = cluster.write(config(fresh), config(stopped), *stop(stopped))
    cluster.oracle.offsets_write(
        cluster.broker.bootstrap,
        cluster.offsets_topic,
        ghost,
        [(T.jmap([("filename", "/data/in.txt")]), T.jmap([("position", T.long(7))]))],
        partitions=cluster.offsets_partitions,
        extra_config=JAVA_ONE_RECORD_PER_BATCH,
    )
    eventually(lambda: cluster.http.get("/offsets/records", params={"connector": ghost}).json()["records"], bool)
    listed = eventually(lambda: cluster.http.get("/connectors").json(), lambda names: fresh in names)
    assert listed == sorted(listed)
    assert {fresh, stopped} <= set(listed) and java[fresh]["contains"] and java[stopped]["contains"]
    assert removed not in listed and ghost not in listed


@pytest.mark.slow
def test_a_running_connector_refuses_patch_and_delete_with_connects_message(cluster: ConnectClusterDaemon) -> None:
    name = unique("running")
    view = cluster.write(config(name), tasks(name, 2))
    assert (view[name]["target_state"], view[name]["task_count"]) == ("STARTED", 2)
    refused = {"error_code": 400, "message": not_stopped_message(name)}
    for response in (cluster.patch(name, FILE_OFFSET), cluster.delete(name)):
        assert (response.status_code, response.json()) == (400, refused)
        assert response.headers[ERROR_HEADER] == "not_stopped", "typed by kind, not by Connect's message"
    # GET works in any state; a configured connector that never committed has no offsets.
    response = cluster.get(name)
    assert (response.status_code, response.json()) == (200, {"offsets": []})


@pytest.mark.slow
def test_a_paused_connector_is_refused_too(cluster: ConnectClusterDaemon) -> None:
    name = unique("paused")
    view = cluster.write(config(name), tasks(name, 1), target(name, "PAUSED"))
    assert view[name]["target_state"] == "PAUSED"
    response = cluster.patch(name, FILE_OFFSET)
    assert (response.status_code, response.json()["message"]) == (400, not_stopped_message(name))


@pytest.mark.slow
def test_stopped_in_the_target_state_but_tasks_still_committed_is_refused(cluster: ConnectClusterDaemon) -> None:
    name = unique("stopping")
    view = cluster.write(config(name), tasks(name, 2), target(name, "STOPPED"))  # no empty task commit yet
    assert (view[name]["target_state"], view[name]["task_count"]) == ("STOPPED", 2)
    response = cluster.delete(name)
    assert (response.status_code, response.json()["message"]) == (400, not_stopped_message(name))


@pytest.mark.slow
def test_a_stopped_connector_with_zero_tasks_may_be_altered_and_reset(cluster: ConnectClusterDaemon) -> None:
    name = unique("stopped")
    view = cluster.write(config(name), tasks(name, 1), *stop(name))
    assert (view[name]["target_state"], view[name]["task_count"]) == ("STOPPED", 0)

    altered = cluster.patch(name, FILE_OFFSET)
    assert (altered.status_code, altered.json()) == (200, {"message": ALTERED})
    assert cluster.get(name).json() == {"offsets": FILE_OFFSET}
    # Java's own reader, as the restarted task would read, sees the offset.
    offsets, _ = cluster.oracle.offsets_read(
        cluster.broker.bootstrap,
        cluster.offsets_topic,
        name,
        [T.jmap([("filename", "/data/in.txt")])],
        num_partitions=cluster.offsets_partitions,
    )
    assert T.to_python(offsets[0]) == {"position": 42}

    reset = cluster.delete(name)
    assert (reset.status_code, reset.json()) == (200, {"message": RESET})
    assert cluster.get(name).json() == {"offsets": []}


@pytest.mark.slow
def test_a_deleted_connector_is_404_again(cluster: ConnectClusterDaemon) -> None:
    name = unique("deleted")
    cluster.write(config(name), *stop(name))
    assert cluster.patch(name, FILE_OFFSET).status_code == 200
    view = cluster.write(remove(name))
    assert view[name]["contains"] is False
    # A modification reads the config topic to its end first, so it sees the removal at once.
    response = cluster.delete(name)
    assert (response.status_code, response.json()["message"]) == (404, not_found_message(name))
    got = eventually(lambda: cluster.get(name), lambda r: r.status_code == 404)
    assert got.status_code == 404, got.text


@pytest.mark.slow
def test_state_changes_after_startup_are_seen_by_the_next_modification(cluster: ConnectClusterDaemon) -> None:
    """Stop, then PATCH at once, then resume, then PATCH at once: no waiting, no stale answer."""
    name = unique("lifecycle")
    cluster.write(config(name), tasks(name, 1))
    assert cluster.patch(name, FILE_OFFSET).status_code == 400
    cluster.write(*stop(name))
    assert cluster.patch(name, FILE_OFFSET).status_code == 200
    cluster.write(target(name, "STARTED"), tasks(name, 1))  # PUT /resume, then the tasks come back
    assert cluster.delete(name).status_code == 400
    assert cluster.get(name).json() == {"offsets": FILE_OFFSET}


def test_readiness_covers_the_connect_topics(cluster: ConnectClusterDaemon) -> None:
    body = cluster.http.get("/readyz").json()
    topics = body["connect_cluster"]["topics"]
    assert body["ready"] is True
    assert topics[cluster.config_topic]["ready"] and topics[cluster.status_topic]["ready"]
    assert body["connect_cluster"]["skipped_records_total"] == 0


def test_offset_reads_wait_until_the_config_topic_was_read(
    kafka_broker: TansuBroker, cluster: ConnectClusterDaemon
) -> None:
    view = ConnectCluster(
        kafka_broker.bootstrap, cluster.config_topic, cluster.status_topic, tail_fetch_wait_ms=TANSU_TAIL_FETCH_WAIT_MS
    )
    view.open()
    try:
        with pytest.raises(NotReady, match="has not been read to its end yet"):
            view.ensure_ready()  # opened, not read: never answer from a partial view
        view.start_reading()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                view.ensure_ready()
                break
            except NotReady:
                time.sleep(0.05)
        view.ensure_ready()
    finally:
        view.close()


def serve_on(
    broker: TansuBroker, offsets_topic: str, config_topic: str, data_dir: Path
) -> subprocess.CompletedProcess[str]:
    """``serve`` on a Connect cluster's topics, run to its end: for start-ups the daemon refuses."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "emulator.cli",
            "serve",
            "--port",
            str(free_port()),
            *connect_cluster_args(broker.bootstrap, offsets_topic, config_topic=config_topic),
            "--data-dir",
            str(data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_a_missing_config_topic_stops_the_daemon_with_a_clear_error(kafka_broker: TansuBroker, tmp_path: Path) -> None:
    missing, offsets_topic = unique("no-such-configs"), unique("offs")
    done = serve_on(kafka_broker, offsets_topic, missing, tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"Connect's config topic '{missing}' does not exist" in done.stderr
    assert "--config-topic" in done.stderr
    topics = kafka_broker.admin().list_topics(timeout=10).topics
    assert offsets_topic not in topics, "a daemon refused at start-up created its offsets topic on the cluster"


@pytest.mark.slow
def test_a_topic_that_cannot_be_connects_config_topic_stops_the_daemon(
    kafka_broker: TansuBroker, tmp_path: Path
) -> None:
    """A worker refuses a config topic of several partitions; the daemon started on one without a word
    (a data topic named by mistake), and on --offsets-topic equal to --config-topic it would have
    written offsets into Connect's configurations."""
    several = unique("configs-3")
    kafka_broker.create_topic(several, 3, {"cleanup.policy": "compact"})

    wide = serve_on(kafka_broker, unique("offs"), several, tmp_path)
    assert wide.returncode == 2, wide.stderr[-2000:]
    assert f"Connect's config topic '{several}' has 3 partitions" in wide.stderr and "--config-topic" in wide.stderr
    same = serve_on(kafka_broker, several, several, tmp_path)
    assert same.returncode == 2, same.stderr[-2000:]
    assert f"--offsets-topic and --config-topic name the same topic '{several}'" in same.stderr


# --- our reading of the topics is Java's reading ---------------------------------------------------------


@pytest.mark.slow
def test_the_daemons_reading_of_config_and_status_records_matches_javas(
    kafka_broker: TansuBroker, java_oracle: JavaOracle
) -> None:
    """Records from Java's stores plus hand-written ones Connect must tolerate, read by both sides."""
    config_topic, status_topic = unique("cfg"), unique("status")
    names = {k: unique(k) for k in ("stopped", "old_worker", "bad_v2", "bad_json", "orphan", "bad_props", "untargeted")}
    java_oracle.connect_cluster_write(
        kafka_broker.bootstrap,
        config_topic,
        [
            config(names["stopped"]),
            tasks(names["stopped"], 2),
            *stop(names["stopped"]),
            config(names["old_worker"]),
            config(names["bad_v2"]),
            config(names["bad_json"], state="PAUSED"),
            config(names["untargeted"], state="STOPPED"),
            connector_status(names["stopped"], "STOPPED", generation=4),
            connector_status(names["old_worker"], "RUNNING", generation=2),
        ],
        status_topic=status_topic,
    )

    def cfg(key: str, value: str | None) -> tuple[bytes, bytes | None, int]:
        return key.encode(), None if value is None else value.encode(), 0

    def status(name: str, value: str) -> tuple[bytes, bytes, int]:
        key = f"status-connector-{name}".encode()
        return key, value.encode(), partition_for(key, 5)  # where Java's producer puts that key

    kafka_broker.produce_raw(
        config_topic,
        [
            cfg(f"target-state-{names['old_worker']}", '{"state":"PAUSED"}'),  # a pre-3.5 worker: no state.v2
            cfg(f"target-state-{names['bad_v2']}", '{"state":"PAUSED","state.v2":7}'),  # falls back to state
            cfg(f"target-state-{names['bad_json']}", '{"state":'),  # unparseable: skipped, stays PAUSED
            cfg(f"commit-{names['orphan']}", '{"tasks":3}'),  # no config: ignored
            cfg(f"connector-{names['bad_props']}", '{"properties":"oops"}'),  # wrong shape: skipped
            cfg(f"target-state-{names['untargeted']}", None),  # removed, config live: back to STARTED
            cfg("nonsense-key", "{}"),  # unknown key: discarded
        ],
    )
    kafka_broker.produce_raw(
        status_topic,
        [
            status(names["stopped"], '{"state":"SLEEPING","trace":null,"worker_id":"w","generation":5}'),
            status(names["old_worker"], '{"state":"PAUSED","trace":"t","worker_id":"w2:8083","generation":3}'),
        ],
    )
    wanted = sorted(names.values())
    java = java_oracle.connect_cluster_read(kafka_broker.bootstrap, config_topic, wanted, status_topic=status_topic)

    ours = ConnectCluster(
        kafka_broker.bootstrap, config_topic, status_topic, tail_fetch_wait_ms=TANSU_TAIL_FETCH_WAIT_MS
    )
    ours.open()
    try:
        ours.start_reading()
        ours.refresh(20)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and ours.state.stats()["status_records"] < 4:
            time.sleep(0.05)
        mine = {}
        for name in wanted:
            snap = ours.snapshot(name)
            mine[name] = {
                "contains": snap.exists,
                "target_state": snap.target_state,
                "task_count": snap.task_count,
                "task_count_record": snap.task_count_record,
                "pending_fencing": snap.pending_fencing,
                "config": snap.config,
                "status": None
                if snap.status is None
                else {k: v for k, v in snap.status.as_dict().items() if k != "version"},
            }
        skipped = ours.state.stats()["skipped_records"]
    finally:
        ours.close()
    assert json.dumps(mine, sort_keys=True, indent=1) == json.dumps(java, sort_keys=True, indent=1)
    # The facts the records were chosen for, as Java reported them:
    assert java[names["old_worker"]]["target_state"] == "PAUSED"
    assert java[names["bad_v2"]]["target_state"] == "PAUSED"
    assert java[names["bad_json"]]["target_state"] == "PAUSED"
    assert java[names["untargeted"]]["target_state"] == "STARTED"
    assert java[names["orphan"]]["contains"] is False and java[names["bad_props"]]["contains"] is False
    assert java[names["stopped"]]["status"]["state"] == "STOPPED"  # the SLEEPING record was skipped
    assert java[names["old_worker"]]["status"]["state"] == "PAUSED"
    assert skipped == {"unparseable": 1, "bad_connector_config": 1, "unknown_key": 1, "bad_status": 1}
