"""A sink connector's group write is atomic with claims made through the same daemon.

A sink's offsets are its consumer group's, written through the admin client, not records of the
offsets log; the daemon checks the connector's claim under the claims' per-connector lock and keeps
that lock until the admin call returned (``OffsetLog.write_fenced``), as ``append_unclaimed`` does for
a source's records. So a claim made through this daemon while such a write is on its way answers
only after it returned, never while it may still land behind the claim.

The app runs in-process over a real broker (a Kafka offsets log and ``SinkOffsets`` on the session's
Tansu), so the group's admin call can be held at will: the wrapper below waits on an event before it
calls the real one, and notes when that returned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from emulator.logs.kafka.offsets_log import KafkaOffsetLog
from emulator.model.claims import Fence, Fenced, fenced_message, held_message
from emulator.model.connectors import NoConnectCluster
from emulator.model.errors import ClaimHeld
from emulator.server.wiring import assemble_runtime, close_runtime, make_app, start_reading
from emulator.service.sinks import SinkOffsets
from emulator.view.offset_view import OffsetView
from tests.fixtures.asgi import served
from tests.fixtures.broker import TANSU_TAIL_FETCH_WAIT_MS, TansuBroker
from tests.fixtures.in_process import InProcessDaemon, in_thread
from tests.fixtures.waits import until
from tests.integration.connect_helpers import unique

pytestmark = pytest.mark.kafka

NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: the group has no committed offset there
HOLD_S = 6.0
"""How long the group's admin call is held while a claim is asked for: unfixed, the claim answered
within it (a first claim, which creates the claims topic, took about 2 s on Tansu)."""


@dataclass(kw_only=True)
class Daemon(InProcessDaemon):
    """The in-process daemon on Kafka, with the log and sink offsets the gates wrap."""

    log: KafkaOffsetLog
    sinks: SinkOffsets


class Gate:
    """Wraps one admin call of the daemon's ``ConsumerGroups``: it waits for ``open`` first, and the
    daemon's event list gets ``"<name> returned"`` once the real call has returned."""

    def __init__(self, daemon: Daemon, name: str) -> None:
        self.daemon, self.name = daemon, name
        self.real: Callable[..., Any] = getattr(daemon.sinks._groups, name)
        self.entered = threading.Event()
        self.open = threading.Event()
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        self.entered.set()
        assert self.open.wait(60), "the test never opened the gate"
        try:
            return self.real(*args)
        finally:
            self.daemon.note(f"{self.name} returned")


@contextmanager
def daemon_on(broker: TansuBroker, write_timeout_s: float) -> Iterator[Daemon]:
    log = KafkaOffsetLog(
        broker.bootstrap, broker.unique_topic("sink-claims"), partitions=3, tail_fetch_wait_ms=TANSU_TAIL_FETCH_WAIT_MS
    )
    log.open()
    sinks = SinkOffsets(broker.bootstrap, timeout_s=write_timeout_s)
    runtime = assemble_runtime(log, OffsetView(), NoConnectCluster(), sinks=sinks, write_timeout_s=write_timeout_s)
    try:
        start_reading(runtime)
        with served(make_app(runtime, reading_started=True)) as url:
            until(lambda: httpx.get(f"{url}/readyz").status_code == 200, "the daemon to be ready", 30)
            yield Daemon(url=url, runtime=runtime, log=log, sinks=sinks)
    finally:
        close_runtime(runtime, None)


def committed(broker: TansuBroker, group: str, topic: str) -> dict[int, int | None]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "log_level": 0})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=15)
        return {tp.partition: (None if tp.offset == NO_OFFSET else tp.offset) for tp in found}
    finally:
        consumer.close()


def entry(topic: str, partition: int, offset: int) -> dict[str, Any]:
    return {"partition": {"kafka_topic": topic, "kafka_partition": partition}, "offset": {"kafka_offset": offset}}


def claim(daemon: Daemon, connector: str, owner: str = "spark-run") -> httpx.Response:
    return httpx.post(f"{daemon.url}/connectors/{connector}/claim", json={"owner": owner}, timeout=60)


