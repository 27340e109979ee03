"""What ``stop_between_batches`` says about a query that had already terminated when it was called.

The handoff re-check found it explaining a failed query's cut-off batch as "a trigger was active at
every look for 30 s, so it was stopped anyway", after 0.15 ms and no wait at all. The query here is
a stand-in with the three members the helper reads (``isActive``, ``status``, ``stop``); the
checkpoint is a directory laid out as Spark lays it out. The real query is driven in
``tests/spark/test_orderly_handover.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emulator.spark.stopping import stop_between_batches


class _Terminated:
    """A query that failed before the call: inactive, with a status Spark still answers."""

    def __init__(self) -> None:
        self.id = "q-failed"
        self.isActive = False
        self.status: dict[str, Any] = {"isTriggerActive": False}
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1


def test_a_query_that_had_already_terminated_is_said_to_have_and_its_cut_off_batch_named(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1\n{}\n")  # planned, never committed

    outcome = stop_between_batches(_Terminated(), 30, checkpoint=str(tmp_path))

    assert (outcome.stopped, outcome.between_batches, outcome.unfinished_batch) == (True, False, 0)
    assert outcome.reason is not None
    assert outcome.reason.startswith("the query had already terminated (it failed, or was stopped elsewhere)")
    assert "trigger was active" not in outcome.reason
    assert outcome.waited_s < 1


def test_a_query_that_had_already_terminated_between_batches_is_not_said_to_have_cut_one_off(
    tmp_path: Path,
) -> None:
    for name in ("offsets", "commits"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "0").write_text("v1\n{}\n")

    outcome = stop_between_batches(_Terminated(), 30, checkpoint=str(tmp_path))

    assert (outcome.between_batches, outcome.unfinished_batch, outcome.reason) == (True, None, None)
