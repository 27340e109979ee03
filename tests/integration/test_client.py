"""The Python clients, synchronous and asyncio, against a real daemon: same results, typed errors."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from emulator.client.errors import (
    AnswerLost,
    ApiError,
    ClientError,
    DaemonUnavailable,
    NotFoundError,
    UnaddressableConnector,
    UnknownRouteError,
)
from emulator.client.history import HistoryClient
from emulator.client.http import AsyncOffsetsClient, OffsetsClient
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonProcess, free_port
from tests.fixtures.sockets import answer_dropping_proxy, one_answer_port, silent_port


def body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": {"filename": "/in.txt"}, "offset": {"position": position}}]}


def test_sync_client_round_trip(embedded_daemon: DaemonProcess) -> None:
    name = f"sync-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(embedded_daemon.url) as client:
        assert client.ready() is True
        assert client.alter(name, body(10), create=True)["message"].startswith("The Connect framework-managed")
        assert client.offsets(name) == [{"partition": {"filename": "/in.txt"}, "offset": {"position": 10}}]
        dry = client.alter(name, body(3), dry_run=True)
        assert dry["dry_run"] is True and dry["records"][0]["value"] == '{"position":3}'
        assert client.offsets(name)[0]["offset"] == {"position": 10}, "dry run wrote nothing"
        assert name in client.connectors()
        client.reset(name)
        assert client.offsets(name) == []


def test_async_client_round_trip(embedded_daemon: DaemonProcess) -> None:
    name = f"async-{uuid.uuid4().hex[:8]}"

    async def scenario() -> list[dict[str, Any]]:
        async with AsyncOffsetsClient(embedded_daemon.url) as client:
            assert await client.ready() is True
            await client.alter(name, body(7), create=True)
            # Concurrent alters of different partitions are all applied (read-your-writes for each).
            await asyncio.gather(
                *(client.alter(name, {"offsets": [{"partition": {"n": i}, "offset": {"o": i}}]}) for i in range(10))
            )
            assert name in await client.connectors()
            return await client.offsets(name)

    offsets = asyncio.run(scenario())
    assert {"partition": {"filename": "/in.txt"}, "offset": {"position": 7}} in offsets
    assert sorted(o["offset"]["o"] for o in offsets if "n" in o["partition"]) == list(range(10))


def test_both_clients_take_any_route_through_request(embedded_daemon: DaemonProcess) -> None:
    """docs/api.md promised ``request`` on both clients; the asyncio one had none."""
    name = f"request-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(embedded_daemon.url) as client:
        client.alter(name, body(4), create=True)
        expected = client.request("GET", f"/connectors/{name}/offsets")

    async def scenario() -> tuple[Any, Any]:
        async with AsyncOffsetsClient(embedded_daemon.url) as client:
            got = await client.request("GET", f"/connectors/{name}/offsets", params={"fresh": "true"})
            claimed = await client.request("POST", f"/connectors/{name}/claim", json={"owner": "a"})
            with pytest.raises(NotFoundError):
                await client.request("GET", "/connectors/never-seen-connector/offsets")
            return got, claimed

    got, claimed = asyncio.run(scenario())
    assert got == expected == body(4) and claimed["epoch"] == 1


def test_errors_are_typed_and_carry_connects_message(embedded_daemon: DaemonProcess) -> None:
    with OffsetsClient(embedded_daemon.url) as client:
        with pytest.raises(NotFoundError) as missing:
            client.offsets("never-seen-connector")
        assert missing.value.status == 404 and missing.value.message == "Connector never-seen-connector not found"
        name = f"err-{uuid.uuid4().hex[:8]}"
        client.alter(name, body(1), create=True)
        with pytest.raises(ApiError) as empty:
            client.alter(name, {"offsets": []})
        assert empty.value.status == 400
        assert empty.value.message == "Partitions / offsets need to be provided for an alter offsets request"

    async def async_missing() -> None:
        async with AsyncOffsetsClient(embedded_daemon.url) as client:
            await client.offsets("never-seen-connector")

    with pytest.raises(NotFoundError):
        asyncio.run(async_missing())


def test_a_404_without_the_daemons_kind_is_no_unknown_connector_and_no_missing_claim(
    embedded_daemon: DaemonProcess,
) -> None:
    """Every 404 was ``NotFoundError``: a wrong base path answered "not claimed", exit 0."""
    name = f"route-{uuid.uuid4().hex[:8]}"
    wrong = embedded_daemon.url + "/api"
    with OffsetsClient(embedded_daemon.url) as client:
        assert client.current_claim(name) is None, "the daemon's claim_not_found: no claim"
    with OffsetsClient(wrong) as client:
        with pytest.raises(UnknownRouteError) as claim:
            client.current_claim(name)
        with pytest.raises(UnknownRouteError):
            client.offsets(name)

    async def async_claim() -> None:
        async with AsyncOffsetsClient(wrong) as client:
            await client.current_claim(name)

    with pytest.raises(UnknownRouteError):
        asyncio.run(async_claim())
    assert not isinstance(claim.value, NotFoundError) and claim.value.status == 404
    assert claim.value.message.startswith(
        f"{wrong}/connectors/{name}/claim answered 404 without being a connect-offsets daemon route: a wrong base path"
    )
    shown = run_cli("claims", name, "--url", wrong)
    assert shown.returncode == 1 and "not claimed" not in shown.stdout, shown.stdout
    assert "without being a connect-offsets daemon route" in shown.stderr, shown.stderr


def test_unreachable_daemon_is_daemon_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with OffsetsClient(url, timeout_s=5) as client, pytest.raises(DaemonUnavailable, match="cannot reach"):
        client.connectors()

    async def scenario() -> None:
        async with AsyncOffsetsClient(url, timeout_s=5) as client:
            await client.connectors()

    with pytest.raises(DaemonUnavailable):
        asyncio.run(scenario())


def test_kind_sink_reaches_the_daemon(embedded_daemon: DaemonProcess) -> None:
    """The embedded log has no consumer groups: the daemon's answer proves ``kind`` was sent."""
    with OffsetsClient(embedded_daemon.url) as client, pytest.raises(ApiError) as refused:
        client.offsets("any-sink", kind="sink")
    assert refused.value.status == 400 and "consumer group" in refused.value.message


