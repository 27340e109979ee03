"""The compose stack end to end: a real Connect worker and the daemon share one offset history.

Needs a Docker engine; without one every test here skips (``docker_engine`` in conftest.py) before
pytest-docker starts anything. The first run pulls apache/kafka and python images and builds the
daemon's image, hence the long timeout.

Scenario: a FileStream source connector reads docker/connect-input/lines.txt and Connect commits
``{"position": <file length>}``; the daemon shows that commit; with the connector STOPPED the daemon
rewinds it to a line boundary; Connect's own offsets API then shows the daemon's value, and on
resume the connector re-emits exactly the lines after the boundary. That last step is the proof
that Connect *used* the daemon's record (same key bytes, same partition), not just displayed it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pytest_docker.plugin import Services

from emulator.model.connectors import not_stopped_message
from tests.docker.conftest import REPO_ROOT, HostPorts

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1500), pytest.mark.slow]

INPUT_ON_HOST = REPO_ROOT / "docker" / "connect-input" / "lines.txt"
INPUT_IN_CONNECT = "/data/connect-input/lines.txt"  # docker-compose.yml mounts docker/connect-input here
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


@dataclass(frozen=True)
class Stack:
    connect: httpx.Client
    daemon: httpx.Client
    bootstrap: str


def wait_for(what: str, probe: Callable[[], tuple[bool, Any]], timeout_s: float, pause_s: float = 1.0) -> Any:
    """Poll ``probe`` (-> (done, observed)) until done; on timeout fail with the last observation."""
    deadline = time.monotonic() + timeout_s
    observed: Any = None
    while True:
        try:
            done, observed = probe()
        except httpx.TransportError as exc:
            done, observed = False, repr(exc)
        if done:
            return observed
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}; last seen: {observed!r}")
        time.sleep(pause_s)


@pytest.fixture(scope="module")
def stack(docker_ip: str, docker_services: Services, stack_host_ports: HostPorts) -> Iterator[Stack]:
    if docker_ip not in {"127.0.0.1", "localhost", "::1"}:
        pytest.skip(f"the stack publishes its ports on the engine's loopback only; {docker_ip} is not this machine")
    connect_port = docker_services.port_for("connect", 8083)
    daemon_port = docker_services.port_for("connect-offsets", 8081)
    # Kafka advertises 127.0.0.1:KAFKA_HOST_PORT; a different published port would break host clients.
    assert docker_services.port_for("kafka", 29092) == stack_host_ports.kafka
    with (
        httpx.Client(base_url=f"http://{docker_ip}:{connect_port}", timeout=30) as connect,
        httpx.Client(base_url=f"http://{docker_ip}:{daemon_port}", timeout=30) as daemon,
    ):
        # `up --wait` already saw every healthcheck pass; these are the properties the test relies on.
        def plugin_listed() -> tuple[bool, Any]:
            response = connect.get("/connector-plugins")
            classes = [p.get("class") for p in response.json()] if response.status_code == 200 else response.text
            return FILE_SOURCE in classes, classes

        wait_for("Connect to offer FileStreamSourceConnector", plugin_listed, 120)
        wait_for("the daemon to be ready", lambda: (daemon.get("/readyz").status_code == 200, "not ready"), 120)
        yield Stack(connect=connect, daemon=daemon, bootstrap=f"{docker_ip}:{stack_host_ports.kafka}")


def _offsets(client: httpx.Client, connector: str) -> tuple[int, Any]:
    response = client.get(f"/connectors/{connector}/offsets")
    return response.status_code, (response.json() if response.status_code == 200 else response.text)


def _offset_is(
    client: httpx.Client, connector: str, partition: dict[str, Any], position: int
) -> Callable[[], tuple[bool, Any]]:
    expected = {"offsets": [{"partition": partition, "offset": {"position": position}}]}

    def probe() -> tuple[bool, Any]:
        status, body = _offsets(client, connector)
        return status == 200 and body == expected, (status, body)

    return probe


def _consume_values(bootstrap: str, topic: str, expected_count: int, timeout_s: float) -> list[Any]:
    """Every record value of ``topic`` partition 0 from the start, JSON-decoded (schemaless JsonConverter)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compose-stack-test-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    values: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        settle_until = None
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                raw = message.value()
                values.append(None if raw is None else json.loads(raw))
            if len(values) >= expected_count:
                # Keep reading a little: records beyond the expected count must be seen, not missed.
                settle_until = settle_until or time.monotonic() + 5
                if time.monotonic() >= settle_until:
                    break
    finally:
        consumer.close()
    return values


