"""A connector's own offsets topic (KIP-618) is opened while the daemon runs, again every few seconds
after a failure, each time waiting for the Kafka cluster for at most ``--write-timeout``. When the
cluster does not answer (an outage after start-up), the progress line and the refusal name that
setting: not ``--startup-timeout``, which bounds only the worker log's opening and is unset by default
(QA saw "still trying, 2 s so far of 10 s (--startup-timeout)" from a daemon started without it).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.logs.base import LogConfigError
from emulator.server.settings import Settings
from emulator.server.wiring import topic_store_opener

pytestmark = [pytest.mark.slow]  # waits out a 5 s deadline


@pytest.fixture
def silent_broker_address() -> Iterator[str]:
    """A loopback port bound but not listening: every connection to it is refused, as a broker that is down."""
    with socket.socket() as reserved:
        for port in range(47860, 47900):
            try:
                reserved.bind(("127.0.0.1", port))
            except OSError:
                continue
            yield f"127.0.0.1:{port}"
            return
        pytest.fail("no free port in 47860-47899")


def test_a_connector_topic_the_cluster_does_not_answer_for_names_write_timeout_as_its_deadline(
    silent_broker_address: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(data_dir=tmp_path, bootstrap_servers=silent_broker_address, write_timeout_s=5.0, history=False)
    open_store = topic_store_opener(settings)

    with caplog.at_level(logging.WARNING, logger="emulator.logs.kafka.watch"), pytest.raises(LogConfigError) as refused:
        open_store("deadline-own-offsets", False)

    assert (
        f"cannot reach the Kafka cluster at {silent_broker_address} (--bootstrap-servers) within 5 s (--write-timeout)"
        in str(refused.value)
    )
    progress = [r.getMessage() for r in caplog.records if "still trying" in r.getMessage()]
    assert progress, caplog.text
    assert all(line.endswith("so far of 5 s (--write-timeout)") for line in progress), progress
    assert "--startup-timeout" not in caplog.text + str(refused.value)
