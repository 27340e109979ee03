"""A source connector's unclaimed write still on its way when the first claim on the topic is made
lands before that claim answers, never after it.

While nobody ever claimed on an offsets topic there is no claims store, and a write without a claim
epoch is appended at once, holding no connector lock (``KafkaOffsetLog.append_fenced`` and, from the
event loop, ``start_append_fenced``). The claim that creates the store cannot take a lock such a write
never held, so it waits for the writes of its connector that began store-less to be answered, as it
waits for a sink connector's group writes (``test_sink_claims_atomic.py``): by the count the log keeps
of them, which a write leaves only once its records were acknowledged or refused, or, for a write
whose answer came after its deadline, once the producer's late answer arrived.

The app runs in-process over a real broker (the session's Tansu), so the log's producer can be held
at will: the wrappers below stand in for ``OffsetsWriter.start`` / ``append`` and call the real
``append`` once the test opens their gate.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import httpx
import pytest

from emulator.logs.kafka.offsets_log import KafkaOffsetLog
from emulator.model.claims import Fence, held_message
from emulator.model.errors import WriteOutcomeUnknown
from emulator.model.records import Position
from tests.fixtures.broker import TANSU_TAIL_FETCH_WAIT_MS, TansuBroker
from tests.fixtures.in_process import in_thread
from tests.fixtures.waits import until
from tests.integration.connect_helpers import unique
from tests.integration.test_sink_claims_atomic import Daemon, claim, claim_while_held, daemon_on

pytestmark = pytest.mark.kafka

HOLD_S = 6.0
"""How long the write is held while the first claim is asked for: unfixed, that claim (which creates
the claims topic) answered within it, in about 2 s on Tansu."""
SHORT_WRITE_TIMEOUT_S = 3.0
"""``--write-timeout`` of the test whose write stays unanswered past the claim's deadline: room for a
first claim's creation of the claims topic (about 2 s on Tansu), and a fast test."""

Entries = list[tuple[bytes, bytes | None]]


class Gate:
    """Holds the writes of a Kafka log's producer until ``open``: each one, handed over by the log,
    waits for the gate and is then appended for real. ``note`` hears ``"write returned"`` once the real
    append returned, before the log learns of it."""

    def __init__(self, log: KafkaOffsetLog, note: Callable[[str], None]) -> None:
        self.writer = log._writer
        self.real_append = self.writer.append
        self.note = note
        self.entered = threading.Event()
        self.open = threading.Event()
        self.calls = 0

    def _held(self, checked: Entries) -> list[Position]:
        self.calls += 1
        self.entered.set()
        assert self.open.wait(60), "the test never opened the gate"
        try:
            return self.real_append(checked, 30.0)
        finally:
            self.note("write returned")

    def _pending(self, checked: Entries) -> Future[list[Position]]:
        """The write's outcome, completed on a thread of its own once the gate opened (records with
        the producer and not acknowledged yet, as far as the log can tell)."""
        outcome: Future[list[Position]] = Future()
        outcome.set_running_or_notify_cancel()  # records handed over cannot be taken back

        def run() -> None:
            try:
                positions = self._held(checked)
            except BaseException as exc:
                outcome.set_exception(exc)
            else:
                outcome.set_result(positions)

        threading.Thread(target=run, daemon=True).start()
        return outcome

    def hold_started(self) -> None:
        """``OffsetsWriter.start``: hands the records over at once; they are acknowledged later."""
        self.writer.start = self._pending  # type: ignore[method-assign]

    def hold_blocking(self) -> None:
        """``OffsetsWriter.append``: blocks until the gate opened and the records were acknowledged;
        ``start`` declines, as for a big write, so the daemon appends from a worker thread."""
        self.writer.start = lambda checked: None  # type: ignore[method-assign]
        self.writer.append = lambda checked, timeout_s: self._held(checked)  # type: ignore[method-assign]

    def hold_late(self) -> None:
        """``OffsetsWriter.append`` whose deadline passes first: ``WriteOutcomeUnknown`` after
        ``timeout_s``, with the outcome that completes once the gate opened."""
        self.writer.start = lambda checked: None  # type: ignore[method-assign]

        def late(checked: Entries, timeout_s: float) -> list[Position]:
            outcome = self._pending(checked)
            time.sleep(timeout_s)
            raise WriteOutcomeUnknown("not acknowledged within the deadline (held by the test)", outcome)

        self.writer.append = late  # type: ignore[method-assign]


def source_body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": position}}]}


def positions_read(daemon: Daemon, connector: str) -> list[Any]:
    answer = httpx.get(daemon.offsets_url(connector), timeout=30)
    assert answer.status_code == 200, answer.text
    return [entry["offset"]["position"] for entry in answer.json()["offsets"]]


