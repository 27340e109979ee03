"""``connect-file`` says what a Spark user cannot see in the rows: lines read again, lines never read.

Built as Spark builds the reader, from its options, and asked for offsets by the test (no Spark
session: these are the driver's calls). Each case was silent before: a query resumed from a
checkpoint behind Connect re-read what Connect had processed, a truncated file lost what was
written into it meanwhile, and a missing file gave zero rows forever.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from emulator.spark.background import committer_for
from emulator.spark.file_source import ConnectFileStreamReader
from emulator.spark.filestream import Cursor
from emulator.spark.shapes import FileOffset
from tests.fixtures.daemon import DaemonProcess
from tests.spark.helpers import unique

pytestmark = [pytest.mark.spark]


def reader(url: str, connector: str, file: Path) -> ConnectFileStreamReader:
    return ConnectFileStreamReader({"url": url, "connector": connector, "file": str(file)})


def at(connector: str, file: Path, position: int) -> dict[str, object]:
    return FileOffset(connector, str(file), Cursor(position, position)).spark()


def test_a_checkpoint_behind_the_connector_warns_that_lines_are_read_again(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file, connector = tmp_path / "in.txt", unique("behind")
    file.write_text("".join(f"line{i}\n" for i in range(10)))
    partition = {"filename": str(file)}
    embedded_daemon.client().alter(
        connector, {"offsets": [{"partition": partition, "offset": {"position": 36}}]}, create=True
    )

    with caplog.at_level(logging.WARNING, logger="emulator.spark.file_source"):
        reader(embedded_daemon.url, connector, file).latestOffset(at(connector, file, 12), ReadAllAvailable())

    (warning,) = [r.getMessage() for r in caplog.records]
    # Not only Connect moves it: a REST PATCH does too, so the warning says what is known (QA 26 D6).
    assert "the connector's offset moved ahead to position 36, past this checkpoint's 12" in warning
    assert "Connect processed lines since, or someone altered the offset" in warning
    assert "start the query with a new checkpoint location" in warning


@pytest.mark.parametrize("operator", ["rewind", "reset"])
def test_a_connector_rewound_or_reset_behind_the_checkpoint_warns_once_that_the_checkpoint_wins(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture, operator: str
) -> None:
    """QA 26 D3: an operator's PATCH to 0 or reset after a Spark run was overwritten by the query
    restarted from its checkpoint, without a word."""
    file, connector = tmp_path / "in.txt", unique(operator)
    file.write_text("".join(f"line{i}\n" for i in range(10)))
    client = embedded_daemon.client()
    partition = {"filename": str(file)}
    client.alter(connector, {"offsets": [{"partition": partition, "offset": {"position": 36}}]}, create=True)
    if operator == "rewind":
        client.alter(connector, {"offsets": [{"partition": partition, "offset": {"position": 0}}]})
    else:
        client.reset(connector)

    source = reader(embedded_daemon.url, connector, file)
    with caplog.at_level(logging.WARNING, logger="emulator.spark.file_source"):
        for _ in range(3):  # the restarted query's triggers: said once
            source.latestOffset(at(connector, file, 36), ReadAllAvailable())

    (warning,) = [r.getMessage() for r in caplog.records]
    held = "at position 0, behind it" if operator == "rewind" else "missing"
    assert f"this checkpoint is at position 36, but the connector's offset is {held}" in warning
    assert "The checkpoint wins" in warning
    assert "the query's next commit overwrites the operator's change" in warning
    assert "To honour the rewind or reset, start the query with a new checkpoint location" in warning


def test_a_new_checkpoint_or_one_level_with_the_connector_says_nothing(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file, connector = tmp_path / "in.txt", unique("level")
    file.write_text("a\nb\n")
    with caplog.at_level(logging.WARNING, logger="emulator.spark.file_source"):
        fresh = reader(embedded_daemon.url, connector, file)
        fresh.latestOffset(fresh.initialOffset(), ReadAllAvailable())
        embedded_daemon.client().alter(
            connector, {"offsets": [{"partition": {"filename": str(file)}, "offset": {"position": 2}}]}, create=True
        )
        reader(embedded_daemon.url, connector, file).latestOffset(at(connector, file, 2), ReadAllAvailable())
    assert caplog.records == []


def test_a_restart_replaying_a_batch_cut_off_mid_way_is_no_rewind(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Handoff re-check N1: a ``query.stop()`` cut batch 1 off (offsets/1 without commits/1), the
    connector held batch 0's end (18), and nobody touched it. The restarted query replays batch 1
    (``partitions(18, 36)``) before its first ``latestOffset``, which then compared the replayed end
    (36) with the connector's 18 and said it had been rewound or reset: advice (a new checkpoint) that
    would read delivered lines again. The check is made against the replayed batch's start, the
    checkpoint's last committed end, as the Debezium source makes it."""
    file, connector = tmp_path / "in.txt", unique("replay")
    file.write_text("".join(f"line{i}\n" for i in range(10)))
    partition = {"filename": str(file)}
    embedded_daemon.client().alter(
        connector, {"offsets": [{"partition": partition, "offset": {"position": 18}}]}, create=True
    )
    source = reader(embedded_daemon.url, connector, file)
    with caplog.at_level(logging.WARNING, logger="emulator.spark.file_source"):
        source.partitions(at(connector, file, 18), at(connector, file, 36))  # the replay of batch 1
        source.latestOffset(at(connector, file, 36), ReadAllAvailable())
    assert [r.getMessage() for r in caplog.records] == []