def claim_while_held(daemon: Daemon, name: str, send: Callable[[], httpx.Response], gate: Any, stuck: str) -> None:
    """``send`` a write whose log call ``gate`` holds, claim ``name`` meanwhile, keep the write held
    ``HOLD_S``, then let it go: both answer 200 and the claim gets epoch 1 (the order of the events
    is for the caller to assert). ``stuck``: the failure when the write never reached the gate."""
    writing, written = in_thread(send, daemon, "write answered")
    assert gate.entered.wait(30), stuck
    claiming, claimed = in_thread(lambda: claim(daemon, name), daemon, "claim answered")
    claiming.join(HOLD_S)
    daemon.note("gate opened")
    gate.open.set()
    writing.join(60)
    claiming.join(60)

    assert written and written[0].status_code == 200, written and written[0].text
    assert claimed and claimed[0].status_code == 200, claimed and claimed[0].text
    assert claimed[0].json()["epoch"] == 1


def open_claims_store(daemon: Daemon) -> None:
    """A claim (on another connector) and its release: the claims topic exists from then on."""
    other = unique("other")
    made = claim(daemon, other)
    assert made.status_code == 200, made.text
    released = httpx.delete(f"{daemon.url}/connectors/{other}/claim", params={"epoch": made.json()["epoch"]})
    assert released.status_code == 200, released.text


@pytest.mark.slow
@pytest.mark.parametrize("request_kind", ["patch", "delete"])
@pytest.mark.parametrize("first_claim", [True, False], ids=["first-claim-on-topic", "claims-topic-exists"])
def test_a_claim_answers_only_after_an_unclaimed_sink_write_on_its_way_returned(
    kafka_broker: TansuBroker, request_kind: str, first_claim: bool
) -> None:
    topic = unique("orders")
    kafka_broker.create_topic(topic, 3)
    name = unique("sink")
    group = f"connect-{name}"
    with daemon_on(kafka_broker, write_timeout_s=30.0) as daemon:
        if not first_claim:
            open_claims_store(daemon)
        url = daemon.offsets_url(name)
        send: Callable[[], httpx.Response]
        if request_kind == "patch":
            gate = Gate(daemon, "commit")
            send = lambda: httpx.patch(  # noqa: E731
                url, params={"kind": "sink"}, json={"offsets": [entry(topic, 1, 6)]}, timeout=60
            )
            expected = {0: None, 1: 6, 2: None}
        else:
            seeded = httpx.patch(url, params={"kind": "sink"}, json={"offsets": [entry(topic, 0, 4)]}, timeout=60)
            assert seeded.status_code == 200, seeded.text
            gate = Gate(daemon, "delete_group")
            send = lambda: httpx.delete(url, params={"kind": "sink"}, timeout=60)  # noqa: E731
            expected = {0: None, 1: None, 2: None}
        setattr(daemon.sinks._groups, gate.name, gate)

        claim_while_held(daemon, name, send, gate, "the group write never reached the admin call")
        # The claim waited for the write: not answered while the admin call was held, only after it returned.
        assert daemon.events.index("gate opened") < daemon.events.index(f"{gate.name} returned")
        assert daemon.events.index(f"{gate.name} returned") < daemon.events.index("claim answered"), daemon.events
        assert committed(kafka_broker, group, topic) == expected  # the write landed, before the claim

        # Now the connector is claimed: the same write without the epoch is refused, and never reaches the group.
        calls = gate.calls
        holder = daemon.log.current_claim(name)
        assert holder is not None and holder.epoch == 1
        refused = send()
        assert (refused.status_code, refused.json()["message"]) == (400, held_message(name, holder))
        assert gate.calls == calls


