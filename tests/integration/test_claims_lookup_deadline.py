"""An import and a rollback look up claims within their own ``--write-timeout``.

Before writing, each checks that no claim holds the connector (on Kafka: the claims topic read to its
end). They gave that lookup no deadline, so the claims store's own 30 s applied: with the broker
stalled after their read of the offsets log, an import or a rollback answered 503 after ~31 s with a
5 s ``--write-timeout``, one connector after another for an import (QA on Kafka under faults). PATCH
already gave it the time left.

The daemon runs in-process on the embedded log, whose claims lookup is made to hang as a stalled
Kafka claims topic does (until the time it is given, 30 s when given none), and that log cannot tell
that a connector is unclaimed without the lookup (``may_be_claimed``), as a Kafka claims topic it has
not read cannot.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from emulator.model.errors import LogTimeout
from tests.fixtures.in_process import InProcessDaemon, embedded_in_process
from tests.integration.connect_helpers import unique

WRITE_TIMEOUT_S = 1.0
STORE_OWN_TIMEOUT_S = 30.0


@pytest.fixture
def stalled_claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[InProcessDaemon, str, str]]:
    """A daemon whose claims lookups hang; a connector with two writes; a time between them (a rollback
    to it changes something)."""
    with embedded_in_process(tmp_path, WRITE_TIMEOUT_S) as daemon, httpx.Client(timeout=60) as http:
        connector = unique("claims-stalled")
        body = {"offsets": [{"partition": {"f": "a"}, "offset": {"p": 1}}]}
        assert http.patch(daemon.offsets_url(connector), params={"create": "true"}, json=body).status_code == 200
        at_ms = time.time_ns() // 1_000_000
        time.sleep(0.02)
        later = {"offsets": [{"partition": {"f": "a"}, "offset": {"p": 2}}]}
        assert http.patch(daemon.offsets_url(connector), json=later).status_code == 200

        def stalled(name: str, timeout_s: float | None = None) -> None:
            time.sleep(STORE_OWN_TIMEOUT_S if timeout_s is None else timeout_s)
            raise LogTimeout(f"the claims store was not read to its end within {timeout_s} s")

        log = daemon.runtime.records._guard._log  # the log the write guard asks (the same as runtime.log)
        monkeypatch.setattr(log, "current_claim", stalled)
        monkeypatch.setattr(log, "may_be_claimed", lambda name: True)  # as a Kafka claims topic not read yet
        yield daemon, connector, str(at_ms)


def answered_503_in_time(answer: httpx.Response, took: float) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["X-Connect-Offsets-Error"] == "log_timeout", answer.headers
    assert "Checking claims took longer than 1 s (--write-timeout)" in answer.json()["message"]
    assert took < WRITE_TIMEOUT_S + 2, f"answered after {took:.1f} s with --write-timeout 1s"


@pytest.mark.slow
def test_an_import_looks_up_claims_within_its_write_timeout(stalled_claims: tuple[InProcessDaemon, str, str]) -> None:
    daemon, connector, _ = stalled_claims
    key = base64.b64encode(f'["{connector}",{{"f":"b"}}]'.encode()).decode()
    record = {"key": key, "value": base64.b64encode(b'{"p":9}').decode()}
    sent = time.monotonic()
    answer = httpx.post(f"{daemon.url}/offsets/records", json={"records": [record]}, timeout=60)
    answered_503_in_time(answer, time.monotonic() - sent)


@pytest.mark.slow
@pytest.mark.parametrize("dry_run", ["true", "false"])
def test_a_rollback_looks_up_claims_within_its_write_timeout(
    stalled_claims: tuple[InProcessDaemon, str, str], dry_run: str
) -> None:
    daemon, connector, at_ms = stalled_claims
    sent = time.monotonic()
    answer = httpx.post(
        f"{daemon.offsets_url(connector)}/rollback", params={"to": at_ms, "dry_run": dry_run}, json={}, timeout=60
    )
    answered_503_in_time(answer, time.monotonic() - sent)
