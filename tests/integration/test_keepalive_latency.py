"""Answers on a kept-alive connection are not held back by Nagle's algorithm.

Before the listening socket set ``TCP_NODELAY``, every request after the first on a connection
took 40–44 ms here (the client's delayed ACK released the answer's last segment), whatever the
route did; every client of the daemon keeps its connection alive. Measured on the session daemon:
p50 44 ms without, 1.8 ms with (docs/operations.md). The bound is far from both.
"""

from __future__ import annotations

import statistics
import time

import httpx

from tests.fixtures.daemon import DaemonProcess


def test_kept_alive_requests_are_not_delayed_by_nagle(embedded_daemon: DaemonProcess) -> None:
    with httpx.Client(base_url=embedded_daemon.url, timeout=10) as client:
        client.get("/connectors")
        durations = []
        for _ in range(30):
            started = time.perf_counter()
            assert client.get("/connectors").status_code == 200
            durations.append(time.perf_counter() - started)
    assert statistics.median(durations) < 0.020, f"median {statistics.median(durations) * 1000:.1f} ms"
