"""The documentation's examples do what the pages say, run exactly as a reader would run them.

A reader runs the README's quickstart from the repository root with the virtualenv's commands
(`.venv/bin/…`) against the daemon of the README's first command. Here that is a scratch directory
whose `.venv` is this interpreter's virtualenv, and the one thing changed is the port: the test's
daemon listens on a free one, so `localhost:8081` in a block becomes that port and the CLI finds it
through `CONNECT_OFFSETS_URL` (the documented variable). Every other character of each block runs
as printed (tests/fixtures/doc_blocks.py reads it from the page).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.fixtures.doc_blocks import (
    assert_shows,
    blocks,
    expected_output,
    expected_prints,
    reader_directory,
    run_block,
)
from tests.fixtures.processes import free_port
from tests.fixtures.waits import until

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Reader:
    """A reader at the repository root with the README's daemon running (on a free port)."""

    cwd: Path
    port: int

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "CONNECT_OFFSETS_URL": f"http://127.0.0.1:{self.port}"}

    def shell(self, block: str, stop_at_failure: bool = True) -> str:
        """Run a page's shell block (tests/fixtures/doc_blocks.py: ``run_block``); its stdout."""
        return run_block(
            block.replace("localhost:8081", f"localhost:{self.port}"), self.cwd, self.env, 120, stop_at_failure
        ).stdout

    def quickstart(self) -> str:
        (quickstart,) = blocks("README.md", "Embedded (no Kafka)", "sh")
        return self.shell(quickstart)


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    """The README's first command (`connect-offsets serve`, the embedded default) on a free port."""
    cwd = reader_directory(tmp_path / "repository")
    port = free_port()
    log = (tmp_path / "daemon.log").open("wb")
    command = [".venv/bin/connect-offsets", "serve", "--port", str(port)]
    proc = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=log)

    def ready() -> bool:
        assert proc.poll() is None, (tmp_path / "daemon.log").read_text()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        until(ready, "the README's daemon ready", timeout_s=60, poll_s=0.1)
        yield Reader(cwd, port)
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def test_readme_embedded_quickstart_runs_as_written(reader: Reader) -> None:
    stdout = reader.quickstart()

    # curl prints no newline after a body: the two answers run into the CLI's first line, as on a terminal
    decoder = json.JSONDecoder()
    readiness, end = decoder.raw_decode(stdout)
    patched, end = decoder.raw_decode(stdout, end)
    assert readiness["ready"] is True
    assert patched == {"message": CONNECT_ALTERED}
    out = stdout[end:].splitlines()
    get_lines = [line.split() for line in out[0:2]]
    assert get_lines == [["PARTITION", "OFFSET"], ['{"filename":', '"/data/in.txt"}', '{"position":', "151}"]]
    assert out[2] == CONNECT_ALTERED
    history = [line for line in out[3:] if "/data/in.txt" in line]
    assert [line.rsplit("->", 1)[1].strip() for line in history] == ['{"position": 200}', '{"position": 151}']
    assert (reader.cwd / "data").is_dir(), "the README says the embedded default keeps its offsets under ./data"


def test_api_python_client_example_prints_what_its_comments_say(reader: Reader) -> None:
    """docs/api.md's client example continues the README's quickstart (its connector `my-source`)."""
    reader.quickstart()
    (example,) = blocks("docs/api.md", "Python clients", "python")

    done = subprocess.run(
        [".venv/bin/python", "-"],
        input=example.replace("127.0.0.1:8081", f"127.0.0.1:{reader.port}"),
        cwd=reader.cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    expected = expected_prints(example)
    assert len(printed) == len(expected) == 3, printed
    for line, pattern in zip(printed, expected, strict=True):
        assert pattern.fullmatch(line), f"printed {line!r}, the page says {pattern.pattern!r}"


def test_claims_and_sequences_page_runs_in_order_and_shows_its_answers(reader: Reader) -> None:
    """docs/claims-and-sequences.md's shell blocks, in the page's order, after the README's quickstart:
    a claim by curl, the same by the CLI (fencing the first), then a replayed commit sequence."""
    reader.quickstart()
    claim_by_curl, claim_by_cli = blocks("docs/claims-and-sequences.md", "Claims", "sh")
    (sequences,) = blocks("docs/claims-and-sequences.md", "Commit sequences", "sh")

    for block in (claim_by_curl, claim_by_cli, sequences):
        output = reader.shell(block, stop_at_failure=block is not claim_by_cli)  # it shows a fenced writer
        assert_shows(output, expected_output(block))
    assert expected_output(claim_by_cli), "the CLI block shows its answers"
    assert '"dropped"' in expected_output(sequences)[0].pattern


CONNECT_ALTERED = (
    "The Connect framework-managed offsets for this connector have been altered successfully. However, if this "
    "connector manages offsets externally, they will need to be manually altered in the system that the "
    "connector uses."
)


def test_serve_port_zero_example_announces_its_url(tmp_path: Path) -> None:
    """docs/operations.md: a script learns the URL of a daemon on `--port 0` from `--url-file`."""
    cwd = reader_directory(tmp_path / "repository")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    (example,) = blocks("docs/operations.md", "Two modes", "sh")

    output = run_block(example, cwd, env, timeout_s=120).stdout

    assert expected_output(example), "the page shows what the daemon answers"
    assert_shows(output, expected_output(example))
