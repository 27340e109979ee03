"""A write the log refuses leaves no origin behind: the history never credits it with another's record.

The archive tells the daemon's own records from others' by their bytes: a write registers its (key,
value) pairs before it appends (docs/history.md, "How the daemon knows its own records"). A write
whose outcome is unknown keeps that registration, and a record with exactly its bytes is archived as
the daemon's, ``(unacknowledged)``. A write the log *refused* wrote nothing, yet it used to keep the
registration too: two daemons on one topic, a claim made through A, the same PATCH with the claim's
epoch refused through B (409, "made through another daemon") and then accepted through A, and B's
history showed A's record as ``daemon`` / ``PATCH (unacknowledged)`` with the address of B's refused
request, for as long as two minutes after the refusal (QA, two daemons on one topic).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import DaemonFactory
from tests.integration.connect_helpers import eventually, kafka_daemon_args, unique

pytestmark = pytest.mark.kafka

PARTITION = {"f": "x"}


def body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": PARTITION, "offset": {"pos": position}}]}


def changes(http: httpx.Client, connector: str) -> list[dict[str, Any]]:
    response = http.get(f"/connectors/{connector}/offsets/history")
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["changes"]
    return found


@pytest.mark.slow  # two daemons and a claim, 9 s here; the embedded case is in tests/unit/test_history_archive.py
def test_a_write_refused_through_another_daemon_is_not_credited_with_the_holders_record(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    args = kafka_daemon_args(kafka_broker.bootstrap, kafka_broker.unique_topic("refused-origin"), 3)
    a, b = daemon_factory(*args), daemon_factory(*args)  # each with a data directory and archive of its own
    connector = unique("refused-origin")
    path = f"/connectors/{connector}/offsets"
    with httpx.Client(base_url=a.url, timeout=30) as through_a, httpx.Client(base_url=b.url, timeout=30) as through_b:
        assert through_a.patch(path, params={"create": "true"}, json=body(1)).status_code == 200
        claim = through_a.post(f"/connectors/{connector}/claim", json={"owner": "job-on-a"})
        assert claim.status_code == 200, claim.text
        epoch = {"claim_epoch": claim.json()["epoch"]}

        refused = through_b.patch(path, params=epoch, json=body(42))
        assert refused.status_code == 409, refused.text
        assert "made through another daemon" in refused.json()["message"]
        accepted = through_a.patch(path, params=epoch, json=body(42))  # the same bytes, written by A
        assert accepted.status_code == 200, accepted.text

        seen_by_b = eventually(
            lambda: changes(through_b, connector), lambda rows: any(r["offset"] == {"pos": 42} for r in rows)
        )
        newest = seen_by_b[0]
        assert newest["offset"] == {"pos": 42}, seen_by_b
        assert (newest["origin"], newest["operation"], newest["principal"], newest["remote"]) == (
            "external",
            None,
            None,
            None,
        ), "B wrote nothing: A's record is someone else's to B, not B's refused PATCH"

        newest_at_a = changes(through_a, connector)[0]
        assert (newest_at_a["origin"], newest_at_a["operation"], newest_at_a["offset"]) == (
            "daemon",
            "PATCH",
            {"pos": 42},
        ), "A's own archive names A's write"
