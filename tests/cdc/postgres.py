"""A throwaway PostgreSQL server for the CDC tests: ``initdb`` + ``pg_ctl`` with ``wal_level=logical``.

Debian's ``postgresql`` package (``/usr/lib/postgresql/<version>/bin``; ``.ci/run`` installs it where
it is missing). The server runs as the ``postgres`` user when the tests run as root (``initdb``
refuses root), on a free loopback port, its socket and data in a temporary directory, and is stopped
(``pg_ctl stop -m immediate``) at the end of the session. SQL goes through ``psql``, so the tests
need no Python driver. Where no server binaries are found the tests skip and say why.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

INSTALL_HINT = "install Debian's postgresql package (apt-get install -y postgresql; .ci/run does it)"


def server_bin() -> Path | None:
    """The directory holding initdb, pg_ctl and psql, or None where PostgreSQL is not installed."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if all(os.access(os.path.join(candidate, tool), os.X_OK) for tool in ("initdb", "pg_ctl", "psql")):
            return Path(candidate)
    found = [shutil.which(tool) for tool in ("initdb", "pg_ctl", "psql")]
    if all(found):
        return Path(os.path.realpath(str(found[0]))).parent
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One server: ``sql()`` runs statements, ``slot_active()`` tells whether a connector holds a slot."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="cdc-postgres-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.user = "postgres"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)

    def _run(self, *cmd: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        argv = list(cmd)
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)

    def start(self) -> None:
        done = self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", self.user)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr[-2000:]}")
        options = (
            f"-c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20 -p {self.port} "
            f"-k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
        )
        done = self._run(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start"
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr[-2000:]}\n{self.log_tail()}")

    def stop(self) -> None:
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop", timeout_s=30)
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def connector_config(self) -> dict[str, str]:
        """The Debezium Postgres connector's connection properties for this server."""
        return {
            "database.hostname": "127.0.0.1",
            "database.port": str(self.port),
            "database.user": self.user,
            "database.password": "unused",  # trust authentication
            "database.dbname": "postgres",
        }

    def sql(self, *statements: str) -> str:
        """Run statements in one psql session (autocommit each, unless they say BEGIN/COMMIT)."""
        script = "\n".join(s.rstrip().rstrip(";") + ";" for s in statements)
        psql = [str(self.bin_dir / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", "postgres"]
        done = subprocess.run(
            [*psql, "-v", "ON_ERROR_STOP=1", "-q", "-A", "-t", "-X"],
            input=script,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql failed ({done.returncode}): {done.stderr.strip()}\n{script[:2000]}")
        return done.stdout.strip()

    def slot_active(self, slot: str) -> bool:
        return self.sql(f"SELECT active FROM pg_replication_slots WHERE slot_name = '{slot}'") == "t"

    def confirmed_flush_lsn(self, slot: str) -> int | None:
        text = self.sql(f"SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{slot}'")
        if not text:
            return None
        high, low = text.split("/")
        return (int(high, 16) << 32) + int(low, 16)

    def wait_slot_released(self, slot: str, timeout_s: float = 60.0) -> None:
        """Wait until no connector streams from ``slot`` (a slot serves one connector at a time)."""
        deadline = time.monotonic() + timeout_s
        while self.slot_active(slot):
            if time.monotonic() > deadline:
                raise AssertionError(f"replication slot {slot} still in use after {timeout_s:.0f} s")
            time.sleep(0.2)
