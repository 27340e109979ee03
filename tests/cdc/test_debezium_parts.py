"""``connect-debezium``'s pure parts, without Spark, a database or a JVM: its Spark offsets and how
they become Connect's, the order commits keep, the options it refuses, and the rows it builds.

Offsets below are the shapes Debezium's Postgres connector wrote in this project's runs (key order
included: ``HashMap`` order, as Connect's offset converter writes it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from emulator.spark.committer import backwards_reason
from emulator.spark.debezium_offsets import DebeziumOffset, daemon_position, debezium_backwards_reason
from emulator.spark.debezium_options import BASE_COLUMNS, ConnectDebeziumError, parse_options
from emulator.spark.debezium_process import ChangeRecord
from emulator.spark.debezium_rows import ChangeColumns, RowBuilder
from emulator.spark.debezium_stream import Numbered, seed_records
from emulator.spark.handoff import HandoffError, entries_for, own_entries
from emulator.spark.options import OptionError

PARTITION = {"server": "inventory"}
STREAMING = {"lsn_proc": 22464864, "messageType": "INSERT", "lsn_commit": 22464736, "lsn": 22464864, "txId": 746}
SNAPSHOT = {
    "last_snapshot_record": False,
    "lsn": 22186288,
    "txId": 730,
    "snapshot": "INITIAL",
    "snapshot_completed": False,
}


def spark_offset(seq: int, offset: dict[str, Any]) -> dict[str, Any]:
    return {"connector": "inv", "seq": seq, "source_offsets": [{"partition": PARTITION, "offset": offset}]}


# -- Spark offsets ----------------------------------------------------------------------------------


def test_a_spark_offset_round_trips_through_its_json_text_with_the_connectors_key_order() -> None:
    text = json.dumps(spark_offset(7, STREAMING))
    parsed = DebeziumOffset.parse(json.loads(text))
    assert parsed is not None and parsed.seq == 7 and parsed.connector == "inv"
    assert json.dumps(parsed.spark()) == text
    assert [list(o) for _, o in parsed.connect_entries()] == [list(STREAMING)], "key order kept for the daemon"


def test_partitions_are_listed_in_one_order_whatever_order_they_came_in() -> None:
    a, b = ({"server": "s", "database": "a"}, {"x": 1}), ({"server": "s", "database": "b"}, {"x": 2})
    assert DebeziumOffset.of("c", 1, [b, a]).spark() == DebeziumOffset.of("c", 1, [a, b]).spark()


@pytest.mark.parametrize(
    "value",
    [
        {"connector": "f", "filename": "/x", "position": 1, "byte_offset": 1},  # connect-file's
        {"connector": "inv", "seq": True, "source_offsets": []},
        {"connector": "inv", "seq": -1, "source_offsets": []},
        {"connector": "inv", "seq": 1, "source_offsets": [{"partition": PARTITION}]},
        {"connector": "inv", "seq": 1, "source_offsets": {}, "extra": 1},
        {"topic": {"0": 3}},
    ],
)
def test_anything_else_is_not_a_connect_debezium_offset(value: dict[str, Any]) -> None:
    assert DebeziumOffset.parse(value) is None


def test_the_checkpoint_offset_hands_off_as_the_connectors_own_entries() -> None:
    own = own_entries(spark_offset(3, STREAMING))
    assert own is not None and own[0] == "inv" and own[1] == [(PARTITION, STREAMING)]
    assert entries_for(spark_offset(3, STREAMING), 0, "source") == ("inv", [(PARTITION, STREAMING)])
    with pytest.raises(HandoffError, match="not a consumer group"):
        entries_for(spark_offset(3, STREAMING), 0, "sink")


def test_a_fresh_query_starts_at_the_daemons_raw_records_for_the_connector_only() -> None:
    records: dict[bytes, bytes | None] = {
        b'["inv",{"server":"inventory"}]': json.dumps(STREAMING, separators=(",", ":")).encode(),
        b'["other",{"server":"inventory"}]': b'{"lsn":1}',
        b'["inv",null]': b'{"lsn":2}',
        b"not json": b"{}",
    }
    start = daemon_position("inv", records)
    assert start.seq == 0 and start.connect_entries() == [(PARTITION, STREAMING)]
    assert daemon_position("nobody", records).entries == ()


def test_the_engine_is_seeded_with_connects_own_key_and_value_bytes() -> None:
    seed = seed_records("inv", DebeziumOffset.parse(spark_offset(3, STREAMING)).entries)  # type: ignore[union-attr]
    assert seed == {
        b'["inv",{"server":"inventory"}]': b'{"lsn_proc":22464864,"messageType":"INSERT","lsn_commit":22464736,'
        b'"lsn":22464864,"txId":746}'
    }


# -- order ------------------------------------------------------------------------------------------


def test_a_transaction_that_began_earlier_and_committed_later_moves_forward() -> None:
    """txId goes down while the log position goes up: the generic rule would refuse it, wrongly."""
    later = {**STREAMING, "lsn_proc": STREAMING["lsn_proc"] + 500, "lsn": STREAMING["lsn"] + 500, "txId": 745}
    assert backwards_reason(STREAMING, later) is not None
    assert debezium_backwards_reason(STREAMING, later) is None


def test_an_older_lsn_is_backwards_and_the_same_offset_is_unchanged() -> None:
    older = {**STREAMING, "lsn_proc": 100, "lsn": 100}
    assert "backwards" in str(debezium_backwards_reason(STREAMING, older))
    assert debezium_backwards_reason(STREAMING, dict(STREAMING)) == "unchanged"
    assert debezium_backwards_reason(None, STREAMING) is None


def test_a_finished_snapshot_is_after_an_unfinished_one_at_the_same_lsn() -> None:
    done = {**SNAPSHOT, "last_snapshot_record": True, "snapshot_completed": True}
    assert debezium_backwards_reason(SNAPSHOT, done) is None
    assert "backwards" in str(debezium_backwards_reason(done, SNAPSHOT))
    assert debezium_backwards_reason(done, STREAMING) is None
    assert "backwards" in str(debezium_backwards_reason(STREAMING, SNAPSHOT))


def test_a_binlog_rotation_moves_forward_although_pos_goes_down() -> None:
    before = {"file": "mysql-bin.000003", "pos": 9000, "ts_sec": 10}
    after = {"file": "mysql-bin.000004", "pos": 4, "ts_sec": 11}
    assert debezium_backwards_reason(before, after) is None
    assert "backwards" in str(debezium_backwards_reason(after, before))


def test_offsets_of_connectors_without_a_known_order_are_written() -> None:
    sqlserver = {"commit_lsn": "0000002b:00000d48:0003", "change_lsn": "0000002b:00000d48:0002"}
    assert debezium_backwards_reason(sqlserver, {**sqlserver, "change_lsn": "0000002b:00000d40:0001"}) is None


# -- options ----------------------------------------------------------------------------------------

BASE = {"connector": "inv", "debezium.connector.class": "io.debezium.connector.postgresql.PostgresConnector"}


def test_the_connectors_properties_pass_through_and_its_name_is_the_identity() -> None:
    assert issubclass(ConnectDebeziumError, OptionError)
    options = parse_options({**BASE, "debezium.slot.name": "s1", "maxRecordsPerTrigger": "5"})
    assert options.engine.props == {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "slot.name": "s1",
        "name": "inv",
    }
    assert options.max_records == 5 and options.commit_offsets and options.claim_epoch is None
    assert parse_options({**BASE, "claimEpoch": "3"}).claim_epoch == 3  # the commits' claim on the connector
    assert options.schema.startswith("`seq` bigint, `key` string, `value` string, `topic` string")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"debezium.connector.class": "x"}, "option 'connector' is required"),
        ({"connector": "inv"}, "debezium.connector.class"),
        ({**BASE, "debezium.offset.storage": "x"}, "offsets are the daemon's"),
        ({**BASE, "debezium.offset.flush.interval.ms": "1"}, "offsets are the daemon's"),
        ({**BASE, "debezium.name": "other"}, "identity"),
        ({**BASE, "afterTable": "public.t"}, "go together"),
        ({**BASE, "afterTable": "public.t", "afterColumns": "id decimal"}, "supported"),
        ({**BASE, "afterTable": "public.t", "afterColumns": "seq int"}, "already a column"),
        ({**BASE, "maxRecordsPerTrigger": "0"}, ">= 1"),
        ({**BASE, "claimEpoch": "two"}, "option claimEpoch must be an integer, got 'two'"),
        ({**BASE, "maxRecordsPerTrigger": "10", "maxBufferedRecords": "5"}, "exceeds maxBufferedRecords"),
    ],
)
def test_bad_options_are_refused_with_the_options_name(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError) as err:  # ConnectDebeziumError is one
        parse_options(options)
    assert message in str(err.value)


# -- rows -------------------------------------------------------------------------------------------


def change(table: str, after: dict[str, Any] | None, *, schemas: bool = False, op: str = "c") -> Numbered:
    event = {"before": None, "after": after, "source": {"schema": "public", "table": table}, "op": op}
    value = json.dumps({"schema": {}, "payload": event} if schemas else event)
    record = ChangeRecord('{"id":1}', value, f"srv.public.{table}", '{"server":"srv"}', json.dumps(STREAMING))
    return Numbered(4, record)


def test_rows_keep_the_event_and_flatten_after_of_the_named_table() -> None:
    options = parse_options(
        {**BASE, "afterTable": "public.orders", "afterColumns": "id bigint, name string, ok boolean"}
    )
    builder = RowBuilder(options.after)
    row = builder.row(change("orders", {"id": 1, "name": "a", "ok": True}))
    assert row[0] == 4 and json.loads(row[2])["after"] == {"id": 1, "name": "a", "ok": True}
    assert row[3:] == ("srv.public.orders", '{"server":"srv"}', json.dumps(STREAMING), 1, "a", True)
    assert builder.row(change("orders", {"id": 2, "name": "b", "ok": None}, schemas=True))[6:] == (2, "b", None)
    assert builder.row(change("customers", {"id": 3}))[6:] == (None, None, None), "another table"
    assert builder.row(change("orders", None, op="d"))[6:] == (None, None, None), "a delete has no after"
    assert builder.mismatched == 0


def test_a_field_that_does_not_fit_its_column_is_null_and_counted() -> None:
    options = parse_options({**BASE, "afterTable": "orders", "afterColumns": "id int, name int"})
    builder = RowBuilder(options.after)
    assert builder.row(change("orders", {"id": 2**40, "name": "a"}))[6:] == (None, None)
    assert builder.mismatched == 2


def test_a_partition_is_read_as_one_arrow_batch_holding_the_same_rows() -> None:
    options = parse_options({**BASE, "afterTable": "orders", "afterColumns": "id bigint, name string"})
    changes = [change("orders", {"id": 1, "name": "a"}), change("other", {"id": 2}), change("orders", None, op="d")]
    batch = RowBuilder(options.after).batch(ChangeColumns.of(changes))
    names = [name for name, _ in BASE_COLUMNS] + ["id", "name"]
    assert batch.schema.names == names
    assert batch.to_pylist() == [dict(zip(names, RowBuilder(options.after).row(c), strict=True)) for c in changes]


def test_an_option_neither_ours_nor_the_connectors_is_refused() -> None:
    """The connector's own properties come as ``debezium.*``; anything else must be one of ours."""
    with pytest.raises(OptionError, match=r"^connect-debezium has no option 'maxrecordspertriger'; did you mean "):
        parse_options({**BASE, "maxrecordspertriger": "5"})


