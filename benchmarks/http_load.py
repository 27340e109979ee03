"""A minimal kept-alive HTTP/1.1 client on asyncio streams, so the load generator is not what is measured.

The daemon and the benchmark share two cores: a full client (httpx: URL objects, header models, a
state machine per request) costs about as much CPU per request as the daemon's own handling, and
with 32 writers it would cap the throughput measured at the client's, not the daemon's. Requests
here are prebuilt bytes; a response is read as its status line, its headers up to the blank line
and ``Content-Length`` bytes of body (uvicorn sends that for every answer this benchmark asks for).
Nothing else of HTTP is supported, on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any


def request_bytes(method: str, path: str, body: Any = None, host: str = "127.0.0.1") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n"
    if body is None:
        return (head + "\r\n").encode()
    data = json.dumps(body, separators=(",", ":")).encode()
    return (head + f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data


class RawConnection:
    """One connection; ``send`` one request at a time (no pipelining)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> RawConnection:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=64 * 1024 * 1024)
        return self

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Send one prebuilt request; ``(status, body bytes)``."""
        reader, writer = self._reader, self._writer
        assert reader is not None and writer is not None, "open() first"
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
                break
        body = await reader.readexactly(length) if length else b""
        return status, body
