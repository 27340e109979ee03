"""Connect's KIP-875 offsets API, as the daemon serves it on both log backends.

Each test uses its own connector name, so the session's daemons are shared safely.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from emulator.codec.murmur2 import partition_for
from tests.fixtures.daemon import DaemonProcess

NOT_STOPPED_HINT = "STOPPED"
NO_OFFSETS = "Partitions / offsets need to be provided for an alter offsets request"
ALTERED = (
    "The Connect framework-managed offsets for this connector have been altered successfully. However, if this "
    "connector manages offsets externally, they will need to be manually altered in the system that the connector uses."
)
RESET = (
    "The Connect framework-managed offsets for this connector have been reset successfully. However, if this "
    "connector manages offsets externally, they will need to be manually reset in the system that the connector uses."
)


@pytest.fixture(params=["embedded", "kafka"])
def daemon(request: pytest.FixtureRequest) -> DaemonProcess:
    """Each test runs on both log backends: the session's embedded daemon and its Kafka daemon."""
    if request.param == "kafka":
        request.applymarker(pytest.mark.kafka)
    daemon = request.getfixturevalue(f"{request.param}_daemon")
    assert isinstance(daemon, DaemonProcess)
    return daemon


@pytest.fixture
def name() -> str:
    return f"conn-{uuid.uuid4().hex[:10]}"


def url(daemon: DaemonProcess, path: str) -> str:
    return daemon.url + path


def patch(daemon: DaemonProcess, connector: str, body: Any, **params: str) -> httpx.Response:
    """JSON, as every write must say (``json=None`` would send no Content-Type: that is a 415)."""
    return httpx.patch(
        url(daemon, f"/connectors/{connector}/offsets"),
        content=b"" if body is None else json.dumps(body),
        headers={"Content-Type": "application/json"},
        params=params,
        timeout=30,
    )


def seed(daemon: DaemonProcess, connector: str, offsets: list[dict[str, Any]]) -> None:
    response = patch(daemon, connector, {"offsets": offsets}, create="true")
    assert response.status_code == 200, response.text


def get(daemon: DaemonProcess, connector: str) -> httpx.Response:
    return httpx.get(url(daemon, f"/connectors/{connector}/offsets"), timeout=30)


def by_partition(response: httpx.Response) -> dict[str, Any]:
    import json

    return {json.dumps(o["partition"], sort_keys=True): o["offset"] for o in response.json()["offsets"]}


@pytest.mark.slow
def test_a_written_offset_is_listed_immediately(daemon: DaemonProcess, name: str) -> None:
    seed(daemon, name, [{"partition": {"filename": "/data/a.txt"}, "offset": {"position": 42}}])
    response = get(daemon, name)
    assert response.status_code == 200
    assert response.json() == {"offsets": [{"partition": {"filename": "/data/a.txt"}, "offset": {"position": 42}}]}
    assert name in httpx.get(url(daemon, "/connectors")).json()


def test_unknown_connector_is_404_with_connects_body(daemon: DaemonProcess, name: str) -> None:
    for response in (
        get(daemon, name),
        patch(daemon, name, {"offsets": [{"partition": {"a": 1}, "offset": {"b": 2}}]}),
        httpx.delete(url(daemon, f"/connectors/{name}/offsets")),
    ):
        assert response.status_code == 404
        assert response.json() == {"error_code": 404, "message": f"Connector {name} not found"}