@pytest.mark.slow
@pytest.mark.parametrize("path", ["started", "worker"])
def test_the_first_claim_answers_only_after_an_unclaimed_source_write_on_its_way_was_acknowledged(
    kafka_broker: TansuBroker, path: str
) -> None:
    """``started``: the commit is handed to the producer from the event loop (the usual path while
    nobody claims); ``worker``: it is appended from a worker thread (a big write, a full queue)."""
    name = unique("source")
    with daemon_on(kafka_broker, write_timeout_s=30.0) as daemon:
        assert not daemon.log.may_be_claimed(name), "no claims store yet: this is the topic's first claim"
        gate = Gate(daemon.log, daemon.note)
        if path == "started":
            gate.hold_started()
        else:
            gate.hold_blocking()
        url = daemon.offsets_url(name)
        send = lambda: httpx.patch(url, params={"create": "true"}, json=source_body(151), timeout=60)  # noqa: E731

        claim_while_held(daemon, name, send, gate, "the source write never reached the producer")
        # The claim waited for the write: not answered while it was held, only once it was acknowledged.
        assert daemon.events.index("gate opened") < daemon.events.index("write returned"), daemon.events
        assert daemon.events.index("write returned") < daemon.events.index("claim answered"), daemon.events
        assert positions_read(daemon, name) == [151]  # it landed, before the claim

        # Now the connector is claimed: the same write without the epoch is refused, and never reaches the producer.
        calls = gate.calls
        holder = daemon.log.current_claim(name)
        assert holder is not None and holder.epoch == 1
        refused = httpx.patch(url, json=source_body(152), timeout=60)
        assert (refused.status_code, refused.json()["message"]) == (400, held_message(name, holder))
        assert gate.calls == calls
        assert positions_read(daemon, name) == [151]


@pytest.mark.slow
def test_the_first_claim_waits_for_an_unclaimed_source_write_answered_after_its_deadline(
    kafka_broker: TansuBroker,
) -> None:
    """On the log itself: the append's deadline passes (``WriteOutcomeUnknown``) while its records are
    with the producer; the claim that creates the store answers only once their outcome is known."""
    log = KafkaOffsetLog(
        kafka_broker.bootstrap,
        kafka_broker.unique_topic("source-claims"),
        partitions=3,
        tail_fetch_wait_ms=TANSU_TAIL_FETCH_WAIT_MS,
    )
    log.open()
    events: list[str] = []
    lock = threading.Lock()

    def note(event: str) -> None:
        with lock:
            events.append(event)

    try:
        name = unique("source")
        gate = Gate(log, note)
        gate.hold_late()
        key = json.dumps([name, {"filename": "/data/in.txt"}], separators=(",", ":")).encode()
        unknown: list[WriteOutcomeUnknown] = []

        def write() -> None:
            try:
                log.append_fenced(Fence(name, None), [(key, b'{"position":7}')], timeout_s=0.5)
            except WriteOutcomeUnknown as exc:
                unknown.append(exc)
            note("write answered")

        def take() -> None:
            log.claim(name, "spark-run")
            note("claim answered")

        writing = threading.Thread(target=write, daemon=True)
        writing.start()
        until(lambda: "write answered" in events, "the write's deadline to pass", 30)
        claiming = threading.Thread(target=take, daemon=True)
        claiming.start()
        claiming.join(HOLD_S)
        note("gate opened")
        gate.open.set()
        claiming.join(60)

        assert unknown and unknown[0].outcome is not None
        assert unknown[0].outcome.result(30) and unknown[0].outcome.exception() is None
        assert events == ["write answered", "gate opened", "write returned", "claim answered"], events
        holder = log.current_claim(name)
        assert holder is not None and holder.epoch == 1
    finally:
        log.close()


@pytest.mark.slow
def test_the_first_claim_refuses_with_log_timeout_when_an_unclaimed_source_write_is_unanswered_at_its_deadline(
    kafka_broker: TansuBroker,
) -> None:
    """The write's records are with the producer, unanswered, and may land until its
    ``message.timeout.ms`` (300 s, which the daemon leaves at librdkafka's default), longer than any
    request waits. The first claim waits for them only until its own deadline (``--write-timeout``),
    then answers 503 ``log_timeout`` saying nothing was claimed, and nothing is claimed later either.
    It answered ``write_outcome_unknown`` at the deadline ("it may still happen") and went on waiting
    in the background, for the log's 30 s, to claim once the write was answered, with nobody told.

    Through the daemon the claim now waits for the connector's write section, which the write keeps
    until the broker answered it, before it reaches the log: so the refusal is the section's (the
    log's own, naming ``message.timeout.ms``, answers a claim made on the log directly, above)."""
    name = unique("source")
    with daemon_on(kafka_broker, write_timeout_s=SHORT_WRITE_TIMEOUT_S) as daemon:
        assert not daemon.log.may_be_claimed(name), "no claims store yet: this is the topic's first claim"
        gate = Gate(daemon.log, daemon.note)
        gate.hold_started()
        url = daemon.offsets_url(name)
        send = lambda: httpx.patch(url, params={"create": "true"}, json=source_body(151), timeout=60)  # noqa: E731
        writing, written = in_thread(send, daemon, "write answered")
        try:
            assert gate.entered.wait(30), "the source write never reached the producer"
            sent = time.monotonic()
            refused = claim(daemon, name)
            took = time.monotonic() - sent
            assert refused.status_code == 503, refused.text
            assert refused.headers["X-Connect-Offsets-Error"] == "log_timeout", refused.text
            assert refused.headers["Retry-After"] == "1"
            message = refused.json()["message"]
            assert message.startswith(f"connector {name}'s previous write still held it after 3 s"), message
            assert message.endswith("; nothing was claimed"), message
            assert took < SHORT_WRITE_TIMEOUT_S + 2.0, f"the claim answered after {took:.1f} s"
            assert httpx.get(f"{daemon.url}/connectors/{name}/claim", timeout=30).status_code == 404
        finally:
            daemon.note("gate opened")
            gate.open.set()
        writing.join(60)
        assert written, "the source write was never answered"
        until(lambda: positions_read(daemon, name) == [151], "the held write to land once answered", 30)

        # Nothing was claimed behind the write: the claim asked now is the connector's first.
        again = claim(daemon, name)
        assert again.status_code == 200, again.text
        assert again.json()["epoch"] == 1, again.json()