# --- a request sent, its answer lost ------------------------------------------------------------------

LOST = "but its answer was lost"
MAY_HAVE = "the request may have been applied; read the current state"
TLS_HINT = "use its https:// URL"


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_a_write_whose_answer_is_lost_is_answer_lost_not_daemon_unavailable(
    embedded_daemon: DaemonProcess, reset: bool
) -> None:
    """It was ``DaemonUnavailable`` ("cannot reach", plus "use its https:// URL"), which callers take for
    "nothing happened": a claim sent again bumped the epoch and fenced the first one it had taken."""
    name = f"lost-{uuid.uuid4().hex[:8]}"
    with answer_dropping_proxy(embedded_daemon.port, reset=reset) as url:
        with OffsetsClient(url) as client, pytest.raises(AnswerLost) as lost:
            client.claim(name, owner="job")

        async def claim_again() -> None:
            async with AsyncOffsetsClient(url) as client:
                await client.claim(name, owner="job")

        with pytest.raises(AnswerLost) as lost_async:
            asyncio.run(claim_again())
        with OffsetsClient(url) as client, pytest.raises(DaemonUnavailable):
            client.connectors()  # a read changes nothing: asking again is safe
    for error in (lost.value, lost_async.value):
        assert not isinstance(error, DaemonUnavailable)
        assert f"got POST /connectors/{name}/claim, {LOST}" in str(error) and MAY_HAVE in str(error)
        # a TLS daemon also closes a plain connection without a byte; a reset is not its way
        assert (TLS_HINT in str(error)) is not reset, str(error)
    with OffsetsClient(embedded_daemon.url) as client:
        assert (client.current_claim(name) or {}).get("epoch") == 2, "both claims were applied"


@pytest.mark.slow
def test_a_daemon_that_never_answers_is_named_so_and_a_write_to_it_may_have_landed() -> None:
    with silent_port() as port, OffsetsClient(f"http://127.0.0.1:{port}", timeout_s=0.5) as client:
        with pytest.raises(DaemonUnavailable) as read:
            client.connectors()
        with pytest.raises(AnswerLost) as write:
            client.reset("c")
        with pytest.raises(DaemonUnavailable):
            client.reset("c", dry_run=True)  # a dry run changes nothing
    assert "accepted the connection but did not answer GET /connectors within 0.5 s" in str(read.value)
    assert "(no answer within 0.5 s)" in str(write.value) and MAY_HAVE in str(write.value)
    assert TLS_HINT not in str(read.value) + str(write.value)


