"""``CommitTarget``: a target that names no source of the query is an error, not a quiet "done".

``wait_for_termination`` returned True for a query whose only target named source 3 of a one-source
query: nothing was published and nothing said so. The check runs before any commit, so these need
no daemon (nothing listens at the URL).
"""

from __future__ import annotations

import pytest

from emulator.spark.committer import DaemonOffsets
from emulator.spark.handoff import CommitTarget, HandoffError, publish

NOBODY = "http://127.0.0.1:9"


def test_a_target_for_a_source_the_query_lacks_fails_the_publish() -> None:
    with DaemonOffsets(NOBODY) as daemon, pytest.raises(HandoffError) as refused:
        publish(daemon, {"0": '{"logOffset":3}'}, [CommitTarget(0, "a"), CommitTarget(3, "spark-text-3")])
    assert str(refused.value) == (
        "no source with that index in this query (source 3 -> spark-text-3); its sources are 0, in the order "
        "the query reads them"
    )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (lambda: CommitTarget(0, ""), "CommitTarget: connector must be a connector's name, got ''"),
        (lambda: CommitTarget(0, "x", "sinkk"), "CommitTarget: kind must be 'source' or 'sink', got 'sinkk'"),  # type: ignore[arg-type]
        (lambda: CommitTarget(-1, "x"), "CommitTarget: source_index must be 0 or more, got -1"),
    ],
)
def test_a_target_that_cannot_be_right_is_refused_when_made(target: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        target()  # type: ignore[operator]
