"""Paths that are not regular files (docs/transfers.md, "Files that are not regular files").

An export replaces its destination by renaming a new file over it, which destroys a device node
or a FIFO: it once turned a machine's ``/dev/null`` into a regular file. A device as a source never
ends (``/dev/zero``), and a FIFO blocks until somebody writes to it. So a destination must be a
regular file, and a source a regular file or a pipe read within ``--timeout``.

The device nodes here are private ones made in the test's own directory (``mknod`` needs root),
never the machine's.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.formats import kip875, snapshot, standalone
from emulator.formats.atomic import atomic_write
from emulator.formats.file_kinds import NotRegularFileError
from emulator.formats.model import RawRecord
from tests.fixtures.cli import run_cli

A = RawRecord(b'["pg",{"server":"a"}]', b'{"lsn":1}')
KINDS = ["standalone", "kip875", "cdc", "snapshot"]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a device node (mknod) needs root")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main([*args, "--quiet"])
    return code, capsys.readouterr().err


def device(path: Path, minor: int) -> Path:
    """A private node of the memory devices (1,3 is null, 1,5 zero, 1,7 full)."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return path


def source(tmp_path: Path) -> Path:
    path = tmp_path / "s.offsets"
    standalone.write_file(path, [A])
    return path


@needs_root
@pytest.mark.parametrize("kind", KINDS)
def test_an_export_to_a_device_node_is_refused_and_the_node_is_left_alone(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    null = device(tmp_path / "null", 3)
    code, err = cli(capsys, "migrate", "--from", f"standalone:{source(tmp_path)}", "--to", f"{kind}:{null}")
    assert code == 2
    assert "is a character device, not a regular file; an export only writes regular files" in err
    assert stat.S_ISCHR(os.stat(null).st_mode)


@pytest.mark.parametrize("kind", KINDS)
def test_an_export_to_a_fifo_is_refused_at_once_and_the_fifo_is_left_alone(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    code, err = cli(capsys, "migrate", "--from", f"standalone:{source(tmp_path)}", "--to", f"{kind}:{fifo}")
    assert code == 2 and "is a FIFO (named pipe), not a regular file" in err
    assert time.monotonic() - started < 5
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_dry_run_to_a_directory_is_refused_as_the_real_run_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "d").mkdir()
    code, err = cli(capsys, "migrate", "--from", str(source(tmp_path)), "--to", f"kip875:{tmp_path / 'd'}", "--dry-run")
    assert code == 2 and "is a directory, not a regular file" in err


@needs_root
@pytest.mark.parametrize("kind", KINDS)
def test_a_device_that_never_ends_is_refused_as_a_source(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zero = device(tmp_path / "zero", 5)
    code, err = cli(capsys, "migrate", "--from", f"{kind}:{zero}", "--to", f"standalone:{tmp_path / 'out'}")
    assert code == 2
    assert "is a character device; only a regular file or a pipe can be read" in err
    assert not (tmp_path / "out").exists()


def test_a_fifo_source_is_read_until_its_writer_closes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    body = kip875.encode_file([A]).data

    def write() -> None:
        with open(fifo, "wb") as pipe:  # blocks until the CLI opens the read end
            for i in range(0, len(body), 7):  # in pieces, as a slow producer delivers it
                pipe.write(body[i : i + 7])
                pipe.flush()
                time.sleep(0.01)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    out = tmp_path / "out.offsets"
    code, err = cli(capsys, "migrate", "--from", f"kip875:{fifo}", "--to", f"standalone:{out}")
    writer.join(5)
    assert code == 0 and "error" not in err
    assert standalone.load_file(out).records == [A]


def test_a_fifo_nobody_writes_to_ends_at_the_timeout_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    code, err = cli(
        capsys, "migrate", "--from", f"cdc:{fifo}", "--to", f"standalone:{tmp_path / 'out'}", "--timeout", "0.5"
    )
    assert code == 2
    assert "is a pipe that delivered 0 byte(s) and did not reach its end within 0.5 s" in err
    assert time.monotonic() - started < 5


def test_an_export_through_a_symbolic_link_replaces_its_target_and_keeps_the_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "real.json"
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, err = cli(capsys, "migrate", "--from", str(source(tmp_path)), "--to", f"kip875:{link}")
    assert (code, err) == (0, "")
    assert link.is_symlink()
    assert kip875.loads_file(target.read_bytes(), default_connector=None, source=str(target)).records == [A]


@needs_root
def test_atomic_write_itself_refuses_a_device_before_writing_anything(tmp_path: Path) -> None:
    null = device(tmp_path / "null", 3)
    with pytest.raises(NotRegularFileError, match="is a character device"):
        atomic_write(null, b"x")
    assert [p.name for p in tmp_path.iterdir()] == ["null"]  # no temporary file left behind either


@needs_root
def test_alter_refuses_a_device_as_its_body_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zero = device(tmp_path / "zero", 5)
    code = main(["alter", "c", "--file", str(zero), "--url", "http://127.0.0.1:9"])
    assert code == 2
    assert "is a character device; only a regular file or a pipe can be read" in capsys.readouterr().err


# --- standard input and output: KIND:- ---------------------------------------------------------------


@pytest.mark.slow
def test_a_conversion_can_run_from_standard_input_to_standard_output(tmp_path: Path) -> None:
    """``KIND:-`` is the stream; the file goes to stdout alone and the report to stderr."""
    body = kip875.encode_file([A]).data.decode()
    done = run_cli("migrate", "--from", "kip875:-", "--to", "cdc:-", stdin=body)
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"connector":"pg","state":{"sourcePartition":{"server":"a"},"sourceOffset":{"lsn":1}}}\n'
    assert "kip875:- -> cdc:-: read 1 record(s), 1 selected, wrote 1 change(s)" in done.stderr
    assert not list(tmp_path.iterdir())


def test_a_binary_export_to_standard_output_reads_back_as_the_same_records(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "emulator.cli", "migrate", "--from", str(source(tmp_path)), "--to", "snapshot:-"],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    loaded, _ = snapshot.loads(done.stdout, source="stdout")
    assert loaded.records == [A]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["snapshot", "kip875", "cdc"])
