"""A certificate authority made in the test (``cryptography``), and a daemon served over TLS."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.fixtures.daemon import DaemonProcess


def _name(**attributes: str) -> x509.Name:
    oids = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME}
    return x509.Name([x509.NameAttribute(oids.get(k, NameOID.COMMON_NAME), v) for k, v in attributes.items()])


def _write(path: Path, certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None) -> Path:
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    if key is not None:
        pem += key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    path.write_bytes(pem)
    return path


@dataclass
class Authority:
    """A CA that issues the daemon's certificate and clients' certificates, written as PEM files."""

    directory: Path
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))

    def __post_init__(self) -> None:
        self.name = _name(O="connect-offsets tests", CN=f"test CA {self.directory.name}")
        self.certificate = self._issue(self.name, self.key.public_key(), ca=True)
        self.ca_file = _write(self.directory / "ca.pem", self.certificate)

    def _issue(
        self, subject: x509.Name, public_key: ec.EllipticCurvePublicKey, ca: bool = False, server: bool = False
    ) -> x509.Certificate:
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        elif not ca:
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        return builder.sign(self.key, hashes.SHA256())

    def issue(self, file_name: str, server: bool = False, **subject: str) -> tuple[Path, x509.Certificate]:
        """A key and its certificate in one PEM file (``--tls-cert`` alone, or a client's cert)."""
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = self._issue(_name(**subject), key.public_key(), server=server)
        return _write(self.directory / file_name, certificate, key), certificate


def client_context(ca: Path, certificate: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if certificate is not None:
        context.load_cert_chain(certificate)
    return context


@dataclass
class TlsDaemon(DaemonProcess):
    """``connect-offsets serve`` over HTTPS; it is probed with a client certificate when it needs one."""

    probe: ssl.SSLContext | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def wait_until(self, path: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last: object = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                response = httpx.get(self.url + path, timeout=2, verify=self.probe or True)
                if response.status_code == 200:
                    return
                last = response.text
            except httpx.TransportError as exc:
                last = exc
            time.sleep(0.1)
        raise TimeoutError(f"daemon not answering 200 on {path} after {timeout_s}s (last: {last}):\n{self.log_tail()}")
