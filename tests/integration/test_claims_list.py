"""``GET /claims`` and ``connect-offsets claims`` without a name: every current claim at once, from
the claims storage itself (so a claim on a connector without offsets is listed), none released,
sorted by connector, each the object ``GET /connectors/{c}/claim`` answers; and, with credentials,
only the claims of connectors the principal may read (as ``GET /connectors`` lists names).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.client.http import AsyncOffsetsClient, OffsetsClient
from tests.fixtures.broker import TansuBroker
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.integration.auth_helpers import bearer, mint
from tests.integration.connect_helpers import unique

BODY = {"offsets": [{"partition": {"file": "in.txt"}, "offset": {"position": 1}}]}


def cli_env() -> dict[str, str]:
    """The test's environment without any ``CONNECT_OFFSETS_*`` setting of the machine's."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_OFFSETS_")}


def claims_seen_becomes(daemon: DaemonProcess, count: int, timeout_s: float = 20.0) -> dict[str, Any]:
    """``/status`` once its ``claims_seen`` is ``count``: a count as last seen, so it may lag a moment
    (None: not known yet), never a read of the claims to their end per probe."""
    deadline = time.monotonic() + timeout_s
    while True:
        status: dict[str, Any] = httpx.get(f"{daemon.url}/status", timeout=30).json()
        if status["claims_seen"] == count:
            return status
        assert time.monotonic() < deadline, f"/status never counted {count} claims: {status['claims_seen']}"
        time.sleep(0.1)


def claims_listed_exactly(daemon: DaemonProcess) -> list[dict[str, Any]]:
    """Two current claims (one on a connector that never had offsets, one claimed twice), one released
    claim and one connector with offsets never claimed: the list holds exactly the two current ones."""
    tag = unique("lst")
    with_offsets, without_offsets = f"{tag}-b-with-offsets", f"{tag}-a-no-offsets"
    released, unclaimed = f"{tag}-c-released", f"{tag}-d-unclaimed"
    with OffsetsClient(daemon.url) as client:
        assert client.claims() == [], "nobody claimed anything yet (on Kafka: no claims topic yet)"
        claims_seen_becomes(daemon, 0)
        empty = run_cli("claims", "--url", daemon.url, env=cli_env())
        assert (empty.returncode, empty.stdout.strip()) == (0, "(no claims)"), empty.stderr

        for name in (with_offsets, released, unclaimed):
            client.alter(name, BODY, create=True)
        client.claim(with_offsets, "spark-old")
        current = client.claim(with_offsets, "spark-new")  # epoch 2 fenced epoch 1: only epoch 2 is current
        bare = client.claim(without_offsets, "operator")
        gone = client.claim(released, "job")
        client.release(released, gone["epoch"])
        assert without_offsets not in client.connectors(), "the claim is the connector's only trace"

        expected = [bare, current]  # sorted by connector: "-a-no-offsets" before "-b-with-offsets"
        assert current["epoch"] == 2 and bare["epoch"] == 1
        assert expected == [client.current_claim(without_offsets), client.current_claim(with_offsets)]
        assert client.claims() == expected

    answer = httpx.get(f"{daemon.url}/claims", timeout=30)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    assert answer.json() == expected

    async def listed_async() -> list[dict[str, Any]]:
        async with AsyncOffsetsClient(daemon.url) as client:
            return await client.claims()

    assert asyncio.run(listed_async()) == expected

    text = run_cli("claims", "--url", daemon.url, env=cli_env())
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        f"{without_offsets}: claimed by 'operator', epoch 1",
        f"{with_offsets}: claimed by 'spark-new', epoch 2",
    ]
    as_json = run_cli("claims", "--url", daemon.url, "--json", env=cli_env())
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == expected
    one = run_cli("claims", with_offsets, "--url", daemon.url, env=cli_env())
    assert one.stdout.strip() == f"{with_offsets}: claimed by 'spark-new', epoch 2", "with a name: as before"

    claims_seen_becomes(daemon, 2)
    status = run_cli("status", "--url", daemon.url, env=cli_env())
    assert "\nclaims      2 connectors claimed (as last seen; list them: connect-offsets claims)\n" in status.stdout
    return expected


@pytest.mark.slow
def test_every_current_claim_is_listed_on_the_embedded_log(daemon_factory: DaemonFactory) -> None:
    claims_listed_exactly(daemon_factory())


@pytest.mark.slow
@pytest.mark.kafka
def test_every_current_claim_is_listed_on_kafka(daemon_factory: DaemonFactory, kafka_broker: TansuBroker) -> None:
    args = ("--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", unique("claims-list"))
    expected = claims_listed_exactly(daemon_factory(*args, "--offsets-partitions", "3"))
    other = daemon_factory(*args)  # never claimed anything: finds the claims topic by itself
    assert httpx.get(f"{other.url}/claims", timeout=30).json() == expected
    claims_seen_becomes(other, 2)


@pytest.mark.slow
def test_a_token_scoped_to_some_connectors_lists_only_their_claims(
    daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    admin, admin_line = mint("ops", ["admin"])
    team_a, team_a_line = mint("team-a", ["read:team-a-*"])
    team_c, team_c_line = mint("team-c", ["write:team-c-*"])  # write implies read, but team-c holds no claim
    (tmp_path / "tokens").write_text(f"{admin_line}\n{team_a_line}\n{team_c_line}\n")
    daemon = daemon_factory("--tokens-file", str(tmp_path / "tokens"))
    tag = unique("x")
    names = [f"team-a-{tag}-1", f"team-a-{tag}-2", f"team-b-{tag}-1"]
    with httpx.Client(base_url=daemon.url, timeout=30, headers=bearer(admin)) as http:
        assert http.patch(f"/connectors/{names[0]}/offsets", json=BODY, params={"create": "true"}).status_code == 200
        claims = [http.post(f"/connectors/{name}/claim", json={"owner": "ops"}).json() for name in names]
        everything = http.get("/claims")
    assert everything.status_code == 200 and everything.json() == claims, "admin sees every claim"

    assert httpx.get(f"{daemon.url}/claims", timeout=30).status_code == 401, "no credentials"
    scoped = httpx.get(f"{daemon.url}/claims", headers=bearer(team_a), timeout=30)
    assert scoped.status_code == 200 and scoped.json() == claims[:2], "team-b's claim is not even named"
    other = httpx.get(f"{daemon.url}/claims", headers=bearer(team_c), timeout=30)
    assert other.status_code == 200 and other.json() == []

    shown = run_cli("claims", "--url", daemon.url, env={**cli_env(), "CONNECT_OFFSETS_TOKEN": team_a})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [f"{name}: claimed by 'ops', epoch 1" for name in names[:2]]
