"""The test kit against a Docker Compose stack: the shipped compose file, and its daemon's URL.

The compose file (``compose.yml`` beside this module) runs Kafka, one Connect worker and the
daemon on the worker's offsets, config and status topics. A repository copies it and lets
pytest-docker start it; this module turns pytest-docker's ``docker_services`` into the URL the
test kit uses, once the daemon is ready::

    @pytest.fixture(scope="session")
    def connect_offsets_url(docker_services, docker_ip):
        return compose_daemon_url(docker_services, docker_ip)

pytest-docker is the user's dependency, not ours: only the two methods below are used.

``python -m emulator.testing.compose > tests/docker-compose.yml`` prints the file.
"""

from __future__ import annotations

import sys
from importlib import resources
from typing import Protocol

from emulator.testing.process import wait_until_ready

DAEMON_SERVICE = "connect-offsets"
DAEMON_PORT = 8081


class DockerServices(Protocol):
    """What ``compose_daemon_url`` needs of pytest-docker's ``docker_services``."""

    def port_for(self, service: str, container_port: int) -> int: ...


def compose_file_text() -> str:
    """The compose file shipped with the package."""
    return resources.files("emulator.testing").joinpath("compose.yml").read_text(encoding="utf-8")


def compose_daemon_url(
    docker_services: DockerServices,
    docker_ip: str,
    *,
    service: str = DAEMON_SERVICE,
    port: int = DAEMON_PORT,
    timeout_s: float = 300.0,
) -> str:
    """The URL of the stack's daemon, once ``/readyz`` answers 200 (every topic read to its end).

    The timeout covers a first ``up``: image pulls, the daemon's image build, Connect's start.
    """
    url = f"http://{docker_ip}:{docker_services.port_for(service, port)}"
    return wait_until_ready(url, timeout_s)


def main() -> int:
    sys.stdout.write(compose_file_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