def test_a_truncated_or_missing_file_is_said_once(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file, connector = tmp_path / "in.txt", unique("short")
    file.write_text("x\n")
    source = reader(embedded_daemon.url, connector, file)
    source.initialOffset()
    with caplog.at_level(logging.WARNING, logger="emulator.spark.file_source"):
        for _ in range(3):
            source.latestOffset(at(connector, file, 40), ReadAllAvailable())
        file.unlink()
        for _ in range(3):
            source.latestOffset(at(connector, file, 40), ReadAllAvailable())

    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "has 2 bytes, fewer than the 40 this query has read: truncated or replaced?" in messages[0]
    assert "cannot read" in messages[1] and "No such file or directory" in messages[1]


@pytest.mark.parametrize("spelling", ["relative", "//", "/./"])
def test_the_same_file_spelled_otherwise_than_the_connector_warns_naming_both(
    embedded_daemon: DaemonProcess,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    spelling: str,
) -> None:
    file, connector = tmp_path / "w" / "in.txt", unique("spelling")
    file.parent.mkdir()
    file.write_text("one\ntwo\nthree\n")
    embedded_daemon.client().alter(
        connector, {"offsets": [{"partition": {"filename": str(file)}, "offset": {"position": 8}}]}, create=True
    )
    monkeypatch.chdir(tmp_path)
    spelled = {"relative": "w/in.txt", "//": f"{tmp_path}/w//in.txt", "/./": f"{tmp_path}/./w/in.txt"}[spelling]

    with caplog.at_level(logging.WARNING, logger="emulator.spark.file_source"):
        source = ConnectFileStreamReader({"url": embedded_daemon.url, "connector": connector, "file": spelled})
        start = source.initialOffset()

    assert start["filename"] == spelled and start["position"] == 0  # the partition stays verbatim
    (warning,) = [r.getMessage() for r in caplog.records]
    assert f"for filename {str(file)!r}, the same file as option file {spelled!r}" in warning
    assert "Give option file exactly as the connector's 'file' setting spells it" in warning


def test_a_checkpoint_of_another_connector_is_refused_and_never_committed_to_this_one(
    embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    """The checkpoint's offsets name their connector, as they name their file: resuming another
    connector's checkpoint read from that connector's position and committed it to this one."""
    file, theirs, ours = tmp_path / "in.txt", unique("file-src"), unique("other-src")
    file.write_text("one\ntwo\nthree\n")
    source = reader(embedded_daemon.url, ours, file)

    for call in (
        lambda: source.latestOffset(at(theirs, file, 4), ReadAllAvailable()),
        lambda: source.partitions(at(theirs, file, 4), at(theirs, file, 8)),
    ):
        with pytest.raises(ValueError) as refused:
            call()
        assert str(refused.value) == (
            f"the checkpoint is for connector {theirs!r}, but option connector is {ours!r}; "
            "use a new checkpoint location for another connector"
        )

    source.commit(at(theirs, file, 8))  # a restart may repeat the checkpoint's last commit first
    source.commit(at(ours, tmp_path / "other.txt", 8))
    assert committer_for(embedded_daemon.url, ours).flush(10.0)  # the commits run in the background
    assert ours not in embedded_daemon.client().connectors()


def test_a_fresh_query_on_a_file_another_connector_has_an_offset_for_names_that_connector(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A misspelt option connector started the file from 0 without a word, although the daemon
    holds an offset for exactly this file under the right name. Warned, never refused: a new
    connector on a file is legitimate."""
    file, right = tmp_path / "in.txt", unique("file-src4")
    misspelt = right.replace("src", "scr")
    file.write_text("a\nb\nc\n")
    for holder in (right, unique("mirror")):  # only a similar name is a likely misspelling
        embedded_daemon.client().alter(
            holder, {"offsets": [{"partition": {"filename": str(file)}, "offset": {"position": 6}}]}, create=True
        )

    with caplog.at_level(logging.WARNING, logger="emulator.spark.file_source"):
        source = reader(embedded_daemon.url, misspelt, file)
        start = source.initialOffset()
        for _ in range(3):
            source.latestOffset(start, ReadAllAvailable())

    assert start["position"] == 0
    (warning,) = [r.getMessage() for r in caplog.records]
    assert f"connect-file {misspelt}: the connector has no offset for file {str(file)!r}" in warning
    assert f'connector {right!r} holds {{"position":6}} for this file' in warning
    assert "is option connector misspelt?" in warning
    assert "mirror" not in warning

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="emulator.spark.file_source"):
        assert reader(embedded_daemon.url, right, file).initialOffset()["position"] == 6
    assert caplog.records == [], "the connector that holds the offset resumes from it, without a word"