@pytest.mark.parametrize("body", [{}, {"offsets": []}, {"offsets": None}, None])
def test_alter_without_offsets_is_400_with_connects_message(daemon: DaemonProcess, name: str, body: Any) -> None:
    seed(daemon, name, [{"partition": {"p": 1}, "offset": {"o": 1}}])
    response = patch(daemon, name, body)
    assert response.status_code == 400
    assert response.json() == {"error_code": 400, "message": NO_OFFSETS}


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b'{"offsets": [{"partition": {"a": 1}, "offset": {"b": NaN}}]}',
        b"[1]",
        b'{"offsets": [{"partition": {"a": 1}, "offset": 5}]}',
        b'{"offsets": [{"offset": {"b": 1}}]}',
        b'{"offsets": [{"partition": {"a": 1}, "offset": {"b": 1}}], "extra": 1}',
    ],
)
def test_malformed_bodies_are_400_with_an_error_body(daemon: DaemonProcess, name: str, raw: bytes) -> None:
    seed(daemon, name, [{"partition": {"p": 1}, "offset": {"o": 1}}])
    response = httpx.patch(
        url(daemon, f"/connectors/{name}/offsets"), content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error_code"] == 400 and body["message"]


def test_nested_values_are_rejected_as_connect_does(daemon: DaemonProcess, name: str) -> None:
    seed(daemon, name, [{"partition": {"p": 1}, "offset": {"o": 1}}])
    response = patch(daemon, name, {"offsets": [{"partition": {"p": 1}, "offset": {"o": {"nested": 1}}}]})
    assert response.status_code == 500
    assert response.json()["message"].startswith("Offsets may only contain primitive types as values, but field o")
    assert by_partition(get(daemon, name)) == {'{"p": 1}': {"o": 1}}, "a rejected request writes nothing"


def test_alter_answers_connects_message_and_is_read_back(daemon: DaemonProcess, name: str) -> None:
    seed(
        daemon,
        name,
        [
            {"partition": {"table": "a"}, "offset": {"id": 1}},
            {"partition": {"table": "b"}, "offset": {"id": 1}},
        ],
    )
    response = patch(daemon, name, {"offsets": [{"partition": {"table": "a"}, "offset": {"id": 99, "ts": 1.5}}]})
    assert response.status_code == 200
    assert response.json() == {"message": ALTERED}
    assert by_partition(get(daemon, name)) == {
        '{"table": "a"}': {"id": 99, "ts": 1.5},
        '{"table": "b"}': {"id": 1},
    }


def test_a_null_offset_removes_that_partition_only(daemon: DaemonProcess, name: str) -> None:
    seed(
        daemon,
        name,
        [{"partition": {"k": "x"}, "offset": {"n": 1}}, {"partition": {"k": "y"}, "offset": {"n": 2}}],
    )
    assert patch(daemon, name, {"offsets": [{"partition": {"k": "x"}, "offset": None}]}).status_code == 200
    assert by_partition(get(daemon, name)) == {'{"k": "y"}': {"n": 2}}


def test_reset_removes_everything_and_is_idempotent(daemon: DaemonProcess, name: str) -> None:
    seed(daemon, name, [{"partition": {"k": i}, "offset": {"n": i}} for i in range(5)])
    for _ in range(2):
        response = httpx.delete(url(daemon, f"/connectors/{name}/offsets"))
        assert response.status_code == 200
        assert response.json() == {"message": RESET}
        assert get(daemon, name).json() == {"offsets": []}
    assert name in httpx.get(url(daemon, "/connectors")).json(), "a reset connector stays known, as in Connect"


def test_existing_partition_is_rewritten_under_its_exact_key_bytes(daemon: DaemonProcess, name: str) -> None:
    seed(daemon, name, [{"partition": {"table": "orders", "db": "shop", "protocol": "1"}, "offset": {"id": 1}}])
    original = f'["{name}",{{"table":"orders","db":"shop","protocol":"1"}}]'
    reordered = {"protocol": "1", "db": "shop", "table": "orders"}
    dry = patch(daemon, name, {"offsets": [{"partition": reordered, "offset": {"id": 7}}]}, dry_run="true")
    assert dry.status_code == 200
    [record] = dry.json()["records"]
    assert record == {
        "key": original,
        "value": '{"id":7}',
        "existing_key": True,
        "kafka_partition": partition_for(original.encode(), record_partitions(daemon)),
    }
    assert by_partition(get(daemon, name))['{"db": "shop", "protocol": "1", "table": "orders"}'] == {"id": 1}, (
        "a dry run writes nothing"
    )


def test_new_partition_is_encoded_in_request_order_with_javas_number_rules(daemon: DaemonProcess, name: str) -> None:
    seed(daemon, name, [{"partition": {"x": 0}, "offset": {"o": 0}}])
    body = {"offsets": [{"partition": {"z": "é😀", "a": 10000000.0, "m": True}, "offset": {"pos": 9007199254740993}}]}
    [record] = patch(daemon, name, body, dry_run="true").json()["records"]
    assert record["key"] == f'["{name}",{{"z":"é\\uD83D\\uDE00","a":1.0E7,"m":true}}]'
    assert record["value"] == '{"pos":9007199254740993}'
    assert record["existing_key"] is False


def test_reset_dry_run_lists_tombstones_and_writes_nothing(daemon: DaemonProcess, name: str) -> None:
    seed(daemon, name, [{"partition": {"k": 1}, "offset": {"n": 1}}])
    body = httpx.delete(url(daemon, f"/connectors/{name}/offsets"), params={"dry_run": "true"}).json()
    assert body["dry_run"] is True
    assert [(r["key"], r["value"]) for r in body["records"]] == [(f'["{name}",{{"k":1}}]', None)]
    assert by_partition(get(daemon, name)) == {'{"k": 1}': {"n": 1}}


def test_health_readiness_and_openapi(daemon: DaemonProcess) -> None:
    assert httpx.get(url(daemon, "/healthz")).json() == {"status": "ok"}
    ready = httpx.get(url(daemon, "/readyz"))
    assert ready.status_code == 200
    assert ready.json()["ready"] is True
    assert ready.json()["partitions_at_end"] == ready.json()["partitions"] > 0
    spec = httpx.get(url(daemon, "/openapi.json")).json()
    assert {"get", "patch", "delete"} <= set(spec["paths"]["/connectors/{connector}/offsets"])


def record_partitions(daemon: DaemonProcess) -> int:
    """The partition count the daemon writes with (embedded: 25, Connect's default; kafka fixture: 7)."""
    return int(httpx.get(url(daemon, "/readyz")).json()["partitions"])
