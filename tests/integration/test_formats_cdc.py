"""Flink CDC / RisingWave state JSON ⇄ Connect records, checked against Apache Kafka's own classes.

State → records must be what ``OffsetStorageWriter`` + ``JsonConverter`` write when the engines restore
(the maps as Jackson reads them: ``LinkedHashMap`` in document order, Integer/Long/Double/Boolean).
Records → state must be what the engines' Jackson ``ObjectMapper`` writes (compared with Jackson's
output for the same maps, produced in the JVM), starting from records Java wrote to a real topic.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from emulator.formats import cdc_state
from tests.fixtures.broker import TansuBroker
from tests.fixtures.cli import run_cli
from tests.integration.connect_helpers import JAVA_ONE_RECORD_PER_BATCH, canon, from_java, unique
from tests.oracle import JavaOracle
from tests.oracle import typed as T

pytestmark = [pytest.mark.jvm]

FLINK_STATE = (
    '{"sourcePartition":{"server":"mysql_binlog_source"},"sourceOffset":{"file":"mysql-bin.000003","pos":154,'
    '"row":1,"event":2,"server_id":223344,"ts_sec":1670876905}}'
)
RISINGWAVE_PG_STATE = (
    '{"sourcePartition":{"server":"RW_CDC_1001"},"sourceOffset":{"last_snapshot_record":false,"lsn":200,'
    '"lsn_proc":200,"lsn_commit":200,"txId":12345,"ts_usec":1700000000000000},"isHeartbeat":false}'
)
RISINGWAVE_MYSQL_STATE = (
    '{"sourcePartition":{"server":"test"},"sourceOffset":{"ts_sec":1700000000,"file":"binlog.000001",'
    '"pos":105622,"snapshot":true,"gtids":"3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5","ratio":0.25,'
    '"name":"caf\u00e9 \\ud83d\\ude00"},"isHeartbeat":false}'
)


def jackson_typed(value: Any) -> Any:
    """The Java object Jackson's untyped deserializer builds: Integer if it fits, else Long; Double;
    LinkedHashMap in document order (what the engines hand to OffsetStorageWriter)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return T.integer(value) if -(2**31) <= value < 2**31 else T.long(value)
    if isinstance(value, float):
        return T.double(value)
    if isinstance(value, dict):
        return T.jmap([(k, jackson_typed(v)) for k, v in value.items()])
    raise TypeError(value)


@pytest.mark.parametrize("document", [FLINK_STATE, RISINGWAVE_PG_STATE, RISINGWAVE_MYSQL_STATE])
def test_a_state_becomes_the_bytes_offset_storage_writer_writes(java_oracle: JavaOracle, document: str) -> None:
    engine = "pg:5432:db.RW_CDC_Sharing"
    state = cdc_state.parse_state(document.encode())
    key, value = cdc_state.state_to_entry(engine, state)
    parsed = json.loads(document)
    java_key, java_value = java_oracle.json_encode(
        [
            T.jlist([engine, jackson_typed(parsed["sourcePartition"])]),
            jackson_typed(parsed["sourceOffset"]),
        ]
    )
    assert (key, value) == (java_key, java_value)


def java_state_bytes(oracle: JavaOracle, partition: Any, offset: Any, heartbeat: bool) -> bytes:
    """What a Jackson ObjectMapper writes for DebeziumOffset(partition, offset[, isHeartbeat])."""
    fields = [("sourcePartition", partition), ("sourceOffset", offset)]
    if heartbeat:
        fields.append(("isHeartbeat", False))
    (encoded,) = oracle.json_encode([T.jmap(fields)])
    assert encoded is not None
    return encoded


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--quiet", timeout_s=180)


WRITES = [
    (
        T.jmap({"server": "mysql_binlog_source"}),
        T.jmap([("file", "mysql-bin.000003"), ("pos", T.long(154)), ("row", T.integer(1)), ("snapshot", True)]),
    ),
    (
        T.jmap([("server", "RW_CDC_1001"), ("db", "shop")], impl="hash"),
        T.jmap([("lsn", T.long(2**40)), ("lsn_commit", T.long(200)), ("ratio", T.double(1e-5)), ("note", "é\t😀")]),
    ),
]


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.parametrize("risingwave", [False, True], ids=["flink", "risingwave"])
def test_java_written_records_export_as_the_state_jackson_writes(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, tmp_path: Path, risingwave: bool
) -> None:
    topic, engine = kafka_broker.unique_topic("cdc-export"), unique("engine")
    java_oracle.offsets_write(
        kafka_broker.bootstrap, topic, engine, WRITES, partitions=3, extra_config=JAVA_ONE_RECORD_PER_BATCH
    )
    out = tmp_path / "states.jsonl"
    args = ["migrate", "--from", f"kafka://{kafka_broker.bootstrap}/{topic}", "--to", f"cdc:{out}"]
    result = cli(*args, *(["--risingwave"] if risingwave else []))
    assert result.returncode == 0, result.stderr

    lines = out.read_bytes().splitlines()
    states = {}
    for line in lines:
        prefix = b'{"connector":' + json.dumps(engine).encode() + b',"state":'
        assert line.startswith(prefix) and line.endswith(b"}")
        state = line[len(prefix) : -1]
        states[canon(json.loads(state)["sourcePartition"])] = state
    expected = {
        canon(from_java(partition)): java_state_bytes(java_oracle, partition, offset, risingwave)
        for partition, offset in WRITES
    }
    assert states == expected


@pytest.mark.slow
@pytest.mark.kafka
def test_states_imported_into_a_topic_are_read_by_kafka_offset_backing_store(
    java_oracle: JavaOracle, kafka_broker: TansuBroker, tmp_path: Path
) -> None:
    topic, engine = kafka_broker.unique_topic("cdc-import"), unique("engine")
    states = tmp_path / "states.jsonl"
    states.write_text(
        json.dumps({"connector": engine, "state": json.loads(FLINK_STATE)})
        + "\n"
        + json.dumps({"connector": engine, "state": RISINGWAVE_PG_STATE})
        + "\n"
    )
    target = f"kafka://{kafka_broker.bootstrap}/{topic}"
    dry = cli("import", "--from", f"cdc:{states}", "--to", target, "--partitions", "3", "--dry-run")
    assert dry.returncode == 0 and "2 added" in dry.stdout, dry.stderr

    result = cli(
        "import",
        "--from",
        f"cdc:{states}",
        "--to",
        target,
        "--partitions",
        "3",
        "--kafka-config",
        "batch.num.messages=1",
    )
    assert result.returncode == 0, result.stderr
    partitions = [T.jmap({"server": "mysql_binlog_source"}), T.jmap({"server": "RW_CDC_1001"})]
    found, listed = java_oracle.offsets_read(kafka_broker.bootstrap, topic, engine, partitions, num_partitions=3)
    assert [from_java(f) for f in found] == [
        json.loads(FLINK_STATE)["sourceOffset"],
        json.loads(RISINGWAVE_PG_STATE)["sourceOffset"],
    ]
    assert len(listed) == 2
