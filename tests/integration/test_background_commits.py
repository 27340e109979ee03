"""The Spark sources' background commits, against a real embedded daemon.

Both sources commit from ``reader.commit(end)`` on one thread per connector: the newest pending end
wins, a failure is reported and does not stop later commits, and ``connect-debezium`` acknowledges
a change to its engine only once the daemon holds its offsets (the no-gap rule, docs/spark.md).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from emulator.spark.background import BackgroundCommitter
from emulator.spark.debezium_commit import DebeziumCommitter
from emulator.spark.debezium_offsets import DebeziumOffset
from tests.fixtures.daemon import DaemonProcess, free_port

PARTITION = {"server": "inventory"}


def streaming(lsn: int) -> dict[str, Any]:
    return {"lsn_proc": lsn, "messageType": "INSERT", "lsn_commit": lsn - 128, "lsn": lsn, "txId": 746}


def held(daemon: DaemonProcess, connector: str) -> list[Any]:
    with daemon.client() as client:
        return [(row["partition"], row["offset"]) for row in client.offsets(connector)]


def test_the_newest_submitted_offset_is_what_the_daemon_holds_after_a_flush(embedded_daemon: DaemonProcess) -> None:
    connector = f"bg-{uuid.uuid4().hex[:10]}"
    committer = BackgroundCommitter(embedded_daemon.url, connector)
    for position in range(1, 21):
        committer.submit([({"file": "in.txt"}, {"position": position})])
    assert committer.flush(timeout_s=30)
    assert held(embedded_daemon, connector) == [({"file": "in.txt"}, {"position": 20})]


def test_debezium_acknowledges_a_change_only_after_the_daemon_holds_its_offsets(
    embedded_daemon: DaemonProcess,
) -> None:
    connector = f"dbz-{uuid.uuid4().hex[:10]}"
    seen_at_ack: list[tuple[int, int, list[Any]]] = []

    def acknowledge(seq: int, generation: int) -> None:
        seen_at_ack.append((seq, generation, held(embedded_daemon, connector)))

    committer = DebeziumCommitter(embedded_daemon.url, connector, acknowledge)
    committer.submit(DebeziumOffset.of(connector, 7, [(PARTITION, streaming(22464864))]), generation=1)
    assert committer.flush(timeout_s=30)
    assert seen_at_ack == [(7, 1, [(PARTITION, streaming(22464864))])]
    assert committer.committed_seq == 7 and committer.errors == []


def test_debezium_does_not_acknowledge_a_change_older_than_what_the_daemon_holds(
    embedded_daemon: DaemonProcess,
) -> None:
    connector = f"dbz-{uuid.uuid4().hex[:10]}"
    acknowledged: list[int] = []
    committer = DebeziumCommitter(embedded_daemon.url, connector, lambda seq, _gen: acknowledged.append(seq))
    committer.submit(DebeziumOffset.of(connector, 2, [(PARTITION, streaming(5000))]), generation=1)
    assert committer.flush(timeout_s=30)
    committer.submit(DebeziumOffset.of(connector, 1, [(PARTITION, streaming(100))]), generation=1)
    assert committer.flush(timeout_s=30)
    assert acknowledged == [2]
    assert held(embedded_daemon, connector) == [(PARTITION, streaming(5000))]


def test_a_daemon_out_of_reach_is_reported_and_the_change_stays_unacknowledged() -> None:
    acknowledged: list[int] = []
    unreachable = f"http://127.0.0.1:{free_port()}"
    committer = DebeziumCommitter(unreachable, "dbz-away", lambda seq, _gen: acknowledged.append(seq))
    committer.submit(DebeziumOffset.of("dbz-away", 3, [(PARTITION, streaming(900))]), generation=1)
    assert committer.flush(timeout_s=60)
    assert acknowledged == []
    assert len(committer.errors) == 1 and "committing change 3 failed" in committer.errors[0]


def test_a_client_that_cannot_be_made_is_logged_and_a_later_commit_makes_it(
    embedded_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, the thread made its client when it started: a setting the client refuses ended the
    thread, and every later commit of the connector waited in vain."""
    connector = f"bg-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("CONNECT_OFFSETS_RETRY_FOR", "soon")
    committer = BackgroundCommitter(embedded_daemon.url, connector)
    committer.submit([({"file": "in.txt"}, {"position": 1})])
    assert committer.flush(timeout_s=10)
    assert "CONNECT_OFFSETS_RETRY_FOR: expected a duration such as 10m" in caplog.text
    monkeypatch.delenv("CONNECT_OFFSETS_RETRY_FOR")
    committer.submit([({"file": "in.txt"}, {"position": 2})])
    assert committer.flush(timeout_s=10)
    assert held(embedded_daemon, connector) == [({"file": "in.txt"}, {"position": 2})]


@pytest.mark.parametrize("given", ["current", "stale"])
def test_debezium_commits_to_a_claimed_connector_only_under_its_current_claim_epoch(
    embedded_daemon: DaemonProcess, given: str
) -> None:
    """Option ``claimEpoch`` reaches the commit: with the claim's current epoch the change is
    written and acknowledged; with a fenced one nothing is written, the change stays unacknowledged
    (the engine keeps it), and the reported error names the epoch given and the option to change."""
    connector = f"dbz-{uuid.uuid4().hex[:10]}"
    with embedded_daemon.client() as client:
        client.alter(connector, {"offsets": [{"partition": PARTITION, "offset": streaming(100)}]}, create=True)
        first, current = (int(client.claim(connector, owner)["epoch"]) for owner in ("cdc-run-1", "cdc-run-2"))
    acknowledged: list[int] = []
    epoch = current if given == "current" else first
    committer = DebeziumCommitter(
        embedded_daemon.url, connector, lambda seq, _gen: acknowledged.append(seq), None, epoch
    )
    committer.submit(DebeziumOffset.of(connector, 4, [(PARTITION, streaming(5000))]), generation=1)
    assert committer.flush(timeout_s=30)
    if given == "current":
        assert acknowledged == [4] and committer.errors == []
        assert held(embedded_daemon, connector) == [(PARTITION, streaming(5000))]
        return
    assert acknowledged == []
    assert held(embedded_daemon, connector) == [(PARTITION, streaming(100))]
    (error,) = committer.errors
    assert f"the writer with epoch {first} has been fenced" in error
    assert f"gave claim epoch {first} (connect-debezium's option claimEpoch)" in error