def test_connect_and_the_daemon_share_one_offset_history(stack: Stack) -> None:
    data = INPUT_ON_HOST.read_bytes()
    lines = data.decode("ascii").splitlines()
    end = len(data)  # ASCII, newline-terminated: FileStream's position after the last line
    keep = 8
    boundary = sum(len(line) + 1 for line in lines[:keep])  # just after line `keep`
    suffix = uuid.uuid4().hex[:8]
    name, topic = f"file-src-{suffix}", f"file-lines-{suffix}"
    partition = {"filename": INPUT_IN_CONNECT}

    created = stack.connect.post(
        "/connectors",
        json={
            "name": name,
            "config": {
                "connector.class": FILE_SOURCE,
                "tasks.max": "1",
                "file": INPUT_IN_CONNECT,
                "topic": topic,
                "topic.creation.default.partitions": "1",
                "topic.creation.default.replication.factor": "1",
            },
        },
    )
    assert created.status_code == 201, created.text
    try:
        # 1. Connect's own offset commit (every second, per the worker config) reaches the daemon.
        wait_for(
            "the daemon to show Connect's commit at the end of the file",
            _offset_is(stack.daemon, name, partition, end),
            120,
        )

        # 2. While the worker runs it, the daemon (following the worker's config topic) refuses a
        #    change with Connect's own answer; then stop it, as Connect requires.
        refused = stack.daemon.patch(
            f"/connectors/{name}/offsets",
            json={"offsets": [{"partition": partition, "offset": {"position": boundary}}]},
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["message"] == not_stopped_message(name)
        stopped = stack.connect.put(f"/connectors/{name}/stop")
        assert stopped.status_code in (202, 204), stopped.text

        def is_stopped() -> tuple[bool, Any]:
            status = stack.connect.get(f"/connectors/{name}/status").json()
            return status["connector"]["state"] == "STOPPED" and not status["tasks"], status

        wait_for("Connect to report the connector STOPPED with no tasks", is_stopped, 60)

        # 3. Rewind through the daemon to a line boundary.
        altered = stack.daemon.patch(
            f"/connectors/{name}/offsets",
            json={"offsets": [{"partition": partition, "offset": {"position": boundary}}]},
        )
        assert altered.status_code == 200, altered.text

        # 4. Connect's own offsets API reads the daemon's record from the shared topic.
        wait_for(
            "Connect's GET offsets to show the daemon's rewind",
            _offset_is(stack.connect, name, partition, boundary),
            60,
        )

        # 5. On resume the task starts from the rewound position: the lines after it arrive again.
        resumed = stack.connect.put(f"/connectors/{name}/resume")
        assert resumed.status_code == 202, resumed.text
        values = _consume_values(stack.bootstrap, topic, len(lines) + len(lines) - keep, timeout_s=120)
        assert values == lines + lines[keep:]

        # 6. Both views agree again once Connect commits the end of the file.
        wait_for(
            "the daemon to show Connect's new commit at the end of the file",
            _offset_is(stack.daemon, name, partition, end),
            120,
        )
        wait_for("Connect to show the same", _offset_is(stack.connect, name, partition, end), 30)
    finally:
        stack.connect.delete(f"/connectors/{name}")
