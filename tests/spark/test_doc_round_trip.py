"""docs/spark.md's round trip (Connect → Spark → Connect) runs as printed and prints what the page shows.

The block is read from the page (tests/fixtures/doc_blocks.py) and run by bash from a directory
whose `.venv` is this interpreter's virtualenv, as a reader runs it from the repository root. Two
things differ, both for the suite's sake: its daemon's port (8082 on the page, a free one here) and
where `mktemp -d` makes the scratch directory (the test's own). Its own Spark starts in its own
process, so this test does not use the session's Spark.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.fixtures.doc_blocks import blocks, reader_directory, run_block
from tests.fixtures.processes import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow]

HEADING = "A round trip, Connect → Spark → Connect"


def comparable(text: str) -> list[str]:
    """The lines as a reader compares them: column padding (which follows the scratch directory's
    name) collapsed, and the two values the page says vary (Kafka partition, timestamp) named."""
    lines = []
    for line in text.splitlines():
        line = re.sub(r"-{2,}", "-", line)
        line = re.sub(r" *\| *", "|", line)
        line = re.sub(r" {2,}", " ", line).rstrip()
        line = re.sub(r"\|\d+\|(\d+)\|\d{13}\|$", r"|<kafka partition>|\1|<timestamp>|", line)
        lines.append(line)
    return lines


def test_round_trip_prints_what_the_page_shows(tmp_path: Path) -> None:
    (script,) = blocks("docs/spark.md", HEADING, "sh")
    (printed,) = blocks("docs/spark.md", HEADING, "")
    cwd = reader_directory(tmp_path / "reader")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    port = free_port()
    env = {**os.environ, "TMPDIR": str(scratch)}
    env.pop("CONNECT_OFFSETS_URL", None)

    ran = run_block(script.replace("8082", str(port)), cwd, env, timeout_s=240)

    (directory,) = scratch.glob("tmp.*")  # the example's `mktemp -d` (Spark keeps its own files there too)
    actual = ran.stdout.replace(str(directory), "/tmp/tmp.X").replace(str(port), "8082")
    assert comparable(actual) == comparable(printed)
