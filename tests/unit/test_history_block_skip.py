"""History reads pass over blocks they need nothing of (``files.BlockSummary``), with answers identical
to a read that decodes every block: pages and their ``next``/``before`` paging, past states, rows."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

from emulator.history import files, query
from emulator.history.files import ReadReport, closed_name, open_name
from emulator.history.query import (
    MAX_LIMIT,
    HistoryReader,
    _outside,
    connector_history,
    cursor,
    parse_cursor,
    state_as_of,
)
from emulator.history.schema import FORMAT_KEY, HISTORY_FORMAT, content_crc, history_schema
from emulator.model.errors import ConnectorNotFound

Row = dict[str, Any]


def row(connector: str, n: int, time_ms: int, epoch: int, partition: int, offset: int, tombstone: bool = False) -> Row:
    key = json.dumps([connector, {"f": f"f{n}"}]).encode()
    out: Row = {
        "log": "test-log",
        "epoch": epoch,
        "kafka_partition": partition,
        "kafka_offset": offset,
        "record_timestamp_ms": time_ms,
        "archived_at_ms": time_ms + 5,
        "origin": "external",
        "operation": None,
        "request_connector": None,
        "principal": None,
        "remote": None,
        "key": key,
        "value": None if tombstone else b'{"pos":%d}' % offset,
        "connector": connector,
        "partition_json": json.dumps({"f": f"f{n}"}),
        "key_problem": None,
        "crc32": 0,
    }
    out["crc32"] = content_crc(out)
    return out


def write_file(directory: Path, seq: int, blocks: list[list[Row]], is_open: bool = False) -> Path:
    rows = [r for block in blocks for r in block]
    times = [r["record_timestamp_ms"] for r in rows]
    name = open_name(seq) if is_open else closed_name(seq, min(times), max(times))
    path = directory / name
    with path.open("wb") as fo:
        writer = fastavro.write.Writer(
            fo, history_schema(), codec="deflate", metadata={FORMAT_KEY: str(HISTORY_FORMAT)}
        )
        for block in blocks:
            for r in block:
                writer.write(r)
            writer.flush()  # one Avro block per list
    return path


def random_archive(directory: Path, rnd: random.Random) -> None:
    """Files of blocks of rows of three connectors, times from a few values (many equal ones), three
    epochs (later epochs start over at offset 0), in log order per partition; the last file open."""
    directory.mkdir(parents=True, exist_ok=True)
    next_offset: dict[tuple[int, int], int] = {}
    epoch = 0
    clock = 1_000
    n_files = rnd.randint(2, 6)
    for seq in range(n_files):
        blocks = []
        for _ in range(rnd.randint(1, 5)):
            block = []
            for _ in range(rnd.randint(1, 6)):
                if rnd.random() < 0.08 and epoch < 2:
                    epoch += 1
                clock += rnd.choice((0, 0, 1, 2, -1))  # record times need not grow
                partition = rnd.randrange(3)
                offset = next_offset.get((epoch, partition), 0)
                next_offset[(epoch, partition)] = offset + 1
                connector = rnd.choices(("tiny", "bulk", "mid"), (1, 8, 3))[0]
                block.append(row(connector, rnd.randrange(6), clock, epoch, partition, offset, rnd.random() < 0.1))
            blocks.append(block)
        write_file(directory, seq, blocks, is_open=seq == n_files - 1)


@pytest.fixture
def no_summaries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every block decoded: what every read did before blocks were summarised."""
    with monkeypatch.context() as patch:
        patch.setattr(files, "BLOCK_SUMMARIES", files._Summaries(0))
        yield


def all_pages(directory: Path, connector: str, limit: int, **filters: Any) -> list[str]:
    pages = []
    before = None
    while True:
        try:
            page = connector_history(HistoryReader(directory), connector, limit=limit, before=before, **filters)
        except ConnectorNotFound:
            return ["not found"]
        pages.append(json.dumps(page.as_dict(), sort_keys=True))
        if page.next is None:
            return pages
        before = parse_cursor(page.next)


def answers(directory: Path, rnd: random.Random) -> list[Any]:
    out: list[Any] = []
    for connector in ("tiny", "bulk", "mid", "none"):
        for limit in (1, 3, MAX_LIMIT):
            out.append(all_pages(directory, connector, limit))
        out.append(all_pages(directory, connector, 2, from_ms=1_002, to_ms=1_010))
        out.append(all_pages(directory, connector, 3, partition={"f": "f1"}))
        for at_ms in (999, 1_003, 10**6):
            for epoch in (None, 0, 1, 2):
                past = state_as_of(HistoryReader(directory), connector, at_ms, epoch)
                out.append((past.epoch, past.known, [(k, dict(v)) for k, v in past.rows.items()], past.report.records))
        # read_history's pass (it names a log directory; this archive has no log.json)
        rows = HistoryReader(directory).rows(_outside(connector, 1_003, None))
        out.append([dict(r) for r in rows if r["connector"] == connector and r["time_ms"] >= 1_003])
    return out


