"""A Spark query started while its daemon cannot serve yet waits for it, and misses nothing.

A daemon restarted beside its jobs (an upgrade, a crash) answers ``not_ready`` with ``Retry-After``
until it can serve: here it waits for its Kafka cluster, which is paused (a broker of this module's
own). The ``connect-file`` source asks the daemon for the connector's position when the query
starts; before, that start failed at once with the daemon's 503, and the query died. Now the
Python client asks again while the daemon says ``Retry-After``, so the query waits, then starts
exactly where Connect stopped, and the listener hands the query's end back.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from emulator.spark import OffsetCommitListener
from tests.fixtures.broker import TansuBroker, own_tansu
from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.waits import until
from tests.spark.helpers import Collector, append, lines_bytes, start_file_query, stored_position, unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

PAUSE_S = 3.0
"""How long the broker stays paused once the first trigger runs (the source is asked for its start
then): several of the client's tries, well within its 30 s of retries."""


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    with own_tansu(tmp_path_factory.mktemp("tansu-spark-restart")) as broker:
        yield broker


def first_trigger_ran(query: Any) -> bool:
    """The first trigger asks the source for its start; a query that died meanwhile ends the wait too."""
    return bool(query.status["isTriggerActive"]) or not query.isActive


def numbered(first: int, last: int) -> list[str]:
    return [f"line {i:03d}" for i in range(first, last + 1)]


def test_a_query_started_while_the_daemon_cannot_serve_waits_and_starts_where_connect_stopped(
    spark: SparkSession, own_broker: TansuBroker, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    source, connector = tmp_path / "input.txt", unique("file-src")
    path = str(source)
    source.write_bytes(lines_bytes(numbered(1, 6)))
    after_connect = len(lines_bytes(numbered(1, 3)))  # Connect emitted lines 1-3 and committed that
    args = ["--bootstrap-servers", own_broker.bootstrap, "--offsets-topic", own_broker.unique_topic("offsets")]
    first = daemon_factory(*args)
    with first.client() as client:
        offsets = [{"partition": {"filename": path}, "offset": {"position": after_connect}}]
        client.alter(connector, {"offsets": offsets}, create=True)
    first.stop()

    listener = OffsetCommitListener(spark, url=first.url)
    spark.streams.addListener(listener)
    out = Collector()
    try:
        with own_broker.paused():
            daemon = daemon_factory(*args, wait_ready=False, port=first.port)  # answers on its port, not ready
            query = start_file_query(spark, daemon.url, connector, path, str(tmp_path / "cp"), out, max_lines=2)
            until(lambda: first_trigger_ran(query), "the first trigger to ask the source for its start", 60)
            time.sleep(PAUSE_S)
            assert query.isActive and query.exception() is None, "the query waits for the daemon"
            assert out.lines == [], "nothing ran before the daemon could say where the connector stopped"
        query.processAllAvailable()
        append(source, lines_bytes(numbered(7, 9)))
        query.processAllAvailable()
        query.stop()
        assert listener.wait_for_termination(query, 90), "the listener never saw the query terminate"
    finally:
        spark.streams.removeListener(listener)

    assert query.exception() is None
    assert out.lines == numbered(4, 9), "Spark started right after Connect's last line and read each line once"
    with daemon.client() as client:
        assert stored_position(client, connector, path) == len(lines_bytes(numbered(1, 9)))
    until(lambda: "takes over the port" in daemon.log_tail(), "the daemon's app to take over", 10)
    asked = re.search(r"\((\d+) request\(s\) were answered 503 with Retry-After meanwhile\)", daemon.log_tail())
    assert asked is not None and int(asked[1]) >= 1, "the query's start asked the daemon while it waited"
