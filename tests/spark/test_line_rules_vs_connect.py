"""``connect-file`` splits lines and counts ``position`` exactly as the real FileStreamSourceConnector.

Expectations come from Apache Kafka 4.3.0's connector (oracle JVM subprocess), never from our own
rules: the same bytes go through both, and lines and committed positions must be equal. The file
mixes every terminator (``\\n``, ``\\r\\n``, a lone ``\\r``, empty lines), multibyte and malformed
UTF-8, and ends with a lone ``\\r`` that Connect holds back.

Multibyte caveat (Connect's, reproduced on purpose): ``position`` counts UTF-16 chars but a restart
skips that many *bytes*, so after non-ASCII text a resumed connector starts too early and repeats
text. A Spark query starting from such a position must repeat exactly what Connect repeats.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emulator.spark import OffsetCommitListener
from emulator.spark.filestream import Cursor, scan
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.oracle import JavaOracle
from tests.spark.helpers import (
    Collector,
    append,
    daemon_args,
    eventually,
    run_connector,
    start_file_query,
    stored_position,
    unique,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.kafka, pytest.mark.jvm, pytest.mark.spark, pytest.mark.slow]

MIXED = (
    b"plain ascii\n"
    b"windows line\r\n"
    b"old mac line\r"
    b"\r\n"  # an empty line ended by CRLF right after a CR-terminated one
    b"\n"
    + "gr\u00f6\u00dfer als \U0001f600 (astral: two chars)\n".encode()
    + "\u65e5\u672c\u8a9e\r\n".encode()
    + b"malformed \xff\xfe bytes\n"
    + b"truncated \xe6\x97\n"
    + b"\x80 stray continuation\r"
    + b"last complete line\n"
    + b"held back\r"  # a CR at the end of the file: Connect cannot know yet whether LF follows
)
APPENDED = b"\nafter one\r\nafter two\n"


def _spark_run(spark: SparkSession, url: str, connector: str, path: str, checkpoint: Path) -> list[str]:
    listener = OffsetCommitListener(spark, url=url)
    spark.streams.addListener(listener)
    try:
        out = Collector()
        query = start_file_query(spark, url, connector, path, str(checkpoint), out, max_lines=4)
        query.processAllAvailable()
        query.stop()
        assert listener.wait_for_termination(query, 60)
    finally:
        spark.streams.removeListener(listener)
    assert listener.errors == []
    return out.lines


def test_lines_and_positions_equal_the_connectors_for_every_terminator_and_encoding(
    spark: SparkSession,
    java_oracle: JavaOracle,
    kafka_broker: TansuBroker,
    daemon_factory: DaemonFactory,
    tmp_path: Path,
) -> None:
    topic = kafka_broker.unique_topic("spark-lines")
    source = tmp_path / "mixed.txt"
    source.write_bytes(MIXED)
    path = str(source)
    by_connect, by_spark, resumed_spark = unique("connect"), unique("spark"), unique("spark-resumed")

    complete = scan(path, Cursor(0, 0)).lines  # only the count to wait for; content comes from Java
    connect_lines = run_connector(java_oracle, kafka_broker, topic, by_connect, path, complete)
    daemon = daemon_factory(*daemon_args(kafka_broker, topic))
    client = daemon.client()
    connect_position = eventually(lambda: stored_position(client, by_connect, path), lambda p: p is not None)
    assert connect_position is not None
    assert connect_position < len(MIXED) - len(b"held back\r"), "chars, not bytes: multibyte text counts less"

    spark_lines = _spark_run(spark, daemon.url, by_spark, path, tmp_path / "cp-fresh")
    assert spark_lines == connect_lines
    assert stored_position(client, by_spark, path) == connect_position

    # The held-back line completes, more lines follow; both engines resume from the same stored
    # position, and Connect's byte skip lands inside text it already emitted.
    append(source, APPENDED)
    client.alter(
        resumed_spark,
        {"offsets": [{"partition": {"filename": path}, "offset": {"position": connect_position}}]},
        create=True,
    )
    resumed = scan(path, Cursor.from_connect(connect_position)).lines
    connect_again = run_connector(java_oracle, kafka_broker, topic, by_connect, path, resumed)
    spark_again = _spark_run(spark, daemon.url, resumed_spark, path, tmp_path / "cp-resumed")
    assert spark_again == connect_again
    assert connect_again[-3:] == ["held back", "after one", "after two"]
    final = eventually(lambda: stored_position(client, by_connect, path), lambda p: p != connect_position)
    assert stored_position(client, resumed_spark, path) == final