@pytest.mark.slow
def test_a_sink_write_answered_late_keeps_the_connector_until_the_admin_call_returned(
    kafka_broker: TansuBroker,
) -> None:
    """The request's deadline passes (503, outcome unknown) while the admin call is held: the connector
    stays locked until it returned (its write section, and the claims' connector lock), so the next
    write waits at most its own deadline (503, nothing written) and a claim answers only once the late
    write has landed."""
    topic = unique("orders")
    kafka_broker.create_topic(topic, 3)
    name = unique("sink")
    with daemon_on(kafka_broker, write_timeout_s=2.0) as daemon:
        open_claims_store(daemon)
        gate = Gate(daemon, "commit")
        setattr(daemon.sinks._groups, gate.name, gate)
        url = daemon.offsets_url(name)
        body = {"offsets": [entry(topic, 2, 9)]}

        late = httpx.patch(url, params={"kind": "sink"}, json=body, timeout=60)
        assert late.status_code == 503, late.text
        assert "may still happen" in late.json()["message"]
        assert gate.calls == 1

        started = time.monotonic()
        waiting = httpx.patch(url, params={"kind": "sink"}, json=body, timeout=60)
        assert waiting.status_code == 503, waiting.text
        assert waiting.json()["message"] == (  # the connector's write section, kept by the late write
            f"connector {name}'s previous write still held it after 2 s (--write-timeout): that write has not "
            "finished (it waits for its log's answer, a sink group's admin call on the broker, or a rollback's "
            "read of the history), or a claim of it is still being made; nothing was written"
        )
        assert time.monotonic() - started >= 1.0, "it waited for the lock within its own deadline"
        assert gate.calls == 1, "the waiting write never reached the group"

        claiming, claimed = in_thread(lambda: claim(daemon, name), daemon, "claim answered")
        claiming.join(0.8)  # within the claim's own 2 s: unfixed, a claim on an open claims topic answered by then
        daemon.note("gate opened")
        gate.open.set()
        claiming.join(60)
        assert claimed and claimed[0].status_code == 200, claimed and claimed[0].text
        assert daemon.events == ["gate opened", "commit returned", "claim answered"], daemon.events
        assert committed(kafka_broker, f"connect-{name}", topic) == {0: None, 1: None, 2: 9}


@pytest.mark.slow
def test_a_stale_or_missing_epoch_is_refused_under_the_connectors_lock(kafka_broker: TansuBroker) -> None:
    """The log's own check, after the daemon's fail-fast one: a write whose epoch was current when the
    daemon checked, but not when the lock is taken, never reaches the group."""
    topic = unique("orders")
    kafka_broker.create_topic(topic, 3)
    name = unique("sink")
    with daemon_on(kafka_broker, write_timeout_s=30.0) as daemon:
        first = claim(daemon, name).json()["epoch"]
        second = claim(daemon, name).json()["epoch"]
        assert (first, second) == (1, 2)
        current = daemon.log.current_claim(name)
        assert current is not None
        ran: list[str] = []

        def write() -> str:
            ran.append("ran")
            return "written"

        with pytest.raises(Fenced) as fenced:
            daemon.log.write_fenced(Fence(name, first), write, 5.0)
        assert fenced.value.message == fenced_message(name, first, current)
        with pytest.raises(ClaimHeld) as held:
            daemon.log.write_fenced(Fence(name, None), write, 5.0)
        assert held.value.message == held_message(name, current)
        assert ran == []
        assert daemon.log.write_fenced(Fence(name, second), write, 5.0) == "written"

        # Through the API: the stale epoch answers 409 with the same words and commits nothing.
        stale = httpx.patch(
            daemon.offsets_url(name),
            params={"kind": "sink", "claim_epoch": first},
            json={"offsets": [entry(topic, 0, 3)]},
            timeout=60,
        )
        assert (stale.status_code, stale.json()["message"]) == (409, fenced_message(name, first, current))
        holder = httpx.patch(
            daemon.offsets_url(name),
            params={"kind": "sink", "claim_epoch": second},
            json={"offsets": [entry(topic, 0, 5)]},
            timeout=60,
        )
        assert holder.status_code == 200, holder.text
        assert committed(kafka_broker, f"connect-{name}", topic) == {0: 5, 1: None, 2: None}
