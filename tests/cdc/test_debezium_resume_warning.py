"""``connect-debezium`` resumed from a checkpoint that differs from the daemon says so, once, in the driver's log.

Spark resumes every source from its checkpoint; when Connect (or anything else) has moved the
connector's offsets on in the daemon since, the changes in between are emitted again. That was
silent (QA: the daemon held kiwi's lsn 22179496, the restarted query emitted change 4 again, then 5).
So was the other way round: an operator's rewind or reset since is overwritten by the query's next
commit (QA 26 D3).

No Spark, database or JVM: the reader is built as Spark builds it, against the session's real daemon,
and asked for offsets as the driver asks (the checkpoint's committed offset as ``start``). Its
``javaHome`` names a directory without a JVM, so the engine, which would start from that offset
right after the comparison, fails at once instead. Offsets are the shapes Debezium's Postgres
connector wrote in this project's runs (key order included).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from emulator.spark.debezium_offsets import DebeziumOffset
from emulator.spark.debezium_process import EngineError
from emulator.spark.debezium_source import ConnectDebeziumStreamReader
from tests.fixtures.daemon import DaemonProcess
from tests.spark.helpers import unique

LOGGER = "emulator.spark.debezium_source"
# What the daemon held for kiwi in QA's run (Connect had processed changes 4 and 5).
CONNECT = {"lsn_proc": 22179496, "messageType": "INSERT", "lsn_commit": 22179368, "lsn": 22179496, "txId": 748}
# The checkpoint's last batch: change 3, before Connect ran.
CHECKPOINT = {"lsn_proc": 22178824, "messageType": "INSERT", "lsn_commit": 22178696, "lsn": 22178824, "txId": 747}
# An initial snapshot in progress (before the stream above).
SNAPSHOT = {
    "last_snapshot_record": False,
    "lsn": 22165544,
    "txId": 745,
    "snapshot": "INITIAL",
    "snapshot_completed": False,
}


def reader(url: str, connector: str, tmp_path: Path) -> ConnectDebeziumStreamReader:
    return ConnectDebeziumStreamReader(
        {
            "url": url,
            "connector": connector,
            "debezium.connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "javaHome": str(tmp_path / "no-jvm-here"),
            "engineDir": str(tmp_path / "engine"),
        }
    )


def checkpoint(connector: str, seq: int, *offsets: dict[str, Any]) -> dict[str, Any]:
    return DebeziumOffset.of(connector, seq, [({"server": connector}, o) for o in offsets]).spark()


def daemon_holds(daemon: DaemonProcess, connector: str, offset: dict[str, Any]) -> None:
    body = {"offsets": [{"partition": {"server": connector}, "offset": offset}]}
    daemon.client().alter(connector, body, create=True)


def resume(source: ConnectDebeziumStreamReader, start: dict[str, Any], end: dict[str, Any] | None = None) -> None:
    """The driver's first call after a restart: ``latestOffset`` from the last completed batch, or
    ``partitions`` of the unfinished batch it replays; the engine then cannot start."""
    with pytest.raises(EngineError, match=r"no libjvm\.so"):
        if end is None:
            source.latestOffset(start, ReadAllAvailable())
        else:
            source.partitions(start, end)


@pytest.mark.parametrize("first_call", ["latestOffset", "partitions"])
def test_a_checkpoint_behind_the_daemon_warns_once_that_connects_changes_are_emitted_again(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture, first_call: str
) -> None:
    connector = unique("kiwi")
    daemon_holds(embedded_daemon, connector, CONNECT)
    start = checkpoint(connector, 3, CHECKPOINT)
    source = reader(embedded_daemon.url, connector, tmp_path)

    with caplog.at_level(logging.INFO, logger=LOGGER):
        resume(source, start, checkpoint(connector, 4, CONNECT) if first_call == "partitions" else None)
        resume(source, start)  # the next trigger, and the next: not said again
        resume(source, start)

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    (warning,) = warnings
    assert warning.startswith(f"connect-debezium {connector}: the daemon's offsets for the connector moved ahead")
    assert (
        f'partition {{"server":"{connector}"}}: checkpoint {{"lsn_proc":22178824,"messageType":"INSERT",'
        '"lsn_commit":22178696,"lsn":22178824,"txId":747}, daemon {"lsn_proc":22179496,"messageType":"INSERT",'
        '"lsn_commit":22179368,"lsn":22179496,"txId":748}' in warning
    )
    # Not only Connect moves them: a REST PATCH does too, so the warning says what is known (QA 26 D6).
    assert "Connect processed the changes between them, or someone altered the offsets; this query emits" in warning
    assert "start it with a new checkpoint location: it then starts after them" in warning


@pytest.mark.parametrize(
    ("held", "own"),
    [
        (CONNECT, SNAPSHOT),  # Connect finished the snapshot and streamed on
        ({**SNAPSHOT, "last_snapshot_record": True, "snapshot_completed": True}, SNAPSHOT),  # same LSN, finished
        (CONNECT, None),  # no offset in the checkpoint: the engine would start from scratch
    ],
    ids=["snapshot-then-stream", "snapshot-finished", "checkpoint-without-offset"],
)
def test_other_positions_behind_the_daemon_warn_too(
    embedded_daemon: DaemonProcess,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    held: dict[str, Any],
    own: dict[str, Any] | None,
) -> None:
    connector = unique("behind")
    daemon_holds(embedded_daemon, connector, held)
    start = checkpoint(connector, 2, own) if own is not None else checkpoint(connector, 0)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        resume(reader(embedded_daemon.url, connector, tmp_path), start)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "emits them again" in warning
    if own is None:
        assert f'partition {{"server":"{connector}"}}: checkpoint none, daemon {{"lsn_proc":22179496' in warning


def test_a_checkpoint_level_with_the_daemon_says_nothing(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    connector = unique("level")
    daemon_holds(embedded_daemon, connector, CONNECT)  # the orderly handoff: the listener published the last batch
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        resume(reader(embedded_daemon.url, connector, tmp_path), checkpoint(connector, 5, CONNECT))
    assert caplog.records == []


@pytest.mark.parametrize(
    ("held", "own"),
    [
        (CHECKPOINT, CONNECT),  # rewound (or Spark ran on and the daemon was not told)
        # a transaction that began earlier and committed later: txId down, LSN up, so the daemon is behind
        (CHECKPOINT, {**CHECKPOINT, "lsn_proc": 22179000, "lsn": 22179000, "txId": 745}),
        (None, CONNECT),  # reset: the daemon has nothing for the connector
    ],
    ids=["rewound", "later-commit-smaller-txId", "reset"],
)
def test_a_daemon_rewound_or_reset_behind_the_checkpoint_warns_once_that_the_checkpoint_wins(
    embedded_daemon: DaemonProcess,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    held: dict[str, Any] | None,
    own: dict[str, Any],
) -> None:
    """QA 26 D3: an operator's rewind or reset after a Spark run was overwritten by the query restarted
    from its checkpoint, without a word (it was taken for a daemon not told yet)."""
    connector = unique("rewound")
    if held is not None:
        daemon_holds(embedded_daemon, connector, held)
    source = reader(embedded_daemon.url, connector, tmp_path)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):  # the next triggers: not said again
            resume(source, checkpoint(connector, 5, own))
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"connect-debezium {connector}: the daemon's offsets for the connector are behind")
    daemon = "none" if held is None else '{"lsn_proc":22178824,'
    assert f'partition {{"server":"{connector}"}}: checkpoint {{"lsn_proc":' in warning
    assert f", daemon {daemon}" in warning
    assert "rewound or reset since" in warning and "The checkpoint wins" in warning
    assert "the query's next commit overwrites the operator's change" in warning
    assert "To honour the rewind or reset, stop the query and start it with a new checkpoint location" in warning


def test_a_new_checkpoint_starting_at_the_daemon_compares_nothing(
    embedded_daemon: DaemonProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``initialOffset`` (no checkpoint yet) starts at the daemon's offsets: nothing to compare, also
    when Connect writes meanwhile (two writers at once is the user's to avoid, not this warning's)."""
    connector = unique("fresh")
    daemon_holds(embedded_daemon, connector, CHECKPOINT)
    source = reader(embedded_daemon.url, connector, tmp_path)
    with pytest.raises(EngineError, match=r"no libjvm\.so"):
        source.initialOffset()
    daemon_holds(embedded_daemon, connector, CONNECT)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        resume(source, checkpoint(connector, 0, CHECKPOINT))
    assert caplog.records == []
