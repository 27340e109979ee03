"""Fixtures of the CDC tests: a PostgreSQL server for the session, and the session's Spark.

PostgreSQL is not a Python dependency: where its server binaries are missing (``.ci/run`` installs
Debian's package) every test that needs it skips and says why, instead of failing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cdc.postgres import INSTALL_HINT, PostgresServer, server_bin
from tests.spark.conftest import spark  # noqa: F401 - the session's Spark, shared with tests/spark


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server with ``wal_level=logical``, started once, on first use."""
    bin_dir = server_bin()
    if bin_dir is None:
        pytest.skip(f"no PostgreSQL server binaries (initdb, pg_ctl, psql): {INSTALL_HINT}")
    server = PostgresServer(bin_dir)
    try:
        server.start()
    except RuntimeError as exc:
        server.stop()
        pytest.fail(f"PostgreSQL did not start: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