def test_answers_are_identical_to_decoding_every_block_on_random_archives(tmp_path: Path) -> None:
    skipped = 0
    for seed in range(6):
        rnd = random.Random(seed)
        directory = tmp_path / f"archive-{seed}"
        random_archive(directory, rnd)
        files.BLOCK_SUMMARIES.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(files, "BLOCK_SUMMARIES", files._Summaries(0))
            expected = answers(directory, rnd)
        first = answers(directory, rnd)  # summarises the blocks as it decodes them
        report = ReadReport()
        list(HistoryReader(directory, report=report).rows(lambda block: "tiny" not in block.connectors))
        skipped += report.blocks_skipped
        second = answers(directory, rnd)  # passes over blocks
        assert first == expected, seed
        assert second == expected, seed
    assert skipped > 0, "the random archives had blocks without the tiny connector to pass over"


def tiny_and_bulk(directory: Path) -> list[Path]:
    """The tiny connector's one record, then 40 blocks of bulk's in 4 files (the last one open)."""
    directory.mkdir()
    paths = [write_file(directory, 0, [[row("tiny", 0, 1_000, 0, 0, 0)]])]
    offset = 1
    for seq in range(1, 5):
        blocks = []
        for _ in range(10):
            blocks.append([row("bulk", n, 2_000 + offset, 0, 0, offset + n) for n in range(20)])
            offset += 20
        paths.append(write_file(directory, seq, blocks, is_open=seq == 4))
    return paths


def test_a_page_of_a_tiny_connector_decodes_only_its_own_block_once_blocks_are_summarised(tmp_path: Path) -> None:
    directory = tmp_path / "archive"
    tiny_and_bulk(directory)
    files.BLOCK_SUMMARIES.clear()
    first = connector_history(HistoryReader(directory), "tiny", limit=1)
    assert first.report.blocks_decoded == 41, "the first read decodes every block"
    reader = HistoryReader(directory)
    again = connector_history(reader, "tiny", limit=1)
    assert (reader.report.blocks_decoded, reader.report.blocks_skipped) == (1, 40)
    assert again.as_dict() == first.as_dict()
    assert reader.report.records == first.report.records == 801, "skipped records are counted as read"
    past = state_as_of(HistoryReader(directory), "tiny", 10**6)
    assert (past.report.blocks_decoded, past.epoch, list(past.rows)) == (1, 0, [b'["tiny", {"f": "f0"}]'])


def test_a_full_page_of_a_connector_passes_over_its_blocks_older_than_the_page(tmp_path: Path) -> None:
    directory = tmp_path / "archive"
    tiny_and_bulk(directory)
    files.BLOCK_SUMMARIES.clear()
    first = connector_history(HistoryReader(directory), "bulk", limit=5)
    reader = HistoryReader(directory)
    again = connector_history(reader, "bulk", limit=5)
    assert again.as_dict() == first.as_dict() and again.next == cursor((2_781, 0, 0, 796))
    # Summarised blocks are read newest first: the newest one fills the page (and one more row says it is
    # truncated); every other block holds only rows older than the page's oldest change.
    assert (reader.report.blocks_decoded, reader.report.blocks_skipped) == (1, 1)
    older = HistoryReader(directory)
    second = connector_history(older, "bulk", limit=5, before=parse_cursor(again.next or ""))
    assert older.report.blocks_decoded == 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files, "BLOCK_SUMMARIES", files._Summaries(0))
        assert (
            second.as_dict()
            == connector_history(
                HistoryReader(directory), "bulk", limit=5, before=parse_cursor(again.next or "")
            ).as_dict()
        )


def test_a_block_damaged_after_it_was_summarised_is_decoded_and_reported_again(tmp_path: Path) -> None:
    directory = tmp_path / "archive"
    paths = tiny_and_bulk(directory)
    files.BLOCK_SUMMARIES.clear()
    clean = connector_history(HistoryReader(directory), "tiny", limit=1)
    assert clean.report.damaged == []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files, "BLOCK_SUMMARIES", files._Summaries(0))
        data = bytearray(paths[2].read_bytes())
        blocks = list(fastavro.block_reader(paths[2].open("rb")))
        at = blocks[3].offset + blocks[3].size // 2  # inside the fourth block's compressed data
        data[at] ^= 0xFF
        paths[2].write_bytes(bytes(data))
        expected = connector_history(HistoryReader(directory), "tiny", limit=1).as_dict()
    reader = HistoryReader(directory)
    damaged = connector_history(reader, "tiny", limit=1).as_dict()
    assert damaged == expected and damaged["damaged_files"], "the damage is reported as by a read of every block"
    assert reader.report.blocks_skipped == 39


def test_a_deferred_block_that_no_longer_reads_as_summarised_sends_the_page_back_to_reading_everything(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "archive"
    tiny_and_bulk(directory)
    files.BLOCK_SUMMARIES.clear()
    expected = connector_history(HistoryReader(directory), "bulk", limit=5).as_dict()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(query, "read_deferred", lambda block, report: None)  # as if the file changed meanwhile
        reader = HistoryReader(directory)
        assert connector_history(reader, "bulk", limit=5).as_dict() == expected
    assert reader.report.blocks_decoded == 40, "read again in archive order: every bulk block"