def test_an_export_whose_reader_goes_away_exits_141_and_claims_nothing(kind: str, tmp_path: Path) -> None:
    """``export --to snapshot:- | head -c 10``: the pipe took 64 KiB, the rest could not go, and the
    export exited 0 saying it wrote every change (a buffered write returns the short count, no error)."""
    path = tmp_path / "big.offsets"
    standalone.write_file(path, [RawRecord(b'["c",{"n":%d}]' % n, b'{"position":%d}' % n) for n in range(20_000)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "migrate", "--from", str(path), "--to", f"{kind}:-"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert len(proc.stdout.read(10)) == 10
    proc.stdout.close()  # the reader goes away, as head does
    status = proc.wait(timeout=60)
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert status == 141, stderr
    assert "wrote" not in stderr


def _migrated_to_limited_stdout(tmp_path: Path, source_path: Path, kind: str, limit: int) -> tuple[int, str, int]:
    """``migrate --from SOURCE --to KIND:-`` with stdout a file under a file-size limit of ``limit``
    bytes: its exit status, its stderr and how many bytes reached the file."""
    import resource

    def file_size_limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    out = tmp_path / "out"
    with out.open("wb") as stdout:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "emulator.cli",
                "migrate",
                "--from",
                str(source_path),
                "--to",
                f"{kind}:-",
                "--quiet",
            ],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},  # Python's start writes no .pyc files
            preexec_fn=file_size_limit,
        )
    return done.returncode, done.stderr.decode(), out.stat().st_size


@pytest.mark.parametrize("kind", ["kip875", "standalone"])
def test_an_export_to_standard_output_refused_part_way_exits_74_saying_the_output_is_incomplete(
    kind: str, tmp_path: Path
) -> None:
    """QA 21 #2: ``(ulimit -f 50; export --to kip875:- > out)`` exited 2 saying "cannot write standard
    output: File too large; nothing was written" with 51,200 bytes in ``out``. A stdout that cannot take
    the output is exit 74 (README), as for ``get``, and the message says how much went."""
    path = tmp_path / "big.offsets"
    standalone.write_file(path, [RawRecord(b'["c",{"n":%d}]' % n, b'{"position":%d}' % n) for n in range(20_000)])
    status, stderr, written = _migrated_to_limited_stdout(tmp_path, path, kind, 50 * 1024)
    assert written == 50 * 1024
    assert status == 74, stderr
    assert f"{kind}:-: cannot write standard output: File too large after 51,200 of " in stderr, stderr
    assert "the output is incomplete" in stderr and "nothing was written" not in stderr, stderr


def test_an_export_to_standard_output_refused_at_its_first_byte_exits_74_and_says_nothing_went(
    tmp_path: Path,
) -> None:
    """Refused before any byte went (a file-size limit of 0), the same exit 74, and then nothing was."""
    status, stderr, written = _migrated_to_limited_stdout(tmp_path, source(tmp_path), "kip875", 0)
    assert status == 74, stderr
    assert "kip875:-: cannot write standard output: File too large; nothing was written to it" in stderr, stderr
    assert written == 0


def test_standard_input_that_is_not_a_file_or_pipe_is_refused_by_name(tmp_path: Path) -> None:
    done = run_cli("migrate", "--from", "kip875:-", "--to", str(tmp_path / "o.offsets"))  # stdin: /dev/null
    assert done.returncode == 2
    assert "kip875:-: standard input is a character device; only a regular file or a pipe can be read" in done.stderr


@pytest.mark.slow
def test_a_file_named_dash_is_reached_as_dot_slash_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    done = run_cli("migrate", "--from", str(source(tmp_path)), "--to", "kip875:./-")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "-").is_file()
    assert "-> kip875:./-: read 1 record(s)" in done.stdout


def test_a_refusal_of_what_came_on_standard_input_names_standard_input(tmp_path: Path) -> None:
    done = run_cli("migrate", "--from", "kip875:-", "--to", str(tmp_path / "o.offsets"), stdin="{not json")
    assert done.returncode == 2
    assert done.stderr.startswith("error: standard input: not valid JSON"), done.stderr
