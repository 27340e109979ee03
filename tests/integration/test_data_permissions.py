"""What other users of the machine can read: the daemon's data holds every connector's offsets and
history, which the API gives out only by scope, and the credentials file holds plain passwords.

``serve`` sets the umask to 077 before it creates anything, so its directories are 0700 and its
files 0600 whatever the operator's umask (022 here, the common one, which made them world-readable);
what it finds already open to others it warns about, with the ``chmod`` that closes it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from emulator.formats.atomic import atomic_write
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.server.permissions import exposed
from emulator.server.settings import Settings
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.waits import until


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The operator's usual umask, inherited by the daemons started meanwhile."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root.parent)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


@pytest.mark.slow
@pytest.mark.usefixtures("umask_022")
def test_the_daemon_keeps_its_data_and_url_file_to_its_user(daemon_factory: DaemonFactory, tmp_path: Path) -> None:
    data, url_file = tmp_path / "data", tmp_path / "url"
    daemon = daemon_factory("--data-dir", str(data), "--url-file", str(url_file))
    written = httpx.patch(
        f"{daemon.url}/connectors/perm/offsets?create=true",
        json={"offsets": [{"partition": {"f": "x"}, "offset": {"pos": 1}}]},
    )
    assert written.status_code == 200, written.text
    until(lambda: any(p.name == "state.json" for p in data.rglob("*")), "the history archive's state written")
    found = modes(data)
    names = " ".join(found)
    assert "connect-offsets.sqlite3-wal" in names and "state.json" in names, names
    opened = {path: f"{mode:04o}" for path, mode in found.items() if mode & 0o077}
    assert opened == {}, "directories 0700, files 0600"
    until(url_file.exists, "the URL file written once ready")
    assert stat.S_IMODE(url_file.stat().st_mode) == 0o600


@pytest.mark.slow
def test_an_open_data_directory_and_credentials_file_are_warned_about_at_start(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    credentials = tmp_path / "users.properties"
    credentials.write_text("alice=pw\n")
    os.chmod(credentials, 0o644)
    daemon = daemon_factory("--data-dir", str(data), "--credentials-file", str(credentials))
    log = daemon.log_tail()
    assert re.search(rf"WARNING .*data directory {re.escape(str(data))} is open to other users \(mode 0755\)", log)
    assert f"chmod 700 {data}" in log
    assert re.search(rf"WARNING .*credentials file {re.escape(str(credentials))} .*mode 0644.*plain passwords", log)
    assert f"chmod 600 {credentials}" in log


def test_exposed_names_only_what_group_or_others_can_reach(tmp_path: Path) -> None:
    data, tokens = tmp_path / "data", tmp_path / "tokens"
    data.mkdir()
    tokens.write_text("")
    os.chmod(data, 0o700)
    os.chmod(tokens, 0o600)
    settings = Settings(data_dir=data, tokens_file=tokens)
    assert exposed(settings) == []
    os.chmod(data, 0o750)
    os.chmod(tokens, 0o640)
    warned = exposed(settings)
    assert len(warned) == 2 and "mode 0750" in warned[0] and "tokens file" in warned[1], warned
    assert exposed(Settings(data_dir=tmp_path / "not-yet")) == [], "created by the daemon, 0700"


def test_an_open_history_directory_outside_the_data_directory_is_named_as_the_history_directory(
    tmp_path: Path,
) -> None:
    """``--history-dir`` elsewhere has its own mode to check; calling it the data directory sent
    the operator to ``chmod`` the wrong one (security QA LOW)."""
    data, history = tmp_path / "data", tmp_path / "perm" / "hist"
    data.mkdir()
    history.mkdir(parents=True)
    os.chmod(data, 0o700)
    os.chmod(history, 0o777)
    warned = exposed(Settings(data_dir=data, history_dir=history))
    assert len(warned) == 1, warned
    assert warned[0].startswith(f"history directory {history} is open to other users (mode 0777)"), warned
    assert warned[0].endswith(f"chmod 700 {history}")


def test_atomic_write_gives_a_new_file_the_umask_mode_without_setting_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``os.umask`` is process-wide: setting it to 0 to read it, as before, let a file another
    thread of the daemon created meanwhile be world-readable (and writable)."""
    previous = os.umask(0o077)
    try:

        def refused(mask: int) -> int:
            raise AssertionError("atomic_write changed the process umask")

        monkeypatch.setattr(os, "umask", refused)
        atomic_write(tmp_path / "url", b"http://127.0.0.1:1\n")
    finally:
        monkeypatch.undo()
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "url").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["url"], "no temp file left behind"


@pytest.mark.usefixtures("umask_022")
def test_an_import_into_a_new_embedded_log_keeps_it_to_its_user(tmp_path: Path) -> None:
    """``connect-offsets import --to embedded:DIR``, no daemon: the log it creates holds the same
    offsets a daemon's does, and was 0755/0644 under umask 022 where ``serve`` makes 0700/0600. Every
    command that creates an embedded log now makes it as ``serve`` does, missing parents included."""
    body = tmp_path / "offsets.json"
    body.write_text('{"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]}')
    log_dir = tmp_path / "new" / "log"
    done = run_cli("import", "--from", f"kip875:{body}", "--to", f"embedded:{log_dir}", "--name", "c", "--quiet")
    assert done.returncode == 0, done.stderr
    found = modes(tmp_path / "new")
    assert "new/log/connect-offsets.sqlite3" in found, found
    assert {path: f"{mode:04o}" for path, mode in found.items() if mode & 0o077} == {}, "directories 0700, files 0600"


@pytest.mark.usefixtures("umask_022")
def test_an_embedded_log_created_by_the_library_is_private_with_its_wal_and_shm(tmp_path: Path) -> None:
    """The log opened in-process under umask 022, as a script or a test would: the file SQLite writes
    and its ``-wal`` and ``-shm`` (which SQLite gives the log file's mode) are 0600, its directory 0700."""
    log = EmbeddedOffsetLog(tmp_path / "data", partitions=1)
    log.open()
    try:
        log.append([(b"k", b"v")])
        found = modes(tmp_path / "data")
    finally:
        log.close()
    assert {name.rsplit("/", 1)[-1] for name in found} >= {"connect-offsets.sqlite3-wal", "connect-offsets.sqlite3-shm"}
    assert {path: f"{mode:04o}" for path, mode in found.items() if mode & 0o077} == {}, "directories 0700, files 0600"
