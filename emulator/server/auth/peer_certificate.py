"""uvicorn's h11 protocol with the verified client certificate's subject in each request's scope
(``--tls-client-ca``; ``emulator.server.auth.tls`` says why). A module of its own so that h11 and
uvicorn's h11 protocol are imported only by a daemon asking for client certificates."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from emulator.server.auth.tls import subject_text


class PeerCertificateProtocol(H11Protocol):
    """uvicorn's h11 protocol, plus the verified client certificate's subject in every request's scope."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        certificate = ssl_object.getpeercert() if ssl_object is not None else None
        name = subject_text(certificate["subject"]) if certificate and certificate.get("subject") else None
        inner = self.app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            scope.setdefault("extensions", {})["tls"] = {"client_cert_name": name}
            await inner(scope, receive, send)

        self.app = app
