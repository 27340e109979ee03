"""The archiver's own Avro encoding is fastavro's, byte for byte, and its files read back with fastavro.

``emulator.history.avro_rows`` builds rows from cached pieces instead of handing dicts to fastavro
(a restore's main CPU cost). Whatever it writes must be exactly what fastavro writes for the same
row under ``schemas/history-record.avsc``, checksum included, or old readers and other languages'
readers would disagree with the archive.
"""

from __future__ import annotations

import io
import os
from typing import Any

import fastavro
import pytest
from fastavro.write import Writer

from emulator.history.avro_rows import RowEncoder, encode_long, key_fields, write_blocks
from emulator.history.origins import EXTERNAL_ORIGIN, Origin, OriginRegistry
from emulator.history.schema import content_crc, history_schema
from emulator.model.records import LogRecord

IDENTITY = "kafka://127.0.0.1:9092/connect-offsets"

RECORDS = [
    LogRecord(b'["c1",{"filename":"/a.txt"}]', b'{"position":1}', 0, 0, 1_700_000_000_000),
    LogRecord(b'["c1",{"filename":"/a.txt"}]', None, 3, 2**40, -1),  # a tombstone without a timestamp
    LogRecord(b'["c\xc3\xa9",{"f":1.5,"g":null}]', b"", 24, 7, 5),  # non-ASCII name, an empty value
    LogRecord(None, b"{}", 1, 1, 1),  # a null key (Connect ignores it; the archive keeps it)
    LogRecord(b"not json", b'{"p":1}', 2, 300, 2**62),
    LogRecord(b'["c2",null]', b'{"p":2}', 2, 301, 0),
]
ORIGINS = [
    EXTERNAL_ORIGIN,
    Origin("daemon", "PATCH", "c1", principal="alice", remote="10.0.0.7:5555"),
    Origin("daemon", "DELETE", None, uncertain=True),
    Origin("daemon", None, "c2", principal="bob"),
]


def expected_row(record: LogRecord, origin: Origin, epoch: int, received_ms: int) -> dict[str, Any]:
    """The row as the archive defines it (``rows.ArchiveRow``), checksum from ``schema.content_crc``."""
    connector, partition_json, problem = key_fields(record.key)
    operation = origin.operation
    if origin.uncertain and operation is not None:
        operation += " (unacknowledged)"
    row: dict[str, Any] = {
        "log": IDENTITY,
        "epoch": epoch,
        "kafka_partition": record.partition,
        "kafka_offset": record.offset,
        "record_timestamp_ms": record.timestamp_ms,
        "archived_at_ms": received_ms,
        "origin": origin.origin,
        "operation": operation,
        "request_connector": origin.connector,
        "principal": origin.principal,
        "remote": origin.remote,
        "key": record.key,
        "value": record.value,
        "connector": connector,
        "partition_json": partition_json,
        "key_problem": problem,
        "crc32": 0,
    }
    row["crc32"] = content_crc(row)
    return row


class FixedOrigins(OriginRegistry):
    """An enabled registry that answers one given origin for every record."""

    def __init__(self, origin: Origin) -> None:
        super().__init__()
        self.enable()
        self.origin = origin

    def lookup(self, record: LogRecord) -> Origin:
        return self.origin


@pytest.mark.parametrize("origin", ORIGINS, ids=lambda o: f"{o.origin}-{o.operation}")
@pytest.mark.parametrize("epoch", [1, 70])
def test_every_row_is_fastavros_encoding_of_the_same_row(origin: Origin, epoch: int) -> None:
    encoder = RowEncoder(IDENTITY, FixedOrigins(origin))
    for record in RECORDS * 2:  # the second time from the key cache
        out = io.BytesIO()
        fastavro.schemaless_writer(out, history_schema(), expected_row(record, origin, epoch, 1_700_000_000_123))
        assert encoder.encode(record, epoch, 1_700_000_000_123) == out.getvalue(), record


@pytest.mark.parametrize("n", [0, 1, -1, 63, -64, 64, 2**31 - 1, -(2**31), 2**62, -(2**63), 2**63 - 1])
def test_longs_are_zigzag_varints(n: int) -> None:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, {"type": "long"}, n)
    assert encode_long(n) == out.getvalue()


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_blocks_read_back_with_fastavro_in_order(codec: str) -> None:
    encoder = RowEncoder(IDENTITY, OriginRegistry())
    records = [LogRecord(f'["c",{{"n":{i}}}]'.encode(), b'{"p":%d}' % i, i % 5, i, i) for i in range(3000)]
    fo = io.BytesIO()
    marker = os.urandom(16)
    Writer(fo, history_schema(), codec=codec, sync_marker=marker)
    write_blocks(fo, [encoder.encode(r, 1, 9) for r in records[:1000]], codec, marker)
    write_blocks(fo, [encoder.encode(r, 1, 9) for r in records[1000:]], codec, marker)
    fo.seek(0)
    back = list(fastavro.reader(fo))
    assert [(r["kafka_partition"], r["kafka_offset"], r["key"], r["value"]) for r in back] == [
        (r.partition, r.offset, r.key, r.value) for r in records
    ]
    assert all(r["crc32"] == content_crc(r) for r in back)
