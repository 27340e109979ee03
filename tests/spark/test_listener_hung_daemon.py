"""A daemon that hangs (SIGSTOP: it accepts connections and answers nothing) when the query stops.

``wait_for_termination`` cannot wait for ever, and a caller that gets False may hand over to Connect
at once. Before, the False came with no reason at all, and the termination's publish was neither
cancelled nor reported: it landed whenever the daemon woke up, behind Connect's back. Now the wait
that gives up says why in ``errors`` (and a WARNING), abandons the query's publishes so that no
write not yet sent is sent afterwards, and says whether one was already sent — the daemon may still
apply that one, and when it does ``errors`` says so.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from emulator.spark import OffsetCommitListener
from emulator.spark.handoff import HandoffError
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.fixtures.waits import until
from tests.spark.helpers import Collector, append, lines_bytes, start_file_query, stored_position, unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WAIT_S = 3.0
"""The wait's timeout here: the daemon stays paused longer than that."""

REQUEST_TIMEOUT_S = 25.0
"""Longer than the pause: the request that hangs is still waiting when the daemon resumes, so it is
answered then (the case that let the old publish land late)."""

FIRST, SECOND = ["a", "b"], ["c", "d"]


@contextlib.contextmanager
def paused(daemon: DaemonProcess) -> Iterator[None]:
    """The daemon stopped (SIGSTOP) for the block; resumed on the way out whatever happens."""
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        daemon.proc.send_signal(signal.SIGCONT)


def _position(daemon: DaemonProcess, connector: str, path: Path) -> int | None:
    with daemon.client() as client:
        return stored_position(client, connector, str(path))


def _first_batch_published(
    spark: SparkSession, daemon: DaemonProcess, listener: OffsetCommitListener, tmp_path: Path
) -> tuple[Any, str, Path]:
    """A query whose first batch (a, b) the listener has published; the source itself commits
    nothing (``commitOffsets=false``), so every write to the connector is the listener's."""
    source, connector = tmp_path / "in.txt", unique("hung")
    source.write_bytes(lines_bytes(FIRST))
    query = start_file_query(spark, daemon.url, connector, str(source), str(tmp_path / "cp"), Collector(), commit=False)
    query.processAllAvailable()
    first_end = len(lines_bytes(FIRST))
    until(lambda: _position(daemon, connector, source) == first_end, "the listener to publish the first batch", 30)
    return query, connector, source


def test_a_wait_that_gives_up_on_a_hung_daemon_says_why_and_nothing_lands_afterwards(
    spark: SparkSession, daemon_factory: DaemonFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = daemon_factory()
    listener = OffsetCommitListener(spark, url=daemon.url)
    listener.request_timeout_s = REQUEST_TIMEOUT_S
    spark.streams.addListener(listener)
    try:
        query, connector, source = _first_batch_published(spark, daemon, listener, tmp_path)
        with paused(daemon), caplog.at_level(logging.WARNING, logger="emulator.spark.listener"):
            append(source, lines_bytes(SECOND))
            query.processAllAvailable()  # batch 1 (c, d): its publish now waits for the daemon
            query.stop()
            assert listener.wait_for_termination(query, WAIT_S) is False
        # The daemon answers again; the request that hung is answered, and the publish sends nothing.
        with pytest.raises(HandoffError, match="the termination's publish was abandoned") as raised:
            listener.wait_for_termination(query, 60)
    finally:
        spark.streams.removeListener(listener)

    reasons = [e for e in listener.errors if "did not take the termination's publish" in e]
    assert len(reasons) == 1, listener.errors
    assert f"within {WAIT_S:g} s" in reasons[0] and daemon.url in reasons[0], reasons[0]
    assert "no write of it was sent, and none will be" in reasons[0], reasons[0]
    assert any(r.levelno == logging.WARNING and r.getMessage() == reasons[0] for r in caplog.records)
    assert "spark-handoff" in str(raised.value), "the handover names the command that publishes the batch"
    assert _position(daemon, connector, source) == len(lines_bytes(FIRST)), "nothing landed after the False"


class _PausesAtTheWrite(OffsetCommitListener):
    """Pauses the daemon as the next write is about to be sent (armed by the test): the write then
    waits, sent, for an answer that comes only once the daemon resumes."""

    def __init__(self, spark: SparkSession, url: str, daemon: DaemonProcess) -> None:
        super().__init__(spark, url=url)
        self.daemon = daemon
        self.armed = threading.Event()
        self.paused = threading.Event()

    @contextlib.contextmanager
    def _write_gate(self, query_id: str, connector: str) -> Iterator[None]:
        with super()._write_gate(query_id, connector):
            if self.armed.is_set() and not self.paused.is_set():
                assert self.daemon.proc is not None
                self.daemon.proc.send_signal(signal.SIGSTOP)
                self.paused.set()
            yield


def test_a_write_already_sent_when_the_wait_gives_up_is_named_and_reported_when_it_lands(
    spark: SparkSession, daemon_factory: DaemonFactory, tmp_path: Path
) -> None:
    daemon = daemon_factory()
    listener = _PausesAtTheWrite(spark, daemon.url, daemon)
    listener.request_timeout_s = REQUEST_TIMEOUT_S
    spark.streams.addListener(listener)
    try:
        query, connector, source = _first_batch_published(spark, daemon, listener, tmp_path)
        listener.armed.set()
        try:
            append(source, lines_bytes(SECOND))
            query.processAllAvailable()
            assert listener.paused.wait(30), "batch 1's write was never sent"
            query.stop()
            assert listener.wait_for_termination(query, WAIT_S) is False
        finally:
            assert daemon.proc is not None
            daemon.proc.send_signal(signal.SIGCONT)
        until(lambda: any("applied by the daemon after" in e for e in listener.errors), "the late write's report", 30)
    finally:
        spark.streams.removeListener(listener)

    reason = next(e for e in listener.errors if "did not take the termination's publish" in e)
    assert f"a write to connector {connector!r} was already sent and not answered" in reason, reason
    assert "the daemon may still apply it" in reason, reason
    late = next(e for e in listener.errors if "applied by the daemon after" in e)
    assert f"connector {connector!r}" in late, late
    assert _position(daemon, connector, source) == len(lines_bytes([*FIRST, *SECOND])), "the write sent did land"
