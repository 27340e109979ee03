"""Session-wide fixtures live in their own modules, one per real component."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from emulator.client.credentials import use_default
from emulator.client.retry_window import use_default_retry_for

pytest_plugins = [
    "tests.fixtures.broker",  # Tansu, a real Kafka-protocol broker, once per session
    "tests.oracle.fixtures",  # Apache Kafka's own classes in a JVM subprocess, once per session
    "tests.fixtures.daemon",  # the daemon under test, started as a real process
    "tests.fixtures.connect_cluster",  # a Connect cluster's topics (written by Java) and a daemon following them
    "pytester",  # pytest's own harness: tests/testkit runs sample user test files in a subprocess
]


_BYTECODE = "EMULATOR_TESTS_BYTECODE_DIR"
"""The session's bytecode cache, made by the controller (workers and every process they start inherit it)."""


def pytest_configure(config: pytest.Config) -> None:
    """Every Python process the suite starts (daemons, CLI runs, inner pytest runs: well over a thousand)
    compiles the package again where ``PYTHONDONTWRITEBYTECODE`` is set, as it is on this project's
    machines: 0.3 s of each daemon's start. The session lets them share one bytecode cache in a
    temporary directory (``PYTHONPYCACHEPREFIX``), never written into the source tree."""
    if os.environ.get(_BYTECODE) or os.environ.get("PYTHONPYCACHEPREFIX"):
        return  # a worker (inherited), or the caller chose a cache of its own
    cache = tempfile.mkdtemp(prefix="connect-offsets-test-bytecode-")
    os.environ[_BYTECODE] = os.environ["PYTHONPYCACHEPREFIX"] = cache
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))


@pytest.fixture(autouse=True)
def _client_defaults_of_the_environment() -> Iterator[None]:
    """Resolving the command line's settings in-process (``ClientSettings``) makes its credentials
    and retry window the process's defaults for every client built later; each test starts and ends
    with the environment's, so tests run in any order."""
    yield
    use_default(None)
    use_default_retry_for(None)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """With pytest-xdist (``-n``, ``--dist loadgroup``): a module's tests run in one worker, so its
    module fixtures (a private broker, a Connect cluster) start once; every test that needs Spark
    runs in one worker, so one Spark session serves them all.

    A wrapper, because xdist reads the marks in its own hook of this name: they are set before it
    runs (a plain hook here ran after it, and grouped nothing)."""
    for item in items:
        group = "spark" if item.get_closest_marker("spark") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
    yield


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """xdist groups by a suffix ``@group`` it appends to each test's id in the worker. When that does
    not happen, nothing fails: the tests are spread one by one, each module's broker and the Spark
    session start in both workers, and the suite runs minutes longer. That went unnoticed (this hook
    once ran after xdist's, and pytest 9.2 drops xdist 3.8's suffix), so the run now stops instead."""
    if node.config.getvalue("dist") == "loadgroup" and ids and not any("@" in test for test in ids):
        pytest.exit(
            f"--dist loadgroup grouped none of the {len(ids)} tests {node.gateway.id} collected: pytest-xdist 3.8 "
            "cannot group under pytest 9.2 or later, which pip install -e '.[test]' excludes",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
