"""A minimal kept-alive HTTP/1.1 client on asyncio streams, so the load generator is not what is measured.

The daemon and the benchmark share two cores: a full client (httpx: URL objects, header models, a
state machine per request) costs about as much CPU per request as the daemon's own handling, and
with 32 writers it would cap the throughput measured at the client's, not the daemon's. Requests
here are prebuilt bytes; a response is read as its status line, its headers up to the blank line
and ``Content-Length`` bytes of body (uvicorn sends that for every answer this benchmark asks for).
Nothing else of HTTP is supported, on purpose.

``BlockingConnection`` is the same on a plain socket, for a benchmark that times one request at a
time between other blocking calls (``commit_latency`` alternates PATCHes with raw produces): httpx
spent a few hundred microseconds of Python per request there (``GET /healthz`` p50 0.57 ms through
httpx against 0.19 ms this way, a dry-run ``PATCH`` 0.88 against 0.33 ms, the same daemon,
alternating), more for a request with a body than without, so ``PATCH − /healthz`` through httpx
charged the client's body handling to the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from typing import Any

from benchmarks.support import percentile


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
        status, length = parse_head(await reader.readuntil(_HEAD_END))
        body = await reader.readexactly(length) if length else b""
        return status, body


class BlockingConnection:
    """``RawConnection`` on a blocking socket (``TCP_NODELAY``): ``send`` one request at a time."""

    def __init__(self, host: str, port: int, timeout_s: float = 60.0) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = b""

    def send(self, request: bytes) -> tuple[int, bytes]:
        """Send one prebuilt request; ``(status, body bytes)``."""
        self._sock.sendall(request)
        while (end := self._buffer.find(_HEAD_END)) < 0:
            self._fill()
        end += len(_HEAD_END)
        status, length = parse_head(self._buffer[:end])
        while len(self._buffer) < end + length:
            self._fill()
        body, self._buffer = self._buffer[end : end + length], self._buffer[end + length :]
        return status, body

    def _fill(self) -> None:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionError("the daemon closed the connection before a complete response")
        self._buffer += chunk

    def close(self) -> None:
        self._sock.close()


_HEAD_END = b"\r\n\r\n"


def parse_head(head: bytes) -> tuple[int, int]:
    """``(status, Content-Length)`` of a response head (0 without the header)."""
    status = int(head[9:12])
    for line in head.split(b"\r\n")[1:]:
        if line[:15].lower() == b"content-length:":
            return status, int(line[15:])
    return status, 0


async def probe_healthz(
    conn: RawConnection, stop: asyncio.Event | None = None, until: float | None = None
) -> list[float]:
    """``GET /healthz`` back to back until ``stop`` is set or ``until`` (``time.perf_counter()``) passes:
    each answer's latency. The benchmarks that ask what a heavy request costs every other request use
    it as the other request: the cheapest one, so its waits are the daemon's stalls."""
    healthz = request_bytes("GET", "/healthz")
    samples = []
    while not (stop is not None and stop.is_set()) and (until is None or time.perf_counter() < until):
        t = time.perf_counter()
        status, answer = await conn.send(healthz)
        samples.append(time.perf_counter() - t)
        if status != 200:
            raise RuntimeError(f"/healthz answered {status}: {answer[:300]!r}")
    return samples


def probe_row(samples: list[float], over_ms: tuple[int, ...]) -> dict[str, float]:
    """The probe's p50 / p99 / max and how many probes waited longer than each of ``over_ms``."""
    ms = [s * 1000 for s in samples]
    return {
        "probes": len(ms),
        "probe_p50_ms": round(percentile(ms, 50), 3),
        "probe_p99_ms": round(percentile(ms, 99), 3),
        "probe_max_ms": round(max(ms), 1),
        **{f"probes_over_{bound}ms": sum(1 for m in ms if m > bound) for bound in over_ms},
    }
