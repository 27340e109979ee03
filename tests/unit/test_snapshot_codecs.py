"""Snapshots compressed by other tools (docs/transfers.md, "Snapshot"): Spark and ``avro-tools`` write
Avro with the snappy codec by default, and zstandard is common. A snapshot is "any Avro file with the
schema", so these must read, and a codec the installation lacks is named as such, not as damage."""

from __future__ import annotations

import io

import fastavro
import fastavro._read_py
import fastavro.read
import pytest

from emulator.formats import snapshot
from emulator.formats.model import FormatError

ROWS = [
    {
        "key": b'["pg",{"server":"a"}]',
        "value": b'{"lsn":1}',
        "connector": "pg",
        "kafka_partition": 3,
        "log_offset": 7,
        "timestamp_ms": 1_700_000_000_000,
    },
    {
        "key": b'["pg",{"server":"b"}]',
        "value": None,
        "connector": "pg",
        "kafka_partition": 0,
        "log_offset": 9,
        "timestamp_ms": 1_700_000_000_001,
    },
]


def written_by_another_tool(codec: str) -> bytes:
    """The file fastavro's own writer makes with ``codec``: no connect-offsets metadata, as from Spark."""
    out = io.BytesIO()
    fastavro.writer(out, snapshot.snapshot_schema(), ROWS, codec=codec)
    return out.getvalue()


@pytest.mark.parametrize("codec", ["snappy", "zstandard", "deflate"])
def test_a_snapshot_compressed_by_another_tool_reads_every_record(codec: str) -> None:
    loaded, _ = snapshot.loads(written_by_another_tool(codec), source=f"{codec}.avro")
    assert [(r.key, r.value, r.kafka_partition, r.log_offset) for r in loaded.records] == [
        (b'["pg",{"server":"a"}]', b'{"lsn":1}', 3, 7),
        (b'["pg",{"server":"b"}]', None, 0, 9),
    ]


def test_a_codec_the_installation_lacks_is_named_and_not_called_damage(monkeypatch: pytest.MonkeyPatch) -> None:
    data = written_by_another_tool("snappy")
    # what fastavro installs for snappy when cramjam is missing
    monkeypatch.setitem(fastavro.read.BLOCK_READERS, "snappy", fastavro._read_py.missing_codec_lib("snappy", "cramjam"))
    with pytest.raises(FormatError) as refused:
        snapshot.loads(data, source="snappy.avro")
    message = str(refused.value)
    assert "compressed with a codec this installation cannot decompress" in message
    assert "cramjam" in message and "damage," not in message
