"""A real connector hands its offsets to the daemon and back: FileStreamSourceConnector.

Apache Kafka 4.3.0's ``FileStreamSourceConnector`` runs in Debezium's embedded engine with Connect's
``KafkaOffsetBackingStore`` on the session's broker: it reads a file, commits ``{"position": P}`` for
partition ``{"filename": <path>}``, the daemon moves that position back, and the restarted connector
must resume exactly there.

What ``position`` counts (read from the 4.3.0 bytecode and measured here): ``FileStreamSourceTask``
decodes the file as UTF-8 into a ``char[]`` and advances ``position`` by the *chars* each line took
(UTF-16 code units, ``\\n`` included), but on restart it ``InputStream.skip(position)``s *bytes*. So
after a multibyte line the committed position is not the byte length, and a position that should
land on a line boundary must be given in bytes. The test pins both facts.

Every offset flush of this connector holds one record (one source partition), so the records reach
the broker one per batch and Tansu's end offsets are exact. (The producer's ``batch.size`` cannot be
set here: in the engine's properties it is also ``FileStreamSourceConnector``'s own ``batch.size``,
lines per poll.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.integration.connect_helpers import (
    eventually,
    kafka_daemon_args,
    unique,
    utf16_units,
)
from tests.oracle import JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.kafka, pytest.mark.jvm]

LINES = [
    "line one",
    "zwei: größer als 😀",  # multibyte before the rewind point: bytes != chars
    "three",
    "four ----",
    "five",
    "six",
    "sieben: 日本語 ✓",  # multibyte after it
    "eight",
    "nine",
    "ten, the last",
]


@pytest.mark.slow
def test_c_connector_resumes_exactly_at_the_position_the_daemon_set(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    topic, n = kafka_broker.unique_topic("filestream"), 5
    connector = unique("file-src")
    source = tmp_path / "input.txt"
    source.write_bytes("".join(line + "\n" for line in LINES).encode("utf-8"))
    path = str(source)

    def run(expect: int) -> list[str]:
        return java_oracle.filestream_run(
            kafka_broker.bootstrap,
            topic,
            connector,
            path,
            partitions=n,
            expect_lines=expect,
            timeout_s=30,
        )

    assert run(len(LINES)) == LINES

    daemon = daemon_factory(*kafka_daemon_args(kafka_broker.bootstrap, topic, n))
    client = daemon.client()
    committed = sum(utf16_units(line + "\n") for line in LINES)
    assert committed != source.stat().st_size  # the multibyte lines make chars and bytes differ
    assert client.offsets(connector) == [{"partition": {"filename": path}, "offset": {"position": committed}}]

    after_line_4 = sum(len((line + "\n").encode("utf-8")) for line in LINES[:4])
    client.alter(connector, {"offsets": [{"partition": {"filename": path}, "offset": {"position": after_line_4}}]})

    assert run(len(LINES) - 4) == LINES[4:]

    # The restarted task counted on from the byte offset it was given, in chars again.
    resumed = after_line_4 + sum(utf16_units(line + "\n") for line in LINES[4:])
    want = [{"partition": {"filename": path}, "offset": {"position": resumed}}]
    assert eventually(lambda: client.offsets(connector), lambda rows: rows == want) == want
    offsets, partitions = java_oracle.offsets_read(
        kafka_broker.bootstrap, topic, connector, [T.jmap({"filename": path})], num_partitions=n
    )
    assert offsets == [T.jmap({"position": T.long(resumed)}, impl="hash")]
    assert partitions == [T.jmap({"filename": path}, impl="hash")]
