"""TLS and mutual TLS with a CA and certificates made in the test: a real TLS client with the
right certificate gets in as the certificate's subject, one without a certificate is refused
during the handshake, and the subject's scopes come from the same scopes file as Basic users'."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.x509.oid import NameOID

from emulator.client import Credentials, ForbiddenError, OffsetsClient
from emulator.server.auth.tls import subject_text
from tests.fixtures.daemon import free_port
from tests.integration.auth_helpers import bearer, cli, mint
from tests.integration.scrape import Samples, parse
from tests.integration.tls_helpers import Authority, TlsDaemon, client_context

SUBJECT = "CN=spark-etl,OU=data,O=Example"
HEADER_TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return Authority(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def mtls_daemon(authority: Authority, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsDaemon]:
    """Client certificates are the only way in: the CA signs them, the scopes file limits them."""
    directory = tmp_path_factory.mktemp("mtls-daemon")
    server, _ = authority.issue("server.pem", server=True, CN="localhost")
    client, _ = authority.issue("client.pem", O="Example", OU="data", CN="spark-etl")
    scopes = directory / "scopes.toml"
    scopes.write_text(f'[scopes]\n"{SUBJECT}" = ["write:orders-*"]\n"CN=ops,O=Example" = ["admin"]\n')
    args = ["--data-dir", str(directory / "data"), "--tls-cert", str(server), "--tls-client-ca", str(authority.ca_file)]
    daemon = TlsDaemon(
        [*args, "--scopes-file", str(scopes), "--header-timeout", f"{HEADER_TIMEOUT_S}s"],
        free_port(),
        directory / "daemon.log",
        probe=client_context(authority.ca_file, client),
    ).start()
    yield daemon
    daemon.stop()


def test_the_subject_text_is_rfc_4514_as_cryptography_prints_it(authority: Authority) -> None:
    _, certificate = authority.issue("odd.pem", O="Example, Inc.", CN="+odd;name ")
    parsed = [
        [(_LONG[a.oid], a.value) for a in rdn]  # the shape ssl.getpeercert() gives
        for rdn in certificate.subject.rdns
    ]
    assert subject_text(parsed) == certificate.subject.rfc4514_string()


_LONG = {NameOID.COMMON_NAME: "commonName", NameOID.ORGANIZATION_NAME: "organizationName"}


@pytest.mark.slow
def test_a_client_with_the_cas_certificate_gets_in_as_its_subject(mtls_daemon: TlsDaemon, authority: Authority) -> None:
    credentials = Credentials(ca=str(authority.ca_file), client_cert=str(authority.directory / "client.pem"))
    with OffsetsClient(mtls_daemon.url, credentials=credentials) as client:
        body = {"offsets": [{"partition": {"f": "a"}, "offset": {"pos": 1}}]}
        assert "altered successfully" in client.alter("orders-tls", body, create=True)["message"]
        assert client.offsets("orders-tls") == body["offsets"]
        with pytest.raises(ForbiddenError) as refused:
            client.alter("billing", body, create=True)
    assert refused.value.message.startswith(f"{SUBJECT} (mtls) may not do this"), "the subject is the principal"
    status = client_status(mtls_daemon, authority)
    assert status["security"]["authentication"] == ["mtls"] and status["security"]["tls"] is True


def client_status(daemon: TlsDaemon, authority: Authority) -> dict[str, object]:
    response = httpx.get(
        daemon.url + "/status", verify=client_context(authority.ca_file, authority.directory / "client.pem")
    )
    return dict(response.json())


def test_a_client_without_a_certificate_is_refused_in_the_handshake(
    mtls_daemon: TlsDaemon, authority: Authority
) -> None:
    with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
        httpx.get(mtls_daemon.url + "/healthz", verify=client_context(authority.ca_file))
    with pytest.raises(httpx.TransportError):
        httpx.get(mtls_daemon.url.replace("https", "http") + "/healthz")


def test_a_certificate_from_another_ca_is_refused(mtls_daemon: TlsDaemon, authority: Authority, tmp_path: Path) -> None:
    stranger = Authority(tmp_path)
    certificate, _ = stranger.issue("stranger.pem", O="Example", OU="data", CN="spark-etl")
    with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
        httpx.get(mtls_daemon.url + "/healthz", verify=client_context(authority.ca_file, certificate))


@pytest.mark.slow
def test_the_cli_carries_the_ca_and_the_client_certificate(mtls_daemon: TlsDaemon, authority: Authority) -> None:
    env = {"CONNECT_OFFSETS_CA": str(authority.ca_file)}
    flags = ("--url", mtls_daemon.url, "--client-cert", str(authority.directory / "client.pem"), "--json")
    listed = cli("list", *flags, env=env)
    assert listed.returncode == 0, listed.stderr
    assert isinstance(json.loads(listed.stdout), list)
    without = cli("list", "--url", mtls_daemon.url, env=env)
    assert without.returncode == 3 and "cannot reach" in without.stderr
    assert "requires client certificates (--tls-client-ca)" in without.stderr, "says what the handshake wanted"


@pytest.mark.slow
def test_a_cli_that_cannot_connect_over_tls_is_told_why(mtls_daemon: TlsDaemon, authority: Authority) -> None:
    """A TLS failure reads as a daemon that is down unless the message says what to give."""
    certificate = ("--client-cert", str(authority.directory / "client.pem"))
    no_ca = cli("list", "--url", mtls_daemon.url, *certificate, "--retry-for", "0", env={})
    assert no_ca.returncode == 3 and "not signed by a CA this client trusts: give the CA" in no_ca.stderr
    plain = cli("list", "--url", mtls_daemon.url.replace("https:", "http:"), "--retry-for", "0", env={})
    assert plain.returncode == 3 and "use its https:// URL" in plain.stderr, plain.stderr


@pytest.mark.slow
def test_tls_without_client_certificates_serves_https_with_passwords(authority: Authority, tmp_path: Path) -> None:
    """``--tls-cert`` alone: HTTPS, and authentication by the credentials file as usual."""
    server, _ = authority.issue("server-only.pem", server=True, CN="localhost")
    users = tmp_path / "users.properties"
    users.write_text("ops=pw\n")
    daemon = TlsDaemon(
        ["--data-dir", str(tmp_path / "data"), "--tls-cert", str(server), "--credentials-file", str(users)],
        free_port(),
        tmp_path / "daemon.log",
        probe=client_context(authority.ca_file),
    ).start()
    try:
        credentials = Credentials(user="ops", password="pw", ca=str(authority.ca_file))
        with OffsetsClient(daemon.url, credentials=credentials) as client:
            assert client.connectors() == []
        with pytest.raises(httpx.ConnectError):  # the daemon's certificate is not trusted by default
            httpx.get(daemon.url + "/healthz")
    finally:
        daemon.stop()


@pytest.mark.slow
def test_unusable_tls_files_stop_the_daemon_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    result = cli("serve", "--port", str(free_port()), "--data-dir", str(tmp_path), "--tls-cert", str(missing))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: --tls-cert {missing}")
    keyless = tmp_path / "keyless.pem"
    (tmp_path / "ca").mkdir()
    keyless.write_text(Authority(tmp_path / "ca").ca_file.read_text())  # a certificate, no key
    no_key = cli("serve", "--port", str(free_port()), "--data-dir", str(tmp_path), "--tls-cert", str(keyless))
    assert no_key.returncode == 2 and "the private key must be in the --tls-cert file" in no_key.stderr, no_key.stderr
    alone = cli("serve", "--port", str(free_port()), "--tls-client-ca", str(missing))
    assert alone.returncode == 2 and "--tls-client-ca needs --tls-cert" in alone.stderr


@pytest.mark.slow
def test_with_tokens_too_a_client_certificate_is_optional(authority: Authority, tmp_path: Path) -> None:
    """Certificates and tokens together: the handshake no longer requires a certificate, and a
    client without one must then show a token; one with a certificate needs nothing else."""
    server, _ = authority.issue("server-mixed.pem", server=True, CN="localhost")
    client, _ = authority.issue("ops.pem", O="Example", CN="ops")
    token, line = mint("ci", ["read:orders-*"])
    (tmp_path / "tokens").write_text(line + "\n")
    (tmp_path / "scopes.toml").write_text('[scopes]\n"CN=ops,O=Example" = ["admin"]\n')
    args = ["--tls-cert", str(server), "--tls-client-ca", str(authority.ca_file), "--tokens-file"]
    daemon = TlsDaemon(
        [
            "--data-dir",
            str(tmp_path / "data"),
            *args,
            str(tmp_path / "tokens"),
            "--scopes-file",
            str(tmp_path / "scopes.toml"),
        ],
        free_port(),
        tmp_path / "daemon.log",
        probe=client_context(authority.ca_file),
    ).start()
    try:
        no_certificate = client_context(authority.ca_file)
        assert httpx.get(daemon.url + "/connectors", verify=no_certificate).status_code == 401
        with_token = httpx.get(daemon.url + "/connectors", verify=no_certificate, headers=bearer(token))
        assert with_token.status_code == 200
        as_ops = httpx.get(daemon.url + "/history/status", verify=client_context(authority.ca_file, client))
        assert as_ops.status_code == 200, "the certificate's subject is admin by the scopes file"
    finally:
        daemon.stop()


@pytest.mark.slow  # waits out --header-timeout
def test_a_tls_connection_that_sends_no_request_is_closed_after_the_header_timeout(
    mtls_daemon: TlsDaemon, authority: Authority
) -> None:
    """With client certificates the daemon runs uvicorn's h11 protocol (auth.tls), guarded as its
    default one is (tests/integration/test_connection_limits.py)."""
    context = client_context(authority.ca_file, authority.directory / "client.pem")
    raw = socket.create_connection(("127.0.0.1", mtls_daemon.port), timeout=10)
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        opened = time.monotonic()
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
        waited = time.monotonic() - opened
    assert data.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), data
    assert b"x-connect-offsets-error: request_timeout" in data
    assert HEADER_TIMEOUT_S - 0.5 <= waited < HEADER_TIMEOUT_S + 1.5, waited  # counted from the TCP accept


@pytest.mark.slow  # waits out --header-timeout
def test_a_tls_request_whose_body_stops_arriving_is_cut_off(mtls_daemon: TlsDaemon, authority: Authority) -> None:
    context = client_context(authority.ca_file, authority.directory / "client.pem")
    raw = socket.create_connection(("127.0.0.1", mtls_daemon.port), timeout=10)
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(
            b"PATCH /connectors/orders-stalled/offsets?create=true HTTP/1.1\r\nHost: localhost\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"offsets":'
        )
        started = time.monotonic()
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
        waited = time.monotonic() - started
    assert data == b"", data  # closed without an answer: the route was reading the body
    assert HEADER_TIMEOUT_S <= waited < HEADER_TIMEOUT_S + 1.5, waited


def test_a_tls_request_head_over_64_kib_gets_431(mtls_daemon: TlsDaemon, authority: Authority) -> None:
    """With client certificates uvicorn runs h11, whose own limit was 16 KiB and answered 400; it
    now has the daemon's 64 KiB and answers 431 like httptools, for a head whole in one read too."""
    context = client_context(authority.ca_file, authority.directory / "client.pem")
    for filler in (b"Authorization: Basic " + b"a" * 200_000 + b"\r\n", b"Cookie: c=" + b"x" * 50_000 + b"\r\n"):
        raw = socket.create_connection(("127.0.0.1", mtls_daemon.port), timeout=10)
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + filler + b"Connection: close\r\n\r\n")
            data = b""
            with contextlib.suppress(ConnectionResetError, ssl.SSLError):
                while chunk := tls.recv(65536):
                    data += chunk
        if len(filler) > 64 * 1024:
            assert data.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), data[:200]
            assert b"x-connect-offsets-error: request_head_too_large" in data
            assert b'{"error_code":431,' in data
        else:
            assert data.startswith(b"HTTP/1.1 200 OK\r\n"), data[:200]


