"""The console's connectors page (``GET /ui/api/connectors``) shows each connector's current claim.

The page lists every connector on each refresh (every 2 s per open console), so the claims are read
once for the whole page rather than once per connector — a lookup each held the event loop ~1 s per
refresh with 10,000 connectors (benchmarks/RESULTS.md, "Console: the connectors page"). What must
hold is that the one read still shows every claim as it stands now: the held ones with their owner
and epoch, released and never claimed ones as none, and on Kafka a claim made through another daemon.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from emulator.client import OffsetsClient
from tests.fixtures.daemon import DaemonFactory, DaemonProcess, KafkaDaemon

BODY = {"offsets": [{"partition": {"file": "a"}, "offset": {"position": 1}}]}


def claims_on_page(daemon: DaemonProcess, names: list[str]) -> dict[str, Any]:
    page = httpx.get(f"{daemon.url}/ui/api/connectors", timeout=30)
    assert page.status_code == 200, page.text
    rows = {row["name"]: row for row in page.json()["connectors"]}
    return {name: rows[name]["claim"] for name in names}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["embedded_daemon", "kafka_daemon"])
def test_the_page_shows_held_claims_and_none_for_released_or_never_claimed(
    backend: str, request: pytest.FixtureRequest
) -> None:
    daemon: DaemonProcess = request.getfixturevalue(backend)
    names = [f"page-claims-{n}-{uuid.uuid4().hex[:8]}" for n in range(3)]
    held, released, never = names
    with OffsetsClient(daemon.url) as client:
        for name in names:
            client.alter(name, BODY, create=True)
        claim = client.claim(held, "spark-query-1")
        gone = client.claim(released, "operator")
        client.release(released, gone["epoch"])

    shown = claims_on_page(daemon, names)

    assert shown[held] is not None
    assert (shown[held]["owner"], shown[held]["epoch"]) == ("spark-query-1", claim["epoch"])
    assert shown[held]["claimed_at"].endswith("Z")
    assert shown[released] is None
    assert shown[never] is None


@pytest.mark.slow
def test_on_kafka_the_page_shows_a_claim_made_through_another_daemon(
    kafka_daemon: KafkaDaemon, daemon_factory: DaemonFactory
) -> None:
    other = daemon_factory(
        "--bootstrap-servers",
        kafka_daemon.bootstrap,
        "--offsets-topic",
        kafka_daemon.offsets_topic,
        "--offsets-partitions",
        "7",
    )
    name = f"page-claims-across-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(other.url) as through_other:
        through_other.alter(name, BODY, create=True)
        claim = through_other.claim(name, "owner-elsewhere")

    shown = claims_on_page(kafka_daemon, [name])[name]

    assert shown is not None and (shown["owner"], shown["epoch"]) == ("owner-elsewhere", claim["epoch"])
