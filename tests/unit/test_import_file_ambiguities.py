"""Import files that say less, or more, than they seem to (docs/transfers.md, "File formats").

A CDC state file with no state in it is refused as the other formats refuse an empty file: read as
"0 records", an import with ``--prune`` deleted the connector's offsets. A name written twice in one
JSON object is kept last-wins by every JSON reader, Jackson included; in a migration that loses data
without a word, so it is refused where it changes what is written where (a connector's second body,
a line naming two connectors) and counted in a note everywhere else.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.formats import cdc_state, standalone
from emulator.formats.model import FormatError, RawRecord

A = RawRecord(b'["pg",{"server":"a"}]', b'{"lsn":1}')


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([*args, "--quiet"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("content", [b"", b"\n\n", b"  \t\n \r\n"], ids=["empty", "blank-lines", "whitespace"])
def test_a_cdc_file_holding_no_state_is_refused_and_prune_deletes_nothing(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    states = tmp_path / "states.jsonl"
    states.write_bytes(content)
    store = tmp_path / "store.offsets"
    standalone.write_file(store, [A])
    code, _, err = cli(
        capsys, "migrate", "--from", f"cdc:{states}", "--to", str(store), "--connector", "pg", "--prune", "--yes"
    )
    assert code == 2
    assert "the file holds no state (it is empty or holds only blank lines): not a CDC state file" in err
    assert standalone.load_file(store).records == [A]


def test_the_same_connector_twice_in_a_kip875_file_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    joined = tmp_path / "joined.json"
    joined.write_text(
        '{"c1":{"offsets":[{"partition":{"p":1},"offset":{"o":1}}]},'
        '"c1":{"offsets":[{"partition":{"p":2},"offset":{"o":2}}]}}'
    )
    code, _, err = cli(capsys, "migrate", "--from", str(joined), "--to", str(tmp_path / "o.offsets"))
    assert code == 2
    assert 'connector "c1" has more than one body in this file (two exports joined by hand?)' in err
    assert "merge them into one body" in err and not (tmp_path / "o.offsets").exists()


def test_a_cdc_line_naming_two_connectors_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    states = tmp_path / "s.jsonl"
    states.write_text(
        '{"connector":"c1","connector":"c2","state":{"sourcePartition":{"p":1},"sourceOffset":{"o":1}}}\n'
    )
    code, _, err = cli(capsys, "migrate", "--from", str(states), "--to", str(tmp_path / "o.offsets"))
    assert code == 2 and 'line 1 names "connector" twice' in err


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "b.json",
            '{"c1":{"offsets":[{"partition":{"p":1},"offset":{"o":1}}],"offsets":[{"partition":{"p":2},"offset":{"o":2}}]}}',
            '"c1" names "offsets" twice',
        ),
        (
            "e.json",
            '{"c1":{"offsets":[{"partition":{"p":1},"partition":{"p":2},"offset":{"o":1}}]}}',
            '"c1".offsets[0] names "partition" twice',
        ),
        (
            "s.jsonl",
            '{"connector":"c1","state":{"sourcePartition":{"p":1},"sourcePartition":{"p":2},"sourceOffset":{"o":1}}}\n',
            'line 1.state names "sourcePartition" twice',
        ),
    ],
)
def test_a_field_of_the_files_own_shape_given_twice_is_refused(
    name: str, content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kept last-wins, a second ``offsets`` drops a whole list, a second ``partition`` moves an offset."""
    (tmp_path / name).write_text(content)
    code, _, err = cli(capsys, "migrate", "--from", str(tmp_path / name), "--to", str(tmp_path / "o.offsets"))
    assert code == 2 and message in err, err
    assert not (tmp_path / "o.offsets").exists()


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("s.jsonl", '{"connector":"c1","state":{"sourcePartition":{"p":1,"p":2},"sourceOffset":{"o":1}}}\n'),
        ("b.json", '{"c1":{"offsets":[{"partition":{"p":1,"p":2},"offset":{"o":1}}]}}'),
    ],
)
def test_a_name_twice_inside_a_partition_keeps_the_later_value_and_says_so(
    name: str, content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / name).write_text(content)
    out = tmp_path / "o.offsets"
    code = main(["migrate", "--from", str(tmp_path / name), "--to", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert 'note: 1 name(s) appear twice in one JSON object (first: "p"); the later value was kept' in err
    assert [r.key for r in standalone.load_file(out).records] == [b'["c1",{"p":2}]']


def test_millions_of_blank_lines_are_read_without_a_list_of_them(tmp_path: Path) -> None:
    """Measured in a child process: its peak RSS stays near the text's own size, not 20 times it."""
    path = tmp_path / "blank.jsonl"
    state = b'{"connector":"c","state":{"sourcePartition":{"p":1},"sourceOffset":{"o":1}}}\n'
    path.write_bytes(state + b"\n" * 20_000_000)
    probe = (
        "import resource, sys\n"
        "from emulator.formats import cdc_state\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"loaded = cdc_state.loads_file(open({str(path)!r}, 'rb').read())\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(len(loaded.records), (after - before) // 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    records, grown_mib = map(int, done.stdout.split())
    assert records == 1
    assert grown_mib < 120, f"reading 20 MB of blank lines grew the process by {grown_mib} MiB"


def test_a_file_of_only_states_still_reads_every_line() -> None:
    data = b"".join(
        b'{"connector":"c","state":{"sourcePartition":{"p":%d},"sourceOffset":{"o":1}}}\r\n' % i for i in range(3)
    )
    assert (
        len(
            cdc_state.loads_file(
                data + b'{"connector":"c","state":{"sourcePartition":{"p":9},"sourceOffset":{}}}'
            ).records
        )
        == 4
    )
    with pytest.raises(FormatError, match="no state"):
        cdc_state.loads_file(b"\xef\xbb\xbf\n")


@pytest.mark.parametrize("tail", [b"\r", b"\r\r", b" \r \r", b"\r\t"], ids=["cr", "cr-cr", "spaced", "cr-tab"])
def test_a_last_line_of_only_json_whitespace_is_blank_with_or_without_a_line_break(tail: bytes) -> None:
    """JSON's whitespace includes the carriage return: a last line of it (an editor's stray ``\\r``, no
    ``\\n`` after it) holds nothing, as the same characters before a ``\\n`` do; it was a JSON error."""
    state = b'{"connector":"c","state":{"sourcePartition":{"p":1},"sourceOffset":{"o":1}}}\n'
    assert len(cdc_state.loads_file(state + tail).records) == 1
    assert len(cdc_state.loads_file(state + tail + b"\n" + state).records) == 2
