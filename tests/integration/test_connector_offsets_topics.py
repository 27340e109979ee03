"""Connectors with offsets topics of their own and exactly-once source clusters (KIP-618), against Java.

Connect reads and writes such a connector's offsets through ``ConnectorOffsetBackingStore``: a
connector store (its ``offsets.storage.topic``, or the worker's topic with exactly-once source
support) over the worker store. Every expectation here is what Apache Kafka 4.3.0's own store, built
as ``Worker`` builds it, reads from the same topics; the daemon must answer the same
(docs/connect-cluster.md, "Connectors with their own offsets topic").

The broker is a Tansu of this module's own, behind a recording proxy (``kafka_wire``): Tansu 0.6 does
not filter aborted transactions from ``read_committed`` fetches, so where a promise is about
isolation the tests check what the daemon asks the broker for, next to Java's own client settings,
and check the answers strictly only on a broker that filters (``broker_filters_aborted``).
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.broker import TansuBroker, _resolve_tansu
from tests.fixtures.cli import run_cli
from tests.fixtures.waits import until
from tests.integration.kafka_wire import INIT_PRODUCER_ID, TappedTansu
from tests.integration.kip618 import (
    Kip618Cluster,
    broker_filters_aborted,
    kip618_cluster,
    offset,
    ordered,
    partition,
    plain,
)
from tests.integration.scrape import scrape_until
from tests.oracle import JavaOracle

pytestmark = [pytest.mark.kafka, pytest.mark.jvm, pytest.mark.slow]

READ_COMMITTED = 1
READ_UNCOMMITTED = 0
DAEMON = "connect-offsets-emulator"
"""The daemon's client.id (its default), which tells its requests from Java's on the wire."""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TappedTansu]:
    tapped = TappedTansu(_resolve_tansu(), tmp_path_factory.mktemp("tapped-tansu") / "tansu.log")
    tapped.start()
    try:
        yield tapped
    finally:
        tapped.stop()


@pytest.fixture(scope="module")
def filters_aborted(broker: TappedTansu) -> bool:
    return broker_filters_aborted(broker.bootstrap)


@pytest.fixture(scope="module")
def regular(
    broker: TappedTansu, java_oracle: JavaOracle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kip618Cluster]:
    """A cluster without exactly-once source support."""
    with kip618_cluster(
        broker, java_oracle, tmp_path_factory.mktemp("kip618-regular"), exactly_once=False, prefix="regular"
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def eos(
    broker: TappedTansu, java_oracle: JavaOracle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kip618Cluster]:
    """A cluster with ``exactly.once.source.support=enabled``."""
    with kip618_cluster(
        broker, java_oracle, tmp_path_factory.mktemp("kip618-eos"), exactly_once=True, prefix="eos"
    ) as cluster:
        yield cluster


def own_topic(prefix: str) -> str:
    return TansuBroker.unique_topic(f"{prefix}-own-offsets")


def unique(prefix: str) -> str:
    return TansuBroker.unique_topic(prefix)


# --- reads: what ConnectorOffsetBackingStore yields ----------------------------------------------


def test_get_answers_what_javas_combined_store_yields_for_every_partition(regular: Kip618Cluster) -> None:
    """Partitions: the union of both stores. Offsets: the connector store's; where only the worker store
    has a partition, null (Java's connector store answers null for it, and that null wins)."""
    name = regular.source(unique("merge"), topic := own_topic("merge"))
    regular.java_topic_write(
        regular.worker_topic, name, [(partition(f="a"), offset(pos=1)), (partition(f="b"), offset(pos=2))]
    )
    regular.java_topic_write(topic, name, [(partition(f="b"), offset(pos=20)), (partition(f="c"), offset(pos=30))])

    java = regular.java_view(name)

    assert plain(java["offsets"]) == [
        {"partition": {"f": "a"}, "offset": None},
        {"partition": {"f": "b"}, "offset": {"pos": 20}},
        {"partition": {"f": "c"}, "offset": {"pos": 30}},
    ]
    assert regular.get(name) == plain(java["offsets"])
    assert regular.get(name, store="effective") == plain(java["offsets"])
    assert regular.get(name, store="connector") == plain(java["stores"]["connector"])
    assert regular.get(name, store="worker") == plain(java["stores"]["worker"])


def test_a_connector_topic_equal_to_the_workers_is_the_worker_store_alone(regular: Kip618Cluster) -> None:
    name = regular.source(unique("same-topic"), regular.worker_topic)
    regular.java_topic_write(regular.worker_topic, name, [(partition(f="x"), offset(pos=7))])

    java = regular.java_view(name)

    assert java["clients"]["has_worker_store"] is False
    assert regular.get(name) == plain(java["offsets"]) == [{"partition": {"f": "x"}, "offset": {"pos": 7}}]
    assert regular.get(name, store="connector") == regular.get(name, store="worker")


def test_a_connector_created_after_startup_has_its_topic_read(regular: Kip618Cluster) -> None:
    """The daemon was started before this connector existed: its topic is opened when the config appears."""
    topic = own_topic("late")
    name = unique("late")
    regular.java_topic_write(topic, name, [(partition(f="late"), offset(pos=5))])
    regular.source(name, topic)

    response = regular.wait_get(name)

    assert response.status_code == 200, response.text
    assert ordered(response.json()["offsets"]) == plain(regular.java_view(name)["offsets"])


# --- writes: as Connect's REST writes, read back by a fresh Java store -------------------------------


def seeded_in_both_stores(cluster: Kip618Cluster, label: str) -> str:
    """A connector with its own topic, written by Java: ``w`` in the worker store only, ``c`` and
    ``gone`` in the connector store; the daemon already shows what Java reads. Returns the connector's name."""
    name = cluster.source(unique(label), topic := own_topic(label))
    cluster.java_topic_write(cluster.worker_topic, name, [(partition(f="w"), offset(pos=1))])
    cluster.java_topic_write(topic, name, [(partition(f="c"), offset(pos=2)), (partition(f="gone"), offset(pos=3))])
    opened = cluster.wait_get(name)  # the daemon opens the topic once it reads the new config: 503 until then
    assert opened.status_code == 200, opened.text
    assert cluster.get(name) == plain(cluster.java_view(name)["offsets"])
    return name


@pytest.mark.parametrize("which", ["regular", "eos"])
def test_patch_and_delete_are_read_back_identically_by_a_fresh_java_store(
    which: str, request: pytest.FixtureRequest
) -> None:
    cluster: Kip618Cluster = request.getfixturevalue(which)
    name = seeded_in_both_stores(cluster, f"write-{which}")

    body = {
        "offsets": [
            {"partition": {"f": "w"}, "offset": {"pos": 10}},
            {"partition": {"f": "new"}, "offset": {"pos": 11}},
            {"partition": {"f": "gone"}, "offset": None},
        ]
    }
    patched = cluster.http.patch(f"/connectors/{name}/offsets", json=body)

    assert patched.status_code == 200, patched.text
    after_patch = plain(cluster.java_view(name)["offsets"])
    assert after_patch == [
        {"partition": {"f": "c"}, "offset": {"pos": 2}},
        {"partition": {"f": "new"}, "offset": {"pos": 11}},
        {"partition": {"f": "w"}, "offset": {"pos": 10}},
    ]
    assert cluster.get(name) == after_patch

    deleted = cluster.http.delete(f"/connectors/{name}/offsets")

    assert deleted.status_code == 200, deleted.text
    assert plain(cluster.java_view(name)["offsets"]) == [] == cluster.get(name)


def test_a_write_goes_in_kafka_15018s_order_with_the_same_bytes_in_each_topic(regular: Kip618Cluster) -> None:
    """Tombstones to the worker's topic first, then every record to the connector's, then the other records
    to the worker's; each topic's records carry the same key bytes, placed by murmur2 over its own partitions."""
    name = regular.source(unique("order"), topic := own_topic("order"))
    regular.java_topic_write(topic, name, [(partition(f="old"), offset(pos=1))])
    regular.get(name)

    dry = regular.http.patch(
        f"/connectors/{name}/offsets",
        params={"dry_run": "true"},
        json={
            "offsets": [{"partition": {"f": "old"}, "offset": None}, {"partition": {"f": "n"}, "offset": {"pos": 2}}]
        },
    )

    assert dry.status_code == 200, dry.text
    records = [(r["topic"], r["key"], r["value"]) for r in dry.json()["records"]]
    old, new = f'["{name}",{{"f":"old"}}]', f'["{name}",{{"f":"n"}}]'
    assert records == [
        (regular.worker_topic, old, None),
        (topic, old, None),
        (topic, new, '{"pos":2}'),
        (regular.worker_topic, new, '{"pos":2}'),
    ]
    placements = {(r["topic"], r["key"]): r["kafka_partition"] for r in dry.json()["records"]}
    keys = [old.encode(), new.encode()]
    java = regular.oracle.partition(keys, 3)
    assert [placements[(topic, k.decode())] for k in keys] == java
    assert [placements[(regular.worker_topic, k.decode())] for k in keys] == java


# --- exactly-once source: transactions, isolation, fencing --------------------------------------------


def test_committed_and_aborted_task_transactions_read_as_java_reads_them(
    eos: Kip618Cluster, filters_aborted: bool
) -> None:
    """Tasks commit some offsets and abort others (flushed first, so they reach the broker). Whatever the
    broker lets a ``read_committed`` consumer see, the daemon shows what Java's store shows; on a broker
    that filters aborted transactions, no aborted offset appears on either store."""
    name = eos.source(unique("txn"), topic := own_topic("txn"))
    eos.java_topic_write(eos.worker_topic, name, [(partition(f="w"), offset(pos=1))])
    eos.task_commit(name, topic, [(partition(f="a"), offset(pos=1)), (partition(f="b"), offset(pos=1))], "commit")
    eos.task_commit(name, topic, [(partition(f="a"), offset(pos=666))], "abort")
    eos.task_commit(name, topic, [(partition(f="b"), offset(pos=2))], "commit")

    java = eos.java_view(name)

    assert eos.get(name) == plain(java["offsets"])
    assert eos.get(name, store="connector") == plain(java["stores"]["connector"])
    assert eos.get(name, store="worker") == plain(java["stores"]["worker"])
    if filters_aborted:
        assert {"partition": {"f": "a"}, "offset": {"pos": 1}} in eos.get(name)


def test_every_topic_is_fetched_with_connects_isolation_level(
    regular: Kip618Cluster, eos: Kip618Cluster, broker: TappedTansu, filters_aborted: bool
) -> None:
    """What the daemon asks the broker for (Fetch's isolation_level, read off the wire) is what Java's
    own consumers are configured with, topic by topic.

    This is the whole proof on a broker that does not filter aborted transactions (Tansu 0.6: its fetch
    responses list no aborted transactions, so a read_committed consumer, Java's included, receives
    records that were flushed and then aborted); on one that filters, the test above checks the answers.
    """
    override = {"consumer.override.isolation.level": "read_uncommitted"}
    cases = [
        (regular, regular.source(unique("iso-default"), own_topic("iso-default")), {}),
        (regular, regular.source(unique("iso-override"), own_topic("iso-override"), **override), override),
        (eos, eos.source(unique("iso-eos"), own_topic("iso-eos"), **override), override),
    ]
    javas_isolation = []
    for cluster, name, connector_config in cases:
        topic = cluster.own_topics[name]
        assert topic is not None
        cluster.get(name)  # the daemon has opened and read the topic
        java = cluster.oracle.connector_store_read(
            cluster.broker.bootstrap,
            cluster.worker_topic,
            name,
            **cluster.store_options(topic, connector_config=connector_config),
        )["clients"]
        javas_isolation.append(java["connector_consumer_isolation"])
        expected = READ_COMMITTED if java["connector_consumer_isolation"] == "read_committed" else READ_UNCOMMITTED
        assert broker.wait_for_fetch(topic, DAEMON) == {expected}, (name, java)
        worker = READ_COMMITTED if java["worker_consumer_isolation"] == "read_committed" else READ_UNCOMMITTED
        assert broker.wait_for_fetch(cluster.worker_topic, DAEMON) == {worker}, (name, java)
    # Connect's settings, as Java's builders make them: the default, a connector's override, and EOS forcing.
    assert javas_isolation == ["read_committed", "read_uncommitted", "read_committed"]
    assert filters_aborted in (True, False)  # the probe ran; see the docstring for what it decides


def test_the_daemon_writes_in_task_0s_transaction_and_a_zombies_late_commit_is_refused(
    eos: Kip618Cluster, broker: TappedTansu, filters_aborted: bool
) -> None:
    """A zombie task 0 has written offsets in a transaction it has not committed. The daemon's write
    (the connector is STOPPED) uses task 0's transactional id, fencing it: its commit is refused, and the
    daemon's offsets are what a fresh Java store reads. Tasks 1 and 2 of the last fenced generation
    (``tasks-fencing-<c>``: 3) are fenced too, as Connect's leader fences them."""
    name = eos.source(unique("zombie"), topic := own_topic("zombie"), fencing=3)
    eos.task_commit(name, topic, [(partition(f="p"), offset(pos=1))], "commit")
    zombie = eos.task_commit(
        name,
        topic,
        [(partition(f="p"), offset(pos=999))],
        "hold",
        connector_config={"producer.override.max.block.ms": "5000"},
    )
    assert zombie["transactional_id"] == f"{eos.group_id}-{name}-0"
    requests_before = len(broker.tap.seen()) if broker.tap is not None else 0

    patched = eos.http.patch(
        f"/connectors/{name}/offsets", json={"offsets": [{"partition": {"f": "p"}, "offset": {"pos": 50}}]}
    )

    assert patched.status_code == 200, patched.text
    refusal = eos.oracle.task_transaction_finish(zombie["handle"], "commit", timeout_s=20)
    assert refusal is not None, "the zombie committed after the daemon's write"
    if filters_aborted:  # a broker that answers properly says why; Tansu drops the connection instead
        assert refusal.java_class.endswith(("ProducerFencedException", "InvalidProducerEpochException")), refusal
    expected = [{"partition": {"f": "p"}, "offset": {"pos": 50}}]
    assert plain(eos.java_view(name)["offsets"]) == expected == eos.get(name)
    assert broker.tap is not None
    daemon_inits = {
        r.transactional_id
        for r in broker.tap.seen()[requests_before:]
        if r.api_key == INIT_PRODUCER_ID and r.client_id == DAEMON
    }
    assert daemon_inits == {f"{eos.group_id}-{name}-{task}" for task in range(3)}


def test_an_exactly_once_connector_without_its_own_topic_is_written_in_task_0s_transaction(
    eos: Kip618Cluster, broker: TappedTansu
) -> None:
    """With exactly-once source support, Connect's connector store is the worker's topic itself."""
    name = eos.source(unique("eos-worker"))
    eos.task_commit(name, None, [(partition(f="q"), offset(pos=1))], "commit")
    assert broker.tap is not None
    before = len(broker.tap.seen())

    patched = eos.http.patch(
        f"/connectors/{name}/offsets", json={"offsets": [{"partition": {"f": "q"}, "offset": {"pos": 2}}]}
    )

    assert patched.status_code == 200, patched.text
    java = eos.java_view(name)
    assert java["clients"]["has_worker_store"] is False
    assert plain(java["offsets"]) == [{"partition": {"f": "q"}, "offset": {"pos": 2}}] == eos.get(name)
    inits = [r.transactional_id for r in broker.tap.seen()[before:] if r.api_key == INIT_PRODUCER_ID]
    assert f"{eos.group_id}-{name}-0" in inits


@pytest.mark.slow
def test_a_connector_with_many_tasks_is_fenced_within_the_write_timeout(eos: Kip618Cluster) -> None:
    """Connect's leader fences every task id of the last generation in one Admin.fenceProducers call;
    one id after another (a broker round trip each) 60 tasks took longer than --write-timeout (10 s),
    and the 503 blamed the broker. Now several at a time."""
    name = eos.source(unique("many-tasks"), own_topic("many"), fencing=60)
    started = time.monotonic()
    patched = eos.http.patch(
        f"/connectors/{name}/offsets", json={"offsets": [{"partition": {"f": "p"}, "offset": {"pos": 7}}]}
    )
    took = time.monotonic() - started
    assert patched.status_code == 200, patched.text
    assert took < 10, f"60 task ids fenced and the offsets written in {took:.1f} s"
    assert eos.get(name) == [{"partition": {"f": "p"}, "offset": {"pos": 7}}]


@pytest.mark.slow
def test_a_task_count_no_broker_fences_in_time_answers_503_by_the_deadline_and_nothing_stalls(
    eos: Kip618Cluster,
) -> None:
    """A ``tasks-fencing`` record is read as Connect reads it, up to 2,147,483,647 tasks. The daemon
    made every task's transactional id before fencing the first: gigabytes, a 500 MemoryError or no
    answer at all, and /healthz stalled for seconds (cluster QA, HIGH). Now the ids are made as they
    are fenced and the deadline is checked between waves: 503 log_timeout, nothing written."""
    name = eos.source(unique("huge-count"), own_topic("huge"), fencing=2_147_483_647)
    answer: list[httpx.Response] = []
    body = {"offsets": [{"partition": {"f": "p"}, "offset": {"pos": 7}}]}
    writer = threading.Thread(target=lambda: answer.append(eos.http.patch(f"/connectors/{name}/offsets", json=body)))
    started = time.monotonic()
    writer.start()
    slowest_probe = 0.0
    while writer.is_alive() and time.monotonic() - started < 60:
        probe_started = time.monotonic()
        assert eos.http.get("/healthz").status_code == 200
        slowest_probe = max(slowest_probe, time.monotonic() - probe_started)
        time.sleep(0.2)
    writer.join(timeout=5)
    took = time.monotonic() - started
    (patched,) = answer
    assert patched.status_code == 503, patched.text
    assert patched.headers["X-Connect-Offsets-Error"] == "log_timeout"
    assert "tasks-fencing record" in patched.json()["message"], patched.text
    assert took < 10 + 5, f"answered after {took:.1f} s with --write-timeout 10 s"
    assert slowest_probe < 2, f"/healthz took {slowest_probe:.1f} s while the write was fencing"
    assert eos.get(name) == [], "nothing was written"


# --- visible: status, fencing records, the store parameter ---------------------------------------------


def test_status_says_which_topics_each_connector_uses_and_shows_fencing_records(eos: Kip618Cluster) -> None:
    name = eos.source(unique("status"), topic := own_topic("status"), fencing=2)
    eos.get(name)
    java = eos.oracle.connect_cluster_read(eos.broker.bootstrap, eos.topics.config, [name])[name]

    status = eos.http.get("/status").json()["connector_offsets_topics"]

    assert status["exactly_once_source"] == "enabled"
    entry = status["connectors"][name]
    assert entry["primary"] == entry["connector_topic"] == topic
    assert entry["secondary"] == entry["worker_topic"] == eos.worker_topic
    assert entry["exactly_once"] is True
    assert entry["connector_store_isolation"] == "read_committed"
    assert entry["tasks_fencing"] == {
        "task_count": java["task_count_record"],
        "pending_fencing": java["pending_fencing"],
    }
    assert java["task_count_record"] == 2
    assert any(t["topic"] == topic and t["ready"] and name in t["connectors"] for t in status["topics"])


def test_metrics_show_each_connector_topics_reader_and_writes(regular: Kip618Cluster) -> None:
    """A connector's own topic is read and written like the worker's: /metrics says how, under its name."""
    name = regular.source(unique("metrics"), topic := own_topic("metrics"))
    regular.java_topic_write(topic, name, [(partition(f="a"), offset(pos=1))])
    assert regular.wait_get(name).status_code == 200
    stores = regular.http.get("/status").json()["connector_offsets_topics"]["topics"]
    entry = next(t for t in stores if t["topic"] == topic)
    labels = {"topic": topic, "isolation": entry["isolation"]}

    patched = regular.http.patch(
        f"/connectors/{name}/offsets",
        json={
            "offsets": [
                {"partition": {"f": "a"}, "offset": {"pos": 2}},
                {"partition": {"f": "b"}, "offset": {"pos": 3}},
            ]
        },
    )

    assert patched.status_code == 200, patched.text
    samples = scrape_until(
        regular.daemon.url,
        lambda s: s.value("connect_offsets_connector_topic_reader_records_read_total", **labels) >= 3,
        "the reader delivering Java's record and the daemon's two",
    )
    assert samples.get("connect_offsets_connector_topic_ready", **labels) == 1
    assert samples.get("connect_offsets_connector_topic_reader_lag", **labels) == 0
    assert samples.get("connect_offsets_connector_topic_live_keys", **labels) == 2
    assert samples.get("connect_offsets_connector_topic_write_duration_seconds_count", **labels) == 1
    assert samples.get("connect_offsets_connector_topic_written_records_total", **labels) == 2
    assert samples.get("connect_offsets_connector_topic_write_duration_seconds_bucket", **labels, le="+Inf") == 1
    assert samples.get("connect_offsets_ready") == 1


def test_the_store_parameter_and_claims_say_what_does_not_apply(regular: Kip618Cluster) -> None:
    plain_name = regular.source(unique("no-own"))
    own_name = regular.source(unique("own"), own_topic("own"))
    regular.get(own_name)

    def error(response: Any) -> tuple[int, str | None]:
        return response.status_code, response.headers.get("X-Connect-Offsets-Error")

    assert error(regular.http.get(f"/connectors/{own_name}/offsets", params={"store": "bogus"})) == (
        400,
        "invalid_request",
    )
    assert error(regular.http.get(f"/connectors/{plain_name}/offsets", params={"store": "connector"})) == (
        400,
        "invalid_request",
    )
    assert regular.http.get(f"/connectors/{plain_name}/offsets", params={"store": "worker"}).status_code == 200
    claimed = regular.http.post(f"/connectors/{own_name}/claim", json={"owner": "spark"})
    assert error(claimed) == (409, "claims_unsupported")
    assert own_name in claimed.json()["message"]
    body = {"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]}
    with_epoch = regular.http.patch(f"/connectors/{own_name}/offsets", params={"claim_epoch": "1"}, json=body)
    assert error(with_epoch) == (409, "claims_unsupported"), "not 'fenced': no claim can exist there (api.md)"
    reset_with_epoch = regular.http.delete(f"/connectors/{own_name}/offsets", params={"claim_epoch": "1"})
    assert error(reset_with_epoch) == (409, "claims_unsupported")


def test_a_cached_get_follows_changes_to_either_store(regular: Kip618Cluster) -> None:
    """A large connector's GET body is cached (docs/operations.md, ``get_cache``); a change in its own
    topic or in the worker topic, written by Java, shows in the next GET."""
    name = regular.source(unique("cached"), topic := own_topic("cached"))
    regular.java_topic_write(topic, name, [(partition(f=f"p{i:03}"), offset(pos=1)) for i in range(600)])
    assert len(regular.get(name)) == 600
    assert len(regular.get(name)) == 600  # from the cache

    regular.java_topic_write(topic, name, [(partition(f="p000"), offset(pos=2))])
    assert {"partition": {"f": "p000"}, "offset": {"pos": 2}} in regular.get(name)

    regular.java_topic_write(regular.worker_topic, name, [(partition(f="worker-only"), offset(pos=9))])
    after = regular.get(name)
    assert len(after) == 601 and after == plain(regular.java_view(name)["offsets"])


# --- transfers and rollbacks: raw records through both stores -------------------------------------------


def b64_key(name: str, partition_json: str) -> str:
    return base64.b64encode(f'["{name}",{partition_json}]'.encode()).decode()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("which", ["regular", "eos"])
def test_a_raw_import_is_written_as_connects_set_writes_it_and_read_back_by_java(
    which: str, request: pytest.FixtureRequest
) -> None:
    """An import (``POST /offsets/records``, what ``connect-offsets import``/``migrate`` send a daemon) is
    diffed against the connector store and written like PATCH: both topics in KAFKA-15018's order, task
    0's transaction with exactly-once source, the records' exact key bytes."""
    cluster: Kip618Cluster = request.getfixturevalue(which)
    name = seeded_in_both_stores(cluster, f"import-{which}")
    body = {
        "records": [
            {"key": b64_key(name, '{"f":"c"}'), "value": b64('{"pos":2}')},
            {"key": b64_key(name, '{"f":"w"}'), "value": b64('{"pos":10}')},
            {"key": b64_key(name, '{"f":"gone"}'), "value": None},
        ]
    }

    imported = cluster.http.post("/offsets/records", json=body)

    assert imported.status_code == 200, imported.text
    summary = imported.json()["diff"]["summary"]
    assert (summary["added"], summary["changed"], summary["removed"], summary["unchanged"]) == (1, 0, 1, 1)
    assert imported.json()["written"] == 2
    java = cluster.java_view(name)
    assert plain(java["offsets"]) == [
        {"partition": {"f": "c"}, "offset": {"pos": 2}},
        {"partition": {"f": "w"}, "offset": {"pos": 10}},
    ]
    assert cluster.get(name) == plain(java["offsets"])
    assert cluster.get(name, store="worker") == plain(java["stores"]["worker"])


def test_a_rollback_brings_back_what_connect_read_then(regular: Kip618Cluster) -> None:
    """The connector's own topic is rolled back from its own archive and written to both stores, so that
    Java's combined store reads what it read at that time."""
    name = regular.source(unique("rollback"), topic := own_topic("rollback"))
    regular.java_topic_write(regular.worker_topic, name, [(partition(f="w"), offset(pos=1))])
    regular.java_topic_write(topic, name, [(partition(f="r"), offset(pos=1))])
    before = plain(regular.java_view(name)["offsets"])
    assert regular.get(name) == before
    time.sleep(0.05)
    mark = int(time.time() * 1000)
    time.sleep(0.05)
    regular.java_write(name, topic, [(partition(f="r"), offset(pos=2)), (partition(f="new"), offset(pos=5))])
    assert len(regular.get(name)) == 3

    dry = regular.http.post(
        f"/connectors/{name}/offsets/rollback", params={"to": str(mark), "dry_run": "true"}, json={}
    )
    rolled = regular.http.post(f"/connectors/{name}/offsets/rollback", params={"to": str(mark)}, json={})

    assert dry.status_code == 200 and rolled.status_code == 200, (dry.text, rolled.text)
    assert plain(regular.java_view(name)["offsets"]) == before == regular.get(name)


def test_an_export_says_which_store_it_read(regular: Kip618Cluster, tmp_path: Path) -> None:
    """``--store effective`` (the default) exports what Connect reads: the connector's own topic, without
    the worker-topic records it masks; ``connector`` and ``worker`` export each store alone."""
    name = regular.source(unique("export"), topic := own_topic("export"))
    regular.java_topic_write(
        regular.worker_topic, name, [(partition(f="a"), offset(pos=1)), (partition(f="b"), offset(pos=2))]
    )
    regular.java_topic_write(topic, name, [(partition(f="b"), offset(pos=20))])
    java = regular.java_view(name)
    regular.get(name)

    def export(*store: str) -> tuple[list[dict[str, Any]], str]:
        out = tmp_path / f"export-{'-'.join(store) or 'default'}.json"
        done = cli("export", "--url", regular.daemon.url, "--connector", name, "--to", f"kip875:{out}", *store)
        assert done.returncode == 0, done.stderr
        return ordered(json.loads(out.read_text())[name]["offsets"]), done.stderr

    effective, notes = export()
    assert effective == export("--store", "effective")[0] == [{"partition": {"f": "b"}, "offset": {"pos": 20}}]
    assert [row for row in plain(java["offsets"]) if row["offset"] is not None] == effective
    assert f"from '{topic}'" in notes and "2 worker-topic record(s)" in notes
    assert export("--store", "connector")[0] == plain(java["stores"]["connector"])
    assert export("--store", "worker")[0] == plain(java["stores"]["worker"])
    refused = cli(
        "export", "--from", f"kafka://{regular.broker.bootstrap}/{topic}", "--to", "x.json", "--store", "worker"
    )
    assert refused.returncode == 2 and "--store picks which of a daemon's stores is read" in refused.stderr
    assert "(a kafka:// location reads exactly the topic it names)" in refused.stderr
    from_file = cli("import", "--from", "kip875:x.json", "--store", "worker", "--dry-run")
    assert from_file.returncode == 2 and "kip875:x.json is not a daemon\n" in from_file.stderr, "no kafka:// hint"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--quiet", timeout_s=120)


def test_each_topic_has_its_own_history_and_as_of_merges_them_as_a_live_get(regular: Kip618Cluster) -> None:
    """The connector's own topic is archived apart from the worker's: ``history`` reads its changes (or,
    with ``store=worker``, the worker topic's), and ``as_of`` answers what a live GET answered then."""
    name = regular.source(unique("hist"), topic := own_topic("hist"))
    regular.java_topic_write(regular.worker_topic, name, [(partition(f="w"), offset(pos=1))])
    regular.java_topic_write(topic, name, [(partition(f="h"), offset(pos=1))])
    before = plain(regular.java_view(name)["offsets"])
    assert regular.get(name) == before
    time.sleep(0.05)
    mark = int(time.time() * 1000)
    time.sleep(0.05)
    patched = regular.http.patch(
        f"/connectors/{name}/offsets", json={"offsets": [{"partition": {"f": "h"}, "offset": {"pos": 2}}]}
    )
    assert patched.status_code == 200, patched.text

    def as_of(store: str | None = None) -> list[dict[str, Any]]:
        params = {"as_of": str(mark)} | ({} if store is None else {"store": store})
        response = regular.http.get(f"/connectors/{name}/offsets", params=params)
        assert response.status_code == 200, response.text
        return ordered(response.json()["offsets"])

    def changes(store: str | None = None) -> list[tuple[Any, Any]]:
        params = {} if store is None else {"store": store}
        response = regular.http.get(f"/connectors/{name}/offsets/history", params=params)
        assert response.status_code == 200, response.text
        return [(c["partition"], c["offset"]) for c in response.json()["changes"]]

    assert (
        as_of()
        == before
        == [
            {"partition": {"f": "h"}, "offset": {"pos": 1}},
            {"partition": {"f": "w"}, "offset": None},
        ]
    )
    assert as_of("connector") == [{"partition": {"f": "h"}, "offset": {"pos": 1}}]
    assert changes() == changes("connector") == [({"f": "h"}, {"pos": 2}), ({"f": "h"}, {"pos": 1})]
    # Connect's write puts non-tombstones in the worker topic too (the secondary store).
    assert changes("worker") == [({"f": "h"}, {"pos": 2}), ({"f": "w"}, {"pos": 1})]
    assert as_of("worker") == [{"partition": {"f": "w"}, "offset": {"pos": 1}}]


def test_a_connector_whose_own_topic_is_not_compacted_fails_alone(regular: Kip618Cluster) -> None:
    """Connect refuses an offsets topic whose cleanup policy is not compact and fails that connector; the
    daemon kept retrying it as "not open yet" (503, Retry-After: clients waited 30 s) and /readyz said
    it was still reading, so the whole daemon never became ready. Now that connector answers 500 with
    Connect's reason, and the daemon is ready for the others."""
    topic = own_topic("deleting")
    regular.broker.create_topic(topic, 1, {"cleanup.policy": "delete"})
    name = regular.source(unique("not-compacted"), topic)
    other = regular.source(unique("fine"))

    answers: list[httpx.Response] = []

    def refused() -> bool:
        answers.append(regular.http.get(f"/connectors/{name}/offsets"))
        return answers[-1].status_code == 500

    until(refused, "the connector's store refused", timeout_s=20)
    answer = answers[-1]
    assert answer.headers["X-Connect-Offsets-Error"] == "store_unavailable" and "Retry-After" not in answer.headers
    assert "cleanup.policy" in answer.json()["message"] and topic in answer.json()["message"], answer.text
    assert regular.http.get("/readyz").status_code == 200, "the others are served"
    assert regular.http.get(f"/connectors/{other}/offsets").status_code == 200
    topics = regular.http.get("/status").json()["connector_offsets_topics"]["topics"]
    (entry,) = [t for t in topics if t["topic"] == topic]
    assert entry["refused"] is True and "cleanup.policy" in entry["error"], entry
