"""A Spark job that holds a connector's claim commits under it, on every path that commits.

A claimed connector refuses a write without the claim's current epoch (``connect-offsets claim``,
docs/claims-and-sequences.md). Each Spark path takes the epoch and sends it as ``alter
--claim-epoch`` does: ``connect-file``'s option ``claimEpoch`` (the source's own commit). With the
right epoch the commit lands; with a stale one, or none, it is refused, nothing is written, and the
refusal names the connector, the epoch given (or that none was) and the knob to change, never a
silent skip.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from emulator.spark.background import committer_for
from emulator.spark.file_source import ConnectFileStreamReader
from emulator.spark.filestream import Cursor
from emulator.spark.shapes import FileOffset
from tests.fixtures.daemon import DaemonProcess
from tests.spark.helpers import stored_position, unique

pytestmark = [pytest.mark.spark]

LINES = b"one\ntwo\nthree\n"


def claimed(daemon: DaemonProcess, file: Path, *owners: str) -> tuple[str, list[int]]:
    """A connector at position 0 of ``file``, claimed by each owner in turn: (its name, the epochs)."""
    connector = unique("claimed")
    file.write_bytes(LINES)
    client = daemon.client()
    body = {"offsets": [{"partition": {"filename": str(file)}, "offset": {"position": 0}}]}
    client.alter(connector, body, create=True)
    return connector, [int(client.claim(connector, owner)["epoch"]) for owner in owners]


def source_commit(daemon: DaemonProcess, connector: str, file: Path, position: int, **options: str) -> None:
    """What Spark does when it plans the next batch: the reader's ``commit(end)``, then the background
    thread's commit (waited for here)."""
    reader = ConnectFileStreamReader({"url": daemon.url, "connector": connector, "file": str(file), **options})
    reader.commit(FileOffset(connector, str(file), Cursor(position, position)).spark())
    assert committer_for(daemon.url, connector, reader.daemon.credentials, claim_epoch=reader.claim_epoch).flush(30)


# -- connect-file's own commit: option claimEpoch -----------------------------------------------------------


def test_connect_file_commits_to_a_claimed_connector_under_option_claim_epoch(
    embedded_daemon: DaemonProcess, tmp_path: Path
) -> None:
    file = tmp_path / "in.txt"
    connector, (epoch,) = claimed(embedded_daemon, file, "spark-run-7")
    source_commit(embedded_daemon, connector, file, 4, claimEpoch=str(epoch))
    assert stored_position(embedded_daemon.client(), connector, str(file)) == 4


@pytest.mark.parametrize("given", ["stale", "none"])
def test_connect_file_refused_for_the_claim_warns_what_to_change_and_writes_nothing(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture, given: str
) -> None:
    file = tmp_path / "in.txt"
    connector, (first, current) = claimed(embedded_daemon, file, "spark-run-7", "spark-run-8")
    options = {"claimEpoch": str(first)} if given == "stale" else {}
    with caplog.at_level(logging.WARNING, logger="emulator.spark.background"):
        source_commit(embedded_daemon, connector, file, 4, **options)
    assert stored_position(embedded_daemon.client(), connector, str(file)) == 0
    (warning,) = [r.getMessage() for r in caplog.records if connector in r.getMessage()]
    if given == "stale":
        assert (
            f"claimed by 'spark-run-8' with epoch {current}; the writer with epoch {first} has been fenced" in warning
        )
        assert (
            f"This commit to {connector} gave claim epoch {first} (connect-file's option claimEpoch), which is not "
            f"the connector's current claim" in warning
        )
        assert f"`connect-offsets claims {connector}`" in warning
    else:
        assert f"claimed by 'spark-run-8' (epoch {current})" in warning
        assert (
            f"This commit to {connector} gave no claim epoch: if this job holds that claim, give its epoch "
            "with connect-file's option claimEpoch" in warning
        )
