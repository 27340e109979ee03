"""The parts of ``emulator.spark`` that need neither Spark nor a daemon: line rules, checkpoint
parsing, offset shapes, the monotonic rule, and the CLI's input errors.

The line rules are checked here against a line-by-line Python transcription of
``FileStreamSourceTask.poll``/``extractLine`` fed in random read sizes (the real connector is the
judge in ``test_line_rules_vs_connect.py``; this catches chunking and boundary mistakes cheaply).
"""

from __future__ import annotations

import codecs
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.client.errors import ApiError
from emulator.spark import ListenerCommitter, OffsetCommitListener
from emulator.spark.arrow_lines import lines_array
from emulator.spark.checkpoint import (
    CheckpointError,
    latest_completed_batch,
    local_path,
    parse_offset,
    parse_offset_log,
)
from emulator.spark.committer import ClaimRefused, DaemonOffsets, backwards_reason
from emulator.spark.debezium_offsets import debezium_backwards_reason
from emulator.spark.filestream import Cursor, iter_chunks, read_lines, scan, split_at_lines, split_lines
from emulator.spark.handoff import CommitTarget, HandoffError, entries_for
from emulator.spark.shapes import FileOffset, foreign_entries, kafka_shaped
from tests.fixtures.daemon import DaemonProcess


