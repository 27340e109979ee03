"""What a direct import (``--to embedded:DIR``, no daemon) says when its write does not go through whole.

The CLI writes straight into the log a chunk at a time, each durable on its own. A chunk refused after
others were written leaves those in effect, so the command must not say "nothing was written"; a
commit that never comes back must not hold the command for ever. Both are what the daemon already
answers (``write_partly_applied``, ``write_outcome_unknown``), said in the CLI's terms and exit codes.

The command runs in-process (``emulator.cli.main.main``) over a real SQLite log, so that the test can
make the chunk small and reach into the log the CLI opened: another SQLite connection takes the write
lock before the third chunk (as another process writing the log would), or the group commit is held
as a commit stuck in its fsync (the hook ``test_chunked_writes.py`` uses).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import emulator.transfer.locations.logs as logs_module
from emulator.cli.common import EXIT_ANSWER_LOST, EXIT_OK, EXIT_REFUSED
from emulator.cli.main import main
from emulator.client.retry_window import use_default_timeout
from emulator.formats import standalone
from emulator.formats.model import RawRecord
from emulator.logs.embedded.group_commit import GroupCommit
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.transfer import Progress, TransferOptions, parse_location
from emulator.transfer.options import TransferContext
from tests.fixtures.waits import until

CHUNK = 20


@pytest.fixture(autouse=True)
def _timeout_of_the_environment() -> Iterator[None]:
    """``--timeout`` given in-process becomes the process's default for clients: undone after each test."""
    yield
    use_default_timeout(None)


def _source(tmp_path: Path, connector: str, count: int, position: int) -> Path:
    path = tmp_path / f"{connector}-{position}.offsets"
    standalone.write_file(
        path,
        [RawRecord(f'["{connector}",{{"file":"f{i}"}}]'.encode(), b'{"position":%d}' % position) for i in range(count)],
    )
    return path


def _import(source: Path, data: Path, *extra: str) -> int:
    return main(["import", "--from", f"standalone:{source}", "--to", f"embedded:{data}", "--yes", "--quiet", *extra])


def _stored(data: Path, connector: str) -> dict[bytes, bytes | None]:
    """The connector's live records in the embedded log, read as a transfer reads it."""
    ctx = TransferContext(TransferOptions(timeout_s=10.0), Progress(enabled=False))
    records = parse_location(f"embedded:{data}").read(ctx).records
    return {r.key: r.value for r in records if r.key.startswith(f'["{connector}"'.encode())}


@pytest.mark.slow
def test_a_direct_import_refused_after_some_chunks_says_how_many_records_were_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The third of ten chunks waits for SQLite's write lock, which another connection holds, past
    ``--timeout``. The first two chunks are in the log: the error says so, and that running the same
    command again writes the rest (before, it printed the log's "…; nothing was written"); exit 1, as
    the daemon's ``write_partly_applied`` exits. Run again, the import writes exactly the other 160."""
    monkeypatch.setattr(logs_module, "_WRITE_CHUNK", CHUNK)
    connector = f"direct-partly-{time.monotonic_ns()}"
    data = tmp_path / "data"
    source = _source(tmp_path, connector, 10 * CHUNK, 1)
    holders: list[sqlite3.Connection] = []
    real_append = EmbeddedOffsetLog.append
    appends = [0]

    def append(self: EmbeddedOffsetLog, entries: Sequence[tuple[bytes | None, bytes | None]], timeout_s: float) -> Any:
        if appends[0] == 2:  # another writer of the same file takes SQLite's write lock
            holder = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            holder.execute("BEGIN IMMEDIATE")
            holders.append(holder)
        appends[0] += 1
        return real_append(self, entries, timeout_s)

    monkeypatch.setattr(EmbeddedOffsetLog, "append", append)
    try:
        code = _import(source, data, "--timeout", "1s")
    finally:
        for holder in holders:
            holder.execute("ROLLBACK")
            holder.close()
    err = capsys.readouterr().err
    assert code == EXIT_REFUSED, err
    assert "nothing was written" not in err, err
    assert (
        f"the first {2 * CHUNK} of this write's {10 * CHUNK} records were written before it and are in effect, "
        f"the other {8 * CHUNK} were not (running the same command again writes the rest)\n"
    ) in err, err
    assert len(_stored(data, connector)) == 2 * CHUNK

    assert _import(source, data) == EXIT_OK
    out = capsys.readouterr().out
    assert f"wrote {8 * CHUNK} change(s) ({8 * CHUNK} record(s) written)" in out, out
    assert len(_stored(data, connector)) == 10 * CHUNK


@pytest.mark.slow
def test_a_direct_import_whose_embedded_commit_hangs_exits_4_within_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The import's commit does not come back (a disk that does not answer its fsync): the command
    waited for it without end. Now it exits 4 (the write may have been applied, as after the daemon's
    ``write_outcome_unknown``) about ``--timeout`` + the overrun after it handed the records to the
    log, saying the outcome is unknown; the records land once the commit comes back. (Unfixed, the
    command returns 0 once the test lets the commit go after ``held_s``.)"""
    connector = f"direct-hung-{time.monotonic_ns()}"
    data = tmp_path / "data"
    source = _source(tmp_path, connector, 5, 1)
    release = threading.Event()
    real_write = GroupCommit._write

    def write(self: GroupCommit, conn: sqlite3.Connection, batch: Any, deadline: float) -> Any:
        if any(req.entries for req in batch):
            release.wait(30)
        return real_write(self, conn, batch, deadline)

    monkeypatch.setattr(GroupCommit, "_write", write)
    held_s = 8.0
    letting_go = threading.Timer(held_s, release.set)  # so that the command, unfixed, ends rather than hangs
    letting_go.start()
    try:
        started = time.monotonic()
        code = _import(source, data, "--timeout", "1s")
        took = time.monotonic() - started
        err = capsys.readouterr().err
        assert code == EXIT_ANSWER_LOST, f"exit {code} after {took:.1f} s: {err}"
        assert not release.is_set(), "answered only once the commit came back"
        assert took < 1.0 + logs_module._OVERRUN_S + 2.0, f"answered after {took:.1f} s"
        assert "did not answer the write of 5 records within 1 s (--timeout)" in err, err
        assert "whether the records were written is unknown" in err, err
        assert "the write may still land" in err, err
        assert "nothing was written" not in err, err
    finally:
        letting_go.cancel()
        release.set()
    until(lambda: len(_stored(data, connector)) == 5, "the held commit landed once it came back")
