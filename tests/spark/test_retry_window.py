"""Option ``retryFor``: how long a query's start waits for a daemon that cannot answer yet.

A daemon restoring a big log after a restart answers ``not_ready`` with ``Retry-After`` for longer
than the client's 30 s; a query started beside it fails unless told to wait longer
(``emulator.client.retry_window``). The readers are built as Spark builds them, from the options,
and asked for their start by the test; the daemon is the starting port's own app.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from emulator.server.starting import StartingApp, Startup
from emulator.spark.file_source import ConnectFileError, ConnectFileStreamReader
from emulator.spark.kafka_source import ConnectKafkaStreamReader
from emulator.spark.options import DaemonAccess, OptionError
from tests.fixtures.asgi import served
from tests.fixtures.daemon import daemon_starting_later

pytestmark = [pytest.mark.spark]


def _restoring() -> StartingApp:
    startup = Startup()
    startup.begin("opening the offsets log kafka://10.0.0.9:9092/connect-offsets")
    return StartingApp(startup, show_reason=True)


def _start_s(url: str, retry_for: str) -> tuple[float, str]:
    reader = ConnectFileStreamReader({"url": url, "connector": "window", "file": "/tmp/x", "retryFor": retry_for})
    started = time.monotonic()
    with pytest.raises(ConnectFileError) as failed:
        reader.initialOffset()
    return time.monotonic() - started, str(failed.value)


@pytest.mark.slow
def test_a_querys_start_waits_as_long_as_retry_for_says() -> None:
    with served(_restoring()) as url:
        at_once, message = _start_s(url, "0")
        waited, _ = _start_s(url, "1500ms")
    assert at_once < 0.5
    assert message.startswith(f"cannot read connector window's offsets from the daemon at {url}: ")
    assert "the daemon is starting" in message
    assert 1.0 <= waited < 3.0


@pytest.mark.parametrize(
    ("reader", "own"),
    [(ConnectFileStreamReader, {"file": "/tmp/x"}), (ConnectKafkaStreamReader, {"topics": "t"})],
)
def test_a_retry_for_that_is_not_a_duration_is_refused_naming_the_option(reader: type, own: dict[str, str]) -> None:
    options = {"connector": "c", **own, "retryFor": "soon"}
    with pytest.raises(OptionError) as refused:
        reader(options)
    assert str(refused.value) == (
        "option retryFor must be a duration such as 10m, 30s, 500ms, 0 (ask once), or forever (no limit), got 'soon'"
    )


@pytest.mark.slow
def test_a_query_started_while_its_daemon_restarts_starts_once_it_listens(tmp_path: Path) -> None:
    """Between a daemon's stop and its start nothing listens: with retryFor the query waits for it."""
    with daemon_starting_later(tmp_path, after_s=1.0) as url:
        reader = ConnectFileStreamReader({"url": url, "connector": "restarting", "file": "/tmp/x", "retryFor": "30s"})
        started = time.monotonic()
        start = reader.initialOffset()
    assert start is not None and time.monotonic() - started >= 1.0


def test_an_option_a_source_does_not_take_is_refused_with_the_closest_one() -> None:
    """Spark passes options through without a word: a misspelt limit read the whole file at once."""
    with pytest.raises(OptionError) as refused:
        ConnectFileStreamReader({"connector": "c", "file": "/tmp/x", "maxlinespertriger": "5"})  # Spark lower-cases
    assert str(refused.value).startswith(
        "connect-file has no option 'maxlinespertriger'; did you mean maxLinesPerTrigger? "
        "(it takes ca, claimEpoch, clientCert,"
    )
    kafka = {"connector": "c", "topics": "t", "kafka.bootstrap.servers": "h:9092", "kafka.security.protocol": "SSL"}
    assert ConnectKafkaStreamReader(kafka).config["security.protocol"] == "SSL"  # kafka.* passes


def test_a_retry_for_of_forever_waits_without_limit() -> None:
    """``retryFor=forever`` (also never) meant "no retries"; now it means no limit."""
    for word in ("forever", "never"):
        access = DaemonAccess.of({"url": "http://127.0.0.1:9", "retryFor": word})
        assert access.retry_for_s == math.inf, word
    assert DaemonAccess.of({"url": "http://127.0.0.1:9", "retryFor": "0"}).retry_for_s == 0.0