PRIMARY = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
REPLICA = "4f22ab58-82db-22f2-af44-d91bb0530673"


def test_a_failover_with_a_gtid_superset_moves_forward_although_the_binlog_restarts() -> None:
    """The new primary's binlog starts again (file 2 after 120): coordinates call the newer offset
    older; the GTID set, Debezium's own test (GtidSet.isContainedWithin), says it applied more."""
    old = {"file": "mysql-bin.000120", "pos": 500, "gtids": f"{PRIMARY}:1-1000", "server_id": 1}
    new = {"file": "mysql-bin.000002", "pos": 154, "gtids": f"{PRIMARY}:1-1000,\n{REPLICA}:1-5", "server_id": 2}
    assert debezium_backwards_reason(old, new) is None
    assert "GTID set lacks transactions" in str(debezium_backwards_reason(new, old))


def test_gtid_sets_neither_holding_the_other_cannot_be_ordered_and_are_written() -> None:
    one = {"file": "mysql-bin.000120", "pos": 500, "gtids": f"{PRIMARY}:1-1000"}
    other = {"file": "mysql-bin.000002", "pos": 154, "gtids": f"{PRIMARY}:1-900:950-1000,{REPLICA}:1-5"}
    assert debezium_backwards_reason(one, other) is None and debezium_backwards_reason(other, one) is None


def test_equal_or_unreadable_gtid_sets_leave_it_to_the_binlog_coordinates() -> None:
    same = f"{PRIMARY}:1-3:4-1000"  # the same transactions, spelled in two intervals
    earlier = {"file": "mysql-bin.000120", "pos": 500, "gtids": f"{PRIMARY}:1-1000"}
    later_same_set = {"file": "mysql-bin.000120", "pos": 400, "gtids": same}
    assert "backwards" in str(debezium_backwards_reason(earlier, later_same_set))
    mariadb = {"file": "mysql-bin.000120", "pos": 400, "gtids": "0-1-100"}
    assert "backwards" in str(debezium_backwards_reason({**earlier, "gtids": "0-1-90"}, mariadb))
