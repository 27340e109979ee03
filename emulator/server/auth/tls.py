"""TLS for the daemon's port, and the client certificate's subject as the principal's name.

``--tls-cert``/``--tls-key`` serve HTTPS; ``--tls-client-ca`` asks clients for a certificate signed
by that CA (mutual TLS). When the certificate is the only way in (no credentials or tokens file),
a client without one is refused during the handshake; with other ways configured, a certificate is
optional and the request must then authenticate otherwise.

uvicorn does not pass the client certificate to the app, so with ``--tls-client-ca`` it runs
``emulator.server.auth.peer_certificate.PeerCertificateProtocol``: its h11 protocol (h11 is imported
only then), which puts the verified certificate's subject into
each request's scope as the ASGI TLS extension does (``scope["extensions"]["tls"]["client_cert_name"]``,
RFC 4514 text, most specific attribute first: ``CN=spark-etl,O=Example``). That text is the name
the scopes file lists.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_SHORT_NAMES = {
    "commonName": "CN",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


class TlsError(ValueError):
    """The TLS files cannot be used; the message names the flag and the file."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert: Path
    key: Path | None = None
    client_ca: Path | None = None


def server_context(files: TlsFiles, certificate_required: bool) -> ssl.SSLContext:
    """The context the daemon serves with, loaded now so that a bad file stops it at startup."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(files.cert, files.key)
    except (OSError, ssl.SSLError) as exc:
        raise _chain_error(files, exc) from exc
    if files.client_ca is not None:
        try:
            context.load_verify_locations(cafile=str(files.client_ca))
        except (OSError, ssl.SSLError) as exc:
            reason = exc if isinstance(exc, ssl.SSLError) else exc.strerror or exc
            raise TlsError(f"--tls-client-ca {files.client_ca}: cannot load the CA: {reason}") from exc
        context.verify_mode = ssl.CERT_REQUIRED if certificate_required else ssl.CERT_OPTIONAL
    return context


def _chain_error(files: TlsFiles, exc: OSError | ssl.SSLError) -> TlsError:
    """Name the file that failed: ``load_cert_chain``'s OSError does not say which of the two it
    could not open, so each is opened again to find out; what both files hold together (a key that
    is not the certificate's) names both, and a key left out is not shown (as ``None``) but explained."""
    given = [("--tls-cert", files.cert), *([("--tls-key", files.key)] if files.key is not None else [])]
    if not isinstance(exc, ssl.SSLError):
        for flag, path in given:
            try:
                with path.open("rb"):  # only whether it opens
                    pass
            except OSError as unreadable:
                return TlsError(f"{flag} {path}: cannot be read: {unreadable.strerror or unreadable}")
    if files.key is None:
        return TlsError(
            f"--tls-cert {files.cert}: cannot load the certificate: {exc}; without --tls-key the private key "
            "must be in the --tls-cert file"
        )
    return TlsError(f"--tls-cert {files.cert} / --tls-key {files.key}: cannot load the certificate and its key: {exc}")


def subject_text(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """``ssl.getpeercert()['subject']`` as RFC 4514 text (last RDN first, as X.500 names print)."""
    return ",".join("+".join(f"{_SHORT_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn) for rdn in reversed(subject))


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
