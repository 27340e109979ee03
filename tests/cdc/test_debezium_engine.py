"""The engine process on its own (no Spark): what the reader relies on, against a real PostgreSQL.

- The database forgets nothing the daemon has not recorded: the engine commits (confirms the LSN to
  the replication slot) only what was acknowledged, also when it closes; restarted from the offsets
  of an acknowledged change it emits exactly the changes after it, numbered on from there.
- An engine whose owner dies closes itself and frees the slot (Spark kills its source's worker
  instead of stopping the reader).
- A connector that cannot start fails with the connector's own reason, quickly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from emulator.formats.standalone import load_file
from emulator.spark.debezium_offsets import DebeziumOffset
from emulator.spark.debezium_process import EngineError, EngineProcess
from emulator.spark.debezium_stream import ChangeStream, EngineSettings
from tests.cdc.helpers import Capture, change_of
from tests.cdc.postgres import PostgresServer

pytestmark = [pytest.mark.jvm, pytest.mark.slow]


def settings(capture: Capture, pg: PostgresServer, engine_dir: Path) -> EngineSettings:
    props = {"name": capture.connector, **capture.props(pg), "snapshot.mode": "no_data"}
    return EngineSettings(capture.connector, props, engine_dir=str(engine_dir), poll_wait_s=0.5)


def wait_slot(pg: PostgresServer, slot: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pg.slot_active(slot):
        assert time.monotonic() < deadline, f"slot {slot} never became active"
        time.sleep(0.2)


def test_only_acknowledged_changes_are_committed_and_a_restart_continues_right_after_them(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    pg, capture = postgres, Capture.unique()
    capture.create(pg)
    stream = ChangeStream(settings(capture, pg, tmp_path / "engine"))
    stream.start(DebeziumOffset.of(capture.connector, 0, []))
    try:
        wait_slot(pg, capture.slot)
        capture.insert(pg, [1, 2])
        capture.insert(pg, [3, 4, 5], transaction=True)
        stream.wait_for(5, 60)
        assert [change_of(n.record.value) for n in stream.between(stream.at(0), stream.at(5))] == [
            ("c", i) for i in range(1, 6)
        ]
        acked = stream.at(4)  # inside the three-row transaction
        assert stream.ack(4, stream.generation)
        committed = load_file(tmp_path / "engine" / "offsets.dat").records
        assert [json.loads(r.value or b"null") for r in committed] == [acked.entries[0][1]], "the file holds change 4"
        confirmed = pg.confirmed_flush_lsn(capture.slot)
        assert confirmed is not None and confirmed <= acked.entries[0][1]["lsn"], "the slot is not ahead of change 4"
    finally:
        stream.stop()  # a graceful close commits what was acked, nothing more
    assert [json.loads(r.value or b"null") for r in load_file(tmp_path / "engine" / "offsets.dat").records] == [
        acked.entries[0][1]
    ]

    capture.insert(pg, [6])
    again = ChangeStream(settings(capture, pg, tmp_path / "engine-2"))
    again.start(acked)
    try:
        again.wait_for(6, 60)
        replay = again.between(acked, again.at(6))
        assert [(n.seq, change_of(n.record.value)) for n in replay] == [(5, ("c", 5)), (6, ("c", 6))]
    finally:
        again.stop()


def test_an_engine_whose_owner_dies_closes_itself_and_frees_the_slot(postgres: PostgresServer, tmp_path: Path) -> None:
    pg, capture = postgres, Capture.unique()
    capture.create(pg)
    owner = textwrap.dedent(
        """
        import json, sys
        from emulator.spark.debezium_process import EngineProcess
        p = EngineProcess()
        p.start(json.loads(sys.argv[1]), {}, sys.argv[2])
        print(p.pid, flush=True)
        while True:  # polling, as the reader does: the owner dies in the middle of a request
            p.poll(100, 1.0)
        """
    )
    props = {"name": capture.connector, **capture.props(pg), "snapshot.mode": "no_data"}
    proc = subprocess.Popen(
        [sys.executable, "-c", owner, json.dumps(props), str(tmp_path / "offsets.dat")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert proc.stdout is not None
        engine_pid = int(proc.stdout.readline())
        wait_slot(pg, capture.slot)
    finally:
        proc.send_signal(signal.SIGKILL)  # as Spark kills its source's worker
        proc.wait(10)
    pg.wait_slot_released(capture.slot, 60)
    deadline = time.monotonic() + 30
    while _alive(engine_pid):
        assert time.monotonic() < deadline, "the engine process outlived its owner"
        time.sleep(0.2)


def test_a_connector_that_cannot_start_fails_with_its_own_reason(tmp_path: Path) -> None:
    capture = Capture.unique()
    closed = {"database.hostname": "127.0.0.1", "database.port": "1", "database.user": "u", "database.dbname": "d"}
    props = {
        "name": capture.connector,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "topic.prefix": capture.server,
        **closed,
    }
    process = EngineProcess(start_timeout_s=60)
    try:
        with pytest.raises(EngineError, match=r"did not start: .*(refused|connect)"):
            process.start(props, {}, str(tmp_path / "offsets.dat"))
    finally:
        process.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "zombie" in status.read_text())
