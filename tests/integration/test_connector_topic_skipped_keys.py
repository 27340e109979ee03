"""Malformed keys in a connector's own offsets topic (KIP-618) are counted and logged under that topic.

Connect's reader of a connector-specific topic skips a key it cannot parse exactly as the worker
topic's reader does (``OffsetUtils.processPartitionKey``); the daemon reads that topic through a view
of its own, so its skips are its own too: per topic in ``/status`` ``connector_offsets_topics``, in
``connect_offsets_connector_topic_records_skipped_total{topic,isolation,reason}``, and in log lines
that name the topic, never mixed into the worker topic's ``view.skipped_keys``
(docs/operations.md, "Metrics" and "Status fields").
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from tests.fixtures.broker import TansuBroker
from tests.fixtures.waits import until
from tests.integration.kip618 import Kip618Cluster, kip618_cluster, offset, partition
from tests.integration.scrape import scrape
from tests.oracle import JavaOracle

pytestmark = [pytest.mark.kafka, pytest.mark.jvm, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(
    kafka_broker: TansuBroker, java_oracle: JavaOracle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kip618Cluster]:
    with kip618_cluster(
        kafka_broker, java_oracle, tmp_path_factory.mktemp("kip618-skips"), exactly_once=False, prefix="skips"
    ) as made:
        yield made


def produce_raw(bootstrap: str, topic: str, keys: list[bytes | None]) -> None:
    """Hand-written records (a script, kcat) in one partition, in this order, each with a valid value."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for key in keys:
        producer.produce(topic, key=key, value=b'{"pos":1}', partition=0)
    assert producer.flush(30) == 0


def test_malformed_keys_in_a_connectors_own_topic_are_counted_per_topic_and_logged_naming_it(
    cluster: Kip618Cluster,
) -> None:
    name = cluster.source(TansuBroker.unique_topic("skips"), topic := TansuBroker.unique_topic("skips-own-offsets"))
    cluster.java_topic_write(topic, name, [(partition(f="a"), offset(pos=1))])
    assert cluster.wait_get(name).status_code == 200
    worker_before = cluster.http.get("/status").json()["view"]["skipped_keys_total"]

    produce_raw(cluster.broker.bootstrap, topic, [b"not json", b'{"a":1}', b'["x"]', b"not json either", None])
    produce_raw(cluster.broker.bootstrap, cluster.worker_topic, [b"worker not json"])

    def own_entry() -> dict[str, object]:
        topics = cluster.http.get("/status").json()["connector_offsets_topics"]["topics"]
        return next(t for t in topics if t["topic"] == topic)

    until(lambda: own_entry()["skipped_keys_total"] == 5, "the topic's five malformed keys counted", timeout_s=30)
    entry = own_entry()
    assert entry["skipped_keys"] == {"not-json": 2, "not-a-list": 1, "wrong-size": 1, "null-key": 1}
    until(
        lambda: cluster.http.get("/status").json()["view"]["skipped_keys_total"] == worker_before + 1,
        "the worker topic's malformed key counted",
        timeout_s=30,
    )
    assert cluster.http.get("/status").json()["view"]["skipped_keys_total"] == worker_before + 1, "only its own"

    samples = scrape(cluster.daemon.url)
    labels = {"topic": topic, "isolation": str(entry["isolation"])}
    name_ = "connect_offsets_connector_topic_records_skipped_total"
    assert samples.get(name_, **labels, reason="not-json") == 2
    assert samples.get(name_, **labels, reason="not-a-list") == 1
    assert samples.get(name_, **labels, reason="wrong-size") == 1
    assert samples.get(name_, **labels, reason="null-key") == 1

    log = cluster.daemon.log_path.read_text(errors="replace")
    prefix = f"/{topic}: Ignoring offset partition key"
    assert (
        f"{prefix} with unknown serialization. Expected json. (1 such record(s) so far, 1 skipped key(s) in all)" in log
    )
    assert f"{prefix} with an unexpected format. Expected type: java.util.List" in log
    assert "(1 such record(s) so far, 2 skipped key(s) in all)" in log
    assert f"{prefix} with an unexpected number of elements. Expected: 2, actual: 1 (1 such record(s) so far, 3 " in log
    assert f"{prefix} with an unexpected null value (1 such record(s) so far, 5 skipped key(s) in all)" in log
    assert f"/{cluster.worker_topic}: Ignoring offset partition key with unknown serialization" in log
