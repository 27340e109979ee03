"""Session-wide fixtures live in their own modules, one per real component."""

from collections.abc import Iterator

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


@pytest.fixture(autouse=True)
def _client_defaults_of_the_environment() -> Iterator[None]:
    """Resolving the command line's settings in-process (``ClientSettings``) makes its credentials
    and retry window the process's defaults for every client built later; each test starts and ends
    with the environment's, so tests run in any order."""
    yield
    use_default(None)
    use_default_retry_for(None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With pytest-xdist (``-n``, ``--dist loadgroup``): a module's tests run in one worker, so its
    module fixtures (a private broker, a Connect cluster) start once; every test that needs Spark
    runs in one worker, so one Spark session serves them all."""
    for item in items:
        group = "spark" if item.get_closest_marker("spark") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