def transcribed_task(data: bytes, reads: list[int]) -> list[tuple[str, int]]:
    """FileStreamSourceTask's loop: UTF-8 decoding into a char buffer, ``extractLine`` after each read,
    ``streamOffset += newStart``; a record's offset is the position after its line. Chars are UTF-16
    code units (a str of surrogates here)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    units = ""
    out: list[tuple[str, int]] = []
    stream_offset, pos, step = 0, 0, 0
    while pos < len(data):
        size = reads[step % len(reads)] if reads else len(data)
        step += 1
        chunk = data[pos : pos + size]
        pos += len(chunk)
        text = decoder.decode(chunk, final=pos >= len(data))
        units += text
        while True:
            until = new_start = -1
            buf = units
            for i, ch in enumerate(buf):
                if ch == "\n":
                    until, new_start = i, i + 1
                    break
                if ch == "\r":
                    if i + 1 >= len(buf):
                        break
                    until, new_start = i, (i + 2 if buf[i + 1] == "\n" else i + 1)
                    break
            if until == -1:
                break
            line = buf[:until]
            units = buf[new_start:]
            stream_offset += len(buf[:new_start].encode("utf-16-le")) // 2
            out.append((line, stream_offset))
    return out


TEXT = st.lists(
    st.sampled_from(
        [b"a", b"xyz", b"\n", b"\r", b"\r\n", "\u00e4".encode(), "\U0001f600".encode(), b"\xff", b"\xe6\x97"]
    ),
    max_size=40,
).map(b"".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(data=TEXT, reads=st.lists(st.integers(1, 7), max_size=5))
def test_scan_and_read_match_the_transcribed_task(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, reads: list[int]
) -> None:
    path = tmp_path_factory.mktemp("f") / "in.txt"
    path.write_bytes(data)
    expected = transcribed_task(data, reads)
    found = scan(path, Cursor(0, 0))
    assert found.lines == len(expected)
    assert found.end.position == (expected[-1][1] if expected else 0)
    assert read_lines(path, 0, found.end.byte_offset) == [line for line, _ in expected]
    # one line at a time, as maxLinesPerTrigger=1 batches would go, lands on every record's offset
    cursor, positions = Cursor(0, 0), []
    for _ in expected:
        cursor = scan(path, cursor, max_lines=1).end
        positions.append(cursor.position)
    assert positions == [offset for _, offset in expected]
    # executors' pieces concatenate to the whole, and the Arrow column holds the same strings
    pieces = split_at_lines(path, 0, found.end.byte_offset, 3)
    assert [line for a, b in pieces for line in read_lines(path, a, b)] == [line for line, _ in expected]
    whole = data[: found.end.byte_offset]
    assert lines_array(whole).to_pylist() == [line for line, _ in expected]


def test_a_trailing_cr_is_held_back_until_the_next_byte_decides(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"one\r")
    assert scan(path, Cursor(0, 0)).lines == 0
    path.write_bytes(b"one\r\ntwo\r")
    assert scan(path, Cursor(0, 0)) == scan(path, Cursor(0, 0), max_lines=5)
    assert scan(path, Cursor(0, 0)).end == Cursor(5, 5)


def test_a_missing_or_truncated_file_has_no_new_lines(tmp_path: Path) -> None:
    assert scan(tmp_path / "absent.txt", Cursor(3, 3)).lines == 0
    short = tmp_path / "short.txt"
    short.write_bytes(b"a\n")
    assert scan(short, Cursor(10, 10)).end == Cursor(10, 10)


def test_long_ranges_are_read_in_bounded_pieces(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    lines = [f"line {i}" + "x" * (i % 50) for i in range(3000)]
    path.write_bytes("\r\n".join(lines).encode() + b"\r\n")
    pieces = list(iter_chunks(path, 0, path.stat().st_size, batch_bytes=4096))
    assert len(pieces) > 10 and all(p.endswith(b"\r\n") for p in pieces)
    assert [line for piece in pieces for line in split_lines(piece)] == lines
    assert [line for piece in pieces for line in lines_array(piece).to_pylist()] == lines


def test_resuming_from_a_connect_position_skips_bytes_like_the_task(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes("\u00e4\u00e4\nnext\n".encode())  # the first line is 5 bytes but 3 chars
    first = scan(path, Cursor(0, 0), max_lines=1).end
    assert first == Cursor(3, 5)
    assert Cursor.from_connect(first.position) == Cursor(3, 3)
    assert read_lines(path, 3, scan(path, Cursor.from_connect(3)).end.byte_offset) == ["\ufffd", "next"]
    assert Cursor.from_connect(-4) == Cursor(-4, 0)


# -- checkpoint ---------------------------------------------------------------------------------


def _write(root: Path, name: str, text: str) -> None:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text)


def test_the_latest_batch_with_a_commit_is_the_completed_one(tmp_path: Path) -> None:
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
    _write(tmp_path, "offsets/0", f'v1\n{meta}\n{{"n": 1}}\n-')
    _write(tmp_path, "offsets/1", f'v1\n{meta}\n{{"n": 2}}\n{{"m": 5}}')
    _write(tmp_path, "offsets/2", f'v1\n{meta}\n{{"n": 3}}\n{{"m": 6}}')  # planned, never committed
    _write(tmp_path, "offsets/.2.crc", "junk")
    _write(tmp_path, "commits/0", 'v1\n{"nextBatchWatermarkMs":0}')
    _write(tmp_path, "commits/1", 'v1\n{"nextBatchWatermarkMs":0}')
    batch = latest_completed_batch(tmp_path)
    assert batch is not None and batch.batch_id == 1
    assert batch.sources == {"0": '{"n": 2}', "1": '{"m": 5}'}
    assert latest_completed_batch(f"file://{tmp_path}") == batch
    (tmp_path / "offsets/1").unlink()  # purged: the next older completed batch
    older = latest_completed_batch(tmp_path)
    assert older is not None and older.batch_id == 0 and older.sources == {"0": '{"n": 1}', "1": None}
    with pytest.raises(CheckpointError, match="no source 7"):
        older.source(7)


def test_offset_log_v2_lines_carry_their_source_id() -> None:
    version, sources = parse_offset_log('v2\n{"batchWatermarkMs":0}\n1:0\n0:{"n": 2}\n')
    assert version == 2 and sources == {"1": "0", "0": '{"n": 2}'}
    with pytest.raises(CheckpointError, match="not supported"):
        parse_offset_log("v9\n{}\n1")
    with pytest.raises(CheckpointError, match="not a Spark offset log"):
        parse_offset_log("hello")


@pytest.mark.parametrize(
    ("location", "path"),
    [
        ("file:///tmp/a b%41/cp", "/tmp/a b%41/cp"),  # Hadoop's Path: file:/tmp/a b%41/cp, not /tmp/a bA
        ("file:/tmp/a%2541", "/tmp/a%2541"),
        ("file://localhost/tmp/x#1?y", "/tmp/x#1?y"),  # no fragment, no query: part of the name
        ("/tmp/plain%20dir", "/tmp/plain%20dir"),
    ],
)
def test_a_file_uri_checkpoint_names_the_directory_spark_wrote(location: str, path: str) -> None:
    """Spark (Hadoop's ``Path``) takes a ``file:`` location's text as the path itself; the table's
    first rows are what ``new Path(location).toString()`` gave in a JVM."""
    assert local_path(location) == Path(path)


def test_checkpoints_elsewhere_than_local_disk_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="only local"):
        latest_completed_batch("s3a://bucket/cp")
    with pytest.raises(CheckpointError, match="does not exist"):
        latest_completed_batch(tmp_path / "nope")
    (tmp_path / "cp").mkdir()
    with pytest.raises(CheckpointError) as not_one:  # a mistyped path must not read as "nothing to hand off"
        latest_completed_batch(tmp_path)
    assert str(not_one.value) == (
        f"{tmp_path} is not a Spark checkpoint: it has no metadata file and no offsets/ directory (the query's "
        "checkpointLocation is the directory holding them)"
    )
    (tmp_path / "cp" / "metadata").write_text('{"id":"3f1c"}\n')  # what Spark writes when a query starts
    assert latest_completed_batch(tmp_path / "cp") is None  # a fresh checkpoint: nothing completed
    with pytest.raises(CheckpointError, match=f"; the checkpoints in it: {tmp_path / 'cp'}$"):
        latest_completed_batch(tmp_path)


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"b": 2, "a": 0}', {"b": 2, "a": 0}),
        ("None", None),
        (None, None),
        ("-", None),
        ({"x": 1}, {"x": 1}),
        ("{'b': 2}", {"b": 2}),  # a Python repr from older PySpark progress objects
        ("42", 42),
        ("not json {", None),
    ],
)
def test_offsets_are_parsed_from_every_form_spark_hands_out(raw: object, parsed: object) -> None:
    assert parse_offset(raw) == parsed


# -- shapes and the monotonic rule ----------------------------------------------------------------


def test_connect_file_offsets_are_self_describing_and_keep_their_key_order() -> None:
    offset = FileOffset("c", "/f", Cursor(7, 9))
    assert list(offset.spark()) == ["connector", "filename", "position", "byte_offset"]
    assert FileOffset.parse(offset.spark()) == offset
    assert offset.connect_entry() == ({"filename": "/f"}, {"position": 7})
    assert FileOffset.parse({"connector": "c", "filename": "/f", "position": True, "byte_offset": 1}) is None
    assert FileOffset.parse({"position": 1}) is None


def test_foreign_offsets_map_to_connect_entries() -> None:
    assert kafka_shaped({"t": {"0": 5, "1": 7}}) == {"t": {0: 5, 1: 7}}
    assert kafka_shaped({"t": {"zero": 5}}) is None
    assert foreign_entries({"t": {"1": 7, "0": -1}}, 0) == [
        ({"kafka_topic": "t", "kafka_partition": 1}, {"kafka_offset": 7})
    ]
    assert foreign_entries({"logOffset": 3, "meta": {"a": [1, 2]}}, 2) == [
        ({"spark_source": 2}, {"logOffset": 3, "meta.a": "[1,2]"})
    ]
    assert foreign_entries(17, 1) == [({"spark_source": 1}, {"offset": 17})]
    assert foreign_entries(None, 1) == []


def test_commits_never_move_backwards_and_repeat_as_no_ops() -> None:
    assert backwards_reason(None, {"position": 1}) is None
    assert backwards_reason({"position": 5}, {"position": 5}) == "unchanged"
    assert backwards_reason({"position": 5}, {"position": 4}) == "would move backwards (position 5 -> 4)"
    assert backwards_reason({"position": 5}, {"position": 6}) is None
    assert backwards_reason({"kafka_offset": 3, "tag": "x"}, {"kafka_offset": 3, "tag": "y"}) is None


def test_an_offset_equal_in_python_but_not_in_connect_is_written_not_skipped_as_unchanged() -> None:
    """Python calls 1, 1.0 and True equal; Connect holds a Long, a Double and a Boolean. Skipped as
    unchanged, the connector kept the Long while Spark's offset was a Boolean."""
    assert backwards_reason({"flag": 1}, {"flag": True}) is None
    assert backwards_reason({"v": 1}, {"v": 1.0}) is None
    assert backwards_reason({"v": 1.0}, {"v": 1}) is None
    assert backwards_reason({"v": 1, "w": "a"}, {"w": "a", "v": 1}) == "unchanged", "key order is not a change"
    assert debezium_backwards_reason({"lsn": 5, "snapshot": 1}, {"lsn": 5, "snapshot": True}) is None


# -- CLI input errors (no daemon needed: they stop before any request) ------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator.cli", "spark-handoff", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_spark_handoff_reports_bad_checkpoints_clearly(tmp_path: Path) -> None:
    missing = _cli("--checkpoint", str(tmp_path / "nope"), "--connector", "c", "--url", "http://127.0.0.1:9")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    not_one = _cli("--checkpoint", str(tmp_path), "--connector", "c", "--url", "http://127.0.0.1:9")
    assert not_one.returncode == 2 and "is not a Spark checkpoint" in not_one.stderr
    _write(tmp_path, "metadata", '{"id":"3f1c"}')
    fresh = _cli("--checkpoint", str(tmp_path), "--connector", "c", "--url", "http://127.0.0.1:9")
    assert fresh.returncode == 0 and "no completed batch" in fresh.stdout
    _write(tmp_path, "offsets/0", 'v1\n{}\n{"n": 1}')
    _write(tmp_path, "commits/0", "v1\n{}")
    not_ours = _cli("--checkpoint", str(tmp_path), "--connector", "c", "--kind", "sink", "--url", "http://127.0.0.1:9")
    assert not_ours.returncode == 2 and "not Kafka-shaped" in not_ours.stderr


def test_the_cli_does_not_import_pyspark() -> None:
    code = "import sys, emulator.cli; emulator.cli.build_parser(); print('pyspark' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"


def _file_checkpoint(root: Path, connector: str) -> None:
    offset = json.dumps({"connector": connector, "filename": "/data/in.txt", "position": 30, "byte_offset": 30})
    _write(root, "metadata", '{"id":"3f1c"}')
    _write(root, "offsets/0", f"v1\n{{}}\n{offset}")
    _write(root, "commits/0", "v1\n{}")


@pytest.mark.slow
def test_spark_handoff_refuses_a_connector_other_than_the_one_the_offset_names(tmp_path: Path) -> None:
    """A mistyped --connector made a new connector c3 with c03's position, and exited 0."""
    _file_checkpoint(tmp_path, "c03")
    typo = _cli("--checkpoint", str(tmp_path), "--connector", "c3", "--url", "http://127.0.0.1:9")
    assert typo.returncode == 2, typo.stderr
    assert "--connector 'c3', but the checkpoint's offset (batch 0, source 0) names connector 'c03'" in typo.stderr


# -- spark-handoff against the embedded daemon -------------------------------------------------


@pytest.mark.slow
def test_spark_handoff_makes_a_connector_only_with_create(tmp_path: Path, embedded_daemon: DaemonProcess) -> None:
    _file_checkpoint(tmp_path, "fresh-connector")
    args = ("--checkpoint", str(tmp_path), "--connector", "fresh-connector", "--url", embedded_daemon.url)
    refused = _cli(*args)
    assert refused.returncode == 2, refused.stderr
    assert "has no source connector 'fresh-connector': spark-handoff makes one only with --create" in refused.stderr
    dry = _cli(*args, "--dry-run")
    assert dry.returncode == 2, dry.stderr
    with DaemonOffsets(embedded_daemon.url) as daemon:
        assert daemon.offsets("fresh-connector") is None
        created = _cli(*args, "--create")
        assert created.returncode == 0, created.stderr
        assert daemon.offsets("fresh-connector") == [
            {"partition": {"filename": "/data/in.txt"}, "offset": {"position": 30}}
        ]


def test_the_listeners_handoff_advice_names_the_connector_its_offset_names(tmp_path: Path) -> None:
    """It said ``--connector NAME`` although the checkpoint names the connector."""
    _file_checkpoint(tmp_path, "c03")
    listener = OffsetCommitListener(url="http://127.0.0.1:9")
    advice = listener._handoff_commands(str(tmp_path), None, "3f1c")
    assert advice == (
        f"`connect-offsets spark-handoff --url http://127.0.0.1:9 --checkpoint {tmp_path} "
        "--connector c03 --source-index 0`"
    )
    assert "NAME" in listener._handoff_commands(None, None, "3f1c")  # nothing says which connector


def test_the_listeners_handoff_advice_can_be_pasted_into_a_shell_as_printed(tmp_path: Path) -> None:
    """A checkpoint with a space in its path was printed unquoted: pasted, a usage error."""
    spaced = tmp_path / "my dir" / "cp"
    _file_checkpoint(spaced, "c 03")
    advice = OffsetCommitListener(url="http://127.0.0.1:9")._handoff_commands(str(spaced), None, "3f1c")
    command = advice.strip("`")
    assert shlex.split(command)[4:] == ["--checkpoint", str(spaced), "--connector", "c 03", "--source-index", "0"]


def test_the_listeners_handoff_advice_does_not_repeat_an_epoch_the_daemon_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a stale epoch's refusal the advice carried that same epoch: pasted, refused again. Only the
    refused connector's epoch is replaced, and a publish that lands afterwards restores the epoch."""
    targets = [CommitTarget(0, "a", claim_epoch=1), CommitTarget(1, "b", claim_epoch=3)]
    listener = ListenerCommitter(url="http://127.0.0.1:9", targets=targets, own_sources=False)
    listener.termination_retry_s = 0
    fenced = ApiError(409, "Connector a is claimed by 'other' with epoch 2; the writer with epoch 1 has been fenced")
    fenced.kind = "fenced"

    def refused(query_id: str) -> None:
        raise ClaimRefused(fenced, "a", 1, "CommitTarget(0, 'a', claim_epoch=N)")

    monkeypatch.setattr(listener, "_publish", refused)
    assert listener._guarded("3f1c", "termination") is not None
    advice = listener._handoff_commands(None, None, "3f1c")
    assert "--connector a --source-index 0 --claim-epoch <epoch of the claim this job holds now>`" in advice
    assert "--claim-epoch 1" not in advice
    assert "--connector b --source-index 1 --claim-epoch 3`" in advice

    monkeypatch.setattr(listener, "_publish", lambda query_id: None)
    assert listener._guarded("3f1c", "termination") is None
    assert "--connector a --source-index 0 --claim-epoch 1`" in listener._handoff_commands(None, None, "3f1c")


def test_offset_fields_that_flatten_to_one_key_are_refused_not_merged() -> None:
    """``{"a.b": 1, "a": {"b": 2}}`` was published as ``{"a.b": 2}``: one field lost without a word."""
    with pytest.raises(HandoffError, match=r"source 0's offset: the offset's fields flatten to the key 'a\.b' twice"):
        entries_for({"a.b": 1, "a": {"b": 2}}, 0, "source")
    assert entries_for({"a": {"b": 2}, "c": 1}, 0, "source")[1] == [({"spark_source": 0}, {"a.b": 2, "c": 1})]


@pytest.mark.parametrize("option", ["limit", "from", "to", "partition"])
def test_history_options_without_history_are_refused_not_ignored(option: str) -> None:
    """``limit=3`` without ``history=true`` answered every current row: the option was read and ignored."""
    from emulator.spark.offsets_source import ConnectOffsetsReader

    with pytest.raises(ValueError, match=rf"^connect-offsets: option {option} applies to the history \(history=true\)"):
        ConnectOffsetsReader({"url": "http://127.0.0.1:9", option: "3"})
    assert ConnectOffsetsReader({"url": "http://127.0.0.1:9"}).history is False


INDEX = "source_index must be an int (the source's position in the query), got"


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "says"),
    [
        (
            ("0", "conn"),
            {},
            TypeError,
            INDEX + " '0' (str)",
        ),
        ((True, "conn"), {}, TypeError, INDEX + " True"),
        ((0.5, "conn"), {}, TypeError, INDEX + " 0.5"),
        ((-1, "conn"), {}, ValueError, "source_index must be 0 or more, got -1"),
        ((0, None), {}, TypeError, "connector must be a connector's name (str), got None (NoneType)"),
        ((0, 123), {}, TypeError, "connector must be a connector's name (str), got 123 (int)"),
        ((0, " "), {}, ValueError, "connector must be a connector's name, got ' '"),
        ((0, ""), {}, ValueError, "connector must be a connector's name, got ''"),
        ((0, "conn"), {"kind": "Sink"}, ValueError, "kind must be 'source' or 'sink', got 'Sink'"),
        ((0, "conn"), {"query": 5}, TypeError, "query must be a query's name or id (str) or None, got 5 (int)"),
        ((0, "conn"), {"query": ""}, ValueError, "query must be a query's name or id or None, got ''"),
    ],
)
def test_commit_target_names_the_argument_and_the_value_it_refuses(
    args: tuple[object, ...], kwargs: dict[str, object], error: type[Exception], says: str
) -> None:
    with pytest.raises(error) as raised:
        CommitTarget(*args, **kwargs)  # type: ignore[arg-type]
    assert type(raised.value) is error
    assert f"CommitTarget: {says}" in str(raised.value)


