"""History is read-your-writes: a history query right after a PATCH answers includes it.

The view has a write the moment the log acknowledges it, but the archive only gets it when the log's
reader delivers it, which the embedded log does at its next look (appends no longer wake it). A
query therefore first waits, locally, for the reader to pass this daemon's own writes. Each round
queries straight after the PATCH, on one connection, so a query that did not wait would see the
previous position.
"""

from __future__ import annotations

import uuid

import pytest

from emulator.client.history import HistoryClient
from tests.fixtures.daemon import DaemonProcess, KafkaDaemon


def rounds(url: str, name: str, n: int) -> None:
    with HistoryClient(url) as client:
        for i in range(n):
            client.alter(name, {"offsets": [{"partition": {"f": "a"}, "offset": {"pos": i}}]}, create=True)
            newest = client.history(name, limit=1)["changes"][0]
            assert newest["offset"] == {"pos": i}, f"round {i}: the history query missed the PATCH before it"


@pytest.mark.slow  # 2-7 s here (2026-11-27)
def test_on_the_embedded_log(embedded_daemon: DaemonProcess) -> None:
    rounds(embedded_daemon.url, f"ryw-{uuid.uuid4().hex[:8]}", 30)


@pytest.mark.kafka
def test_on_kafka(kafka_daemon: KafkaDaemon) -> None:
    rounds(kafka_daemon.url, f"ryw-{uuid.uuid4().hex[:8]}", 15)