TLS_LIMIT = 4


@pytest.fixture(scope="module")
def tls_daemon(authority: Authority, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsDaemon]:
    """HTTPS without client certificates (uvicorn's httptools protocol), few connections allowed."""
    directory = tmp_path_factory.mktemp("tls-limits")
    server, _ = authority.issue("limits-server.pem", server=True, CN="localhost")
    args = ["--data-dir", str(directory / "data"), "--tls-cert", str(server)]
    limits = ["--header-timeout", f"{HEADER_TIMEOUT_S}s", "--max-connections", str(TLS_LIMIT)]
    daemon = TlsDaemon(
        [*args, *limits], free_port(), directory / "daemon.log", probe=client_context(authority.ca_file)
    ).start()
    yield daemon
    daemon.stop()


def closed_by_daemon(sock: socket.socket, within_s: float) -> bool:
    """Whether the daemon closes ``sock`` (end of stream or reset) within ``within_s``."""
    sock.settimeout(within_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.slow  # waits out --header-timeout
def test_tcp_connections_that_never_start_the_tls_handshake_are_counted_and_closed(
    tls_daemon: TlsDaemon, authority: Authority
) -> None:
    """asyncio makes the HTTP protocol only once the handshake is done, so connections that never
    began one escaped --max-connections and --header-timeout: each held a descriptor for asyncio's
    60 s, and 300 of them ran a daemon at ulimit -n 256 out of descriptors."""
    from emulator.server.connections import TLS_SPARE

    before = parse(httpx.get(tls_daemon.url + "/metrics", verify=client_context(authority.ca_file)))
    silent = [socket.create_connection(("127.0.0.1", tls_daemon.port), timeout=10) for _ in range(TLS_LIMIT)]
    try:
        time.sleep(0.3)
        # in their handshake, they count: a client that completes one is told the daemon is full
        refused = httpx.get(tls_daemon.url + "/healthz", verify=client_context(authority.ca_file), timeout=10)
        assert refused.status_code == 503 and refused.headers["X-Connect-Offsets-Error"] == "too_many_connections"
        spare = [socket.create_connection(("127.0.0.1", tls_daemon.port), timeout=10) for _ in range(TLS_SPARE)]
        silent.extend(spare)
        # beyond the spare handshakes (kept to tell clients 503), one more is closed at once
        with socket.create_connection(("127.0.0.1", tls_daemon.port), timeout=10) as extra:
            assert closed_by_daemon(extra, 1.0)
        started = time.monotonic()
        assert all(closed_by_daemon(sock, HEADER_TIMEOUT_S + 2.0) for sock in silent), "closed at --header-timeout"
        assert time.monotonic() - started < HEADER_TIMEOUT_S + 2.0
    finally:
        for sock in silent:
            sock.close()
    served = httpx.get(tls_daemon.url + "/healthz", verify=client_context(authority.ca_file), timeout=10)
    assert served.status_code == 200, "their places were freed"
    after = parse(httpx.get(tls_daemon.url + "/metrics", verify=client_context(authority.ca_file)))

    def closed(samples: Samples, reason: str) -> float:
        return samples.value("connect_offsets_http_connections_closed_total", reason=reason)

    assert closed(after, "header_timeout") == closed(before, "header_timeout") + TLS_LIMIT + TLS_SPARE
    assert closed(after, "limit") == closed(before, "limit") + 2  # the 503, and the one closed at once
    assert "the TLS handshake was not done within 2 s (--header-timeout)" in tls_daemon.log_tail(200)