def test_a_well_formed_commit_target_is_accepted() -> None:
    assert CommitTarget(2, "conn", "sink", "q").connector == "conn"


def test_file_holders_are_the_connectors_whose_listing_has_an_offset_for_the_file(tmp_path: Path) -> None:
    """What a fresh ``connect-file`` query names when its own connector has no offset for the file
    (a misspelt option connector otherwise re-read the file from 0 without a word). It reads the
    similar connectors' GET listings: the offsets their tasks read, ``null`` where no task reads one."""
    from emulator.spark.file_source import file_holders

    file = tmp_path / "in.txt"
    file.write_text("a\n")
    path, other = str(file), str(tmp_path / "other.txt")
    listings: dict[str, list[Any]] = {
        "file-src4": [{"partition": {"filename": path}, "offset": {"position": 6}}],
        "b-src": [{"partition": {"filename": f"{tmp_path}/./in.txt"}, "offset": {"position": 1}}],  # other spelling
        "c-src": [{"partition": {"filename": other}, "offset": {"position": 9}}],  # another file
        "d-src": [{"partition": {"filename": path, "x": 1}, "offset": {"position": 9}}],  # not FileStreamSource's
        "e-src": [{"partition": {"filename": path}, "offset": None}],  # listed, but no task reads an offset
        "f-src": ["not a row", {"partition": "not a map", "offset": {"position": 3}}],
    }
    assert file_holders(listings, path) == [
        ("b-src", f"{tmp_path}/./in.txt", {"position": 1}),
        ("file-src4", path, {"position": 6}),
    ]
    assert file_holders(listings, other) == [("c-src", other, {"position": 9})]