def test_the_cli_exits_4_when_a_writes_answer_is_lost(embedded_daemon: DaemonProcess) -> None:
    """Exit 3 (unreachable) told a script "nothing happened, run it again"."""
    name = f"lost-cli-{uuid.uuid4().hex[:8]}"
    with answer_dropping_proxy(embedded_daemon.port, reset=True) as url:
        claimed = run_cli("claim", name, "--owner", "job", "--url", url)
    assert claimed.returncode == 4, claimed.stderr
    assert claimed.stderr.startswith("error: the connect-offsets daemon at ") and MAY_HAVE in claimed.stderr
    with OffsetsClient(embedded_daemon.url) as client:
        assert (client.current_claim(name) or {}).get("epoch") == 1, "the claim was applied"


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "code"), [("write_outcome_unknown", 4), ("log_timeout", 1)])
def test_the_cli_exits_4_when_the_daemon_says_a_write_may_still_land(kind: str, code: int) -> None:
    """503 ``write_outcome_unknown`` (the log did not acknowledge in time) was exit 1, "refused": a
    script took it for "nothing changed" and sent the claim again, fencing the one that landed;
    ``log_timeout`` wrote nothing and stays 1. The daemon's answer is replayed by a fixed server: a
    broker acknowledging exactly too late cannot be brought about on demand
    (tests/integration/test_broker_faults.py meets both kinds under a real stall)."""
    message = "the Kafka cluster did not acknowledge the write within 5 s (--write-timeout)"
    answer = json.dumps({"error_code": 503, "message": message}).encode()
    headers = {"Content-Type": "application/json", "X-Connect-Offsets-Error": kind, "Retry-After": "1"}
    with one_answer_port(503, headers, answer) as url:
        claimed = run_cli("claim", "c", "--owner", "job", "--url", url, "--retry-for", "0")
    assert claimed.returncode == code, claimed.stderr
    assert claimed.stderr.strip() == f"error: {message} (HTTP 503)"


def test_a_name_holding_half_a_surrogate_pair_is_a_typed_error_saying_how_to_reach_it(
    embedded_daemon: DaemonProcess,
) -> None:
    """Connect's data may hold half a surrogate pair, and ``connectors()`` lists such a name; no URL can
    carry it (UTF-8 cannot encode it, and the daemon refuses the path). Every call that puts it in a URL
    raised a bare ``UnicodeEncodeError`` from the URL's encoding; now ``UnaddressableConnector`` (a
    ``ClientError``) before any request, from both clients, naming the raw-records API, which does
    reach it."""
    name = f"sur\ud800{uuid.uuid4().hex[:8]}"
    key = json.dumps([name, {"f": 1}], separators=(",", ":")).encode()  # ASCII: the escape \ud800
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("offsets", (name,)),
        ("alter", (name, body(1))),
        ("reset", (name,)),
        ("claim", (name, "job")),
        ("current_claim", (name,)),
        ("release", (name, 1)),
        ("records", ([name],)),
    ]
    with OffsetsClient(embedded_daemon.url) as client:
        client.import_records([(key, b'{"p":1}')])
        assert name in client.connectors()
        assert client.records()[key] == b'{"p":1}', "the raw-records API reaches it"
        for method, args in calls:
            with pytest.raises(UnaddressableConnector, match="no URL can carry") as refused:
                getattr(client, method)(*args)
            assert isinstance(refused.value, ClientError) and refused.value.connector == name
            assert "read its offsets with records() and write them with import_records()" in str(refused.value)
    with HistoryClient(embedded_daemon.url) as history, pytest.raises(UnaddressableConnector):
        history.offsets_as_of(name, "now")

    async def scenario() -> list[str]:
        refused: list[str] = []
        async with AsyncOffsetsClient(embedded_daemon.url) as client:
            for method, args in calls:
                try:
                    await getattr(client, method)(*args)
                except UnaddressableConnector as exc:
                    refused.append(method)
                    assert "with import_records() (GET and POST /offsets/records" in str(exc)
        return refused

    assert asyncio.run(scenario()) == [method for method, _ in calls]
