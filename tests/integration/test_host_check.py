"""The ``Host`` check (``--allowed-hosts``) against DNS rebinding, where no credentials stand in
its way: a daemon without authentication beyond loopback (``--insecure-no-auth``). A web page whose
own name the attacker rebinds to the daemon's address makes same-origin requests, so only the
``Host`` header the browser sends (the attacker's name) tells them apart. An IP address cannot be
rebound, and this machine's own names are not the attacker's to point anywhere. And what every
port refuses whatever it allows: a ``Host`` that is not ``host[:port]``, or more than one.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from emulator.cli.main import build_parser
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.server.auth.config import build_security
from emulator.server.auth.hosts import HostRule
from emulator.server.options import resolve
from emulator.server.settings import Settings
from emulator.server.wiring import assemble_runtime, close_runtime, make_app, start_reading
from emulator.view.offset_view import OffsetView
from tests.fixtures.waits import until
from tests.integration.auth_helpers import write_security_files

Serve = Callable[..., TestClient]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """An in-process daemon with the security ``serve`` would build from these flags."""
    log = EmbeddedOffsetLog(tmp_path / "data", partitions=1, synchronous="NORMAL")
    log.open()
    runtime = assemble_runtime(log, OffsetView(), NoConnectCluster())
    start_reading(runtime)
    clients: list[TestClient] = []

    def start(*flags: str) -> TestClient:
        settings = resolve(Settings, build_parser().parse_args(["serve", *flags]), {})
        app = make_app(runtime, security=build_security(settings), reading_started=True)
        clients.append(TestClient(app, base_url="http://127.0.0.1"))
        until(lambda: runtime.health.readiness()["ready"], "the log read to its end")
        return clients[-1]

    try:
        yield start
    finally:
        for client in clients:
            client.close()
        close_runtime(runtime, None)


def status(client: TestClient, host: str) -> int:
    return client.get("/connectors", headers={"Host": host}).status_code


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8081", "127.0.0.1.nip.io", "daemon.internal"])
def test_without_authentication_beyond_loopback_a_foreign_name_is_refused(serve: Serve, host: str) -> None:
    response = serve("--host", "0.0.0.0", "--insecure-no-auth").get("/connectors", headers={"Host": host})
    assert response.status_code == 400
    assert response.headers["X-Connect-Offsets-Error"] == "host_not_allowed"
    assert "IP addresses" in response.json()["message"] and "--allowed-hosts" in response.json()["message"]


def test_without_authentication_beyond_loopback_addresses_and_this_machines_names_are_served(serve: Serve) -> None:
    client = serve("--host", "0.0.0.0", "--insecure-no-auth")
    hosts = ["127.0.0.1", "192.0.2.7:8081", "[2001:db8::7]:8081", "localhost", socket.gethostname(), socket.getfqdn()]
    assert {host: status(client, host) for host in hosts} == dict.fromkeys(hosts, 200)


def test_allowed_hosts_serve_the_names_given_and_no_other(serve: Serve) -> None:
    """docker-compose.yml's setting: the published port on 127.0.0.1, health check included."""
    client = serve("--host", "0.0.0.0", "--insecure-no-auth", "--allowed-hosts", "localhost,127.0.0.1")
    assert (status(client, "localhost:8081"), status(client, "127.0.0.1:8081")) == (200, 200)
    assert (status(client, "192.0.2.7"), status(client, "evil.example")) == (400, 400)
    named = serve("--host", "0.0.0.0", "--insecure-no-auth", "--allowed-hosts", "*.internal")
    assert status(named, "daemon.internal") == 200


def test_with_authentication_beyond_loopback_any_host_is_served(serve: Serve, tmp_path: Path) -> None:
    """A rebound page has no credentials to send: the Host check is not what stops it there."""
    files = write_security_files(tmp_path / "security")
    client = serve("--host", "0.0.0.0", *files.serve_args())
    assert status(client, "daemon.internal") == 401, "past the Host check, to authentication"


MALFORMED_HOSTS = ["localhost:48100.evil.com", "localhost:evil", "127.0.0.1:80.evil.com", "[::1]:evil", "[::1]x"]


@pytest.mark.parametrize("flags", [(), ("--allowed-hosts", "*")], ids=["loopback names", "any host"])
def test_a_host_whose_port_is_not_digits_is_refused_as_a_bad_host(serve: Serve, flags: tuple[str, ...]) -> None:
    """``localhost:48100.evil.com`` was checked as ``localhost`` (the part before the last ':'),
    so a name the checker never looked at got through. A value that is not ``host[:port]`` is an
    invalid ``Host``, answered 400 (RFC 9112, section 3.2) even where any host is served; the
    forms clients send (a port or none, IPv6 in brackets) still pass (security QA LOW)."""
    client = serve(*flags)
    for host in MALFORMED_HOSTS:
        response = client.get("/connectors", headers={"Host": host})
        assert response.status_code == 400, host
        assert response.headers["X-Connect-Offsets-Error"] == "host_not_allowed"
        assert "port of digits" in response.json()["message"]
    served = ["localhost", "localhost:8081", "127.0.0.1", "127.0.0.1:8081", "[::1]", "[::1]:8081"]
    assert {host: status(client, host) for host in served} == dict.fromkeys(served, 200)


@pytest.mark.parametrize("flags", [(), ("--allowed-hosts", "*")], ids=["loopback names", "any host"])
def test_a_request_with_two_host_headers_is_refused(serve: Serve, flags: tuple[str, ...]) -> None:
    """RFC 9112, section 3.2: more than one ``Host`` line is a 400. The check read the first line
    and the same-origin rule (``ui.csrf``) the last, so ``Host: localhost`` then ``Host: evil.com``
    passed one as a loopback name and the other as the page's own origin; the metrics port already
    refused it, as ``wsgiref`` joins the lines with a comma, which no host name holds (security QA LOW)."""
    client = serve(*flags)
    for hosts in (["localhost", "evil.com"], ["localhost", "localhost"]):
        response = client.get("/connectors", headers=[("Host", host) for host in hosts])
        assert response.status_code == 400, hosts
        assert response.headers["X-Connect-Offsets-Error"] == "host_not_allowed"
        assert "2 Host headers" in response.json()["message"]
    assert HostRule.of(["*"]).refusal("localhost,evil.com", "1.1") is not None, (
        "two lines as the metrics port sees them"
    )
