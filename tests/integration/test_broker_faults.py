"""Broker faults: a stalled broker (SIGSTOP, then SIGCONT), an unreachable one at start-up.

These tests pause their OWN Tansu (pausing the session's broker would stall every other test). The
stall test measures the timeline quoted in docs/operations.md ("Faults"):
``pytest tests/integration/test_broker_faults.py -s -p no:cacheprovider -k stall``.

What a stall must look like from outside (issue 8): every write answers within ``--write-timeout``
(503 + ``Retry-After``, saying whether anything may have been written); ``/readyz`` answers 503 with
the reason while the broker does not answer and ``/healthz`` stays 200; when the broker returns,
writes resume within seconds, nothing acknowledged is lost, and a write that timed out is applied
exactly once or not at all, which a retry with the same commit sequence (and a later read) tells.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient

from emulator.client.http import Auth, OffsetsClient
from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.kafka.offsets_log import KafkaOffsetLog
from emulator.logs.kafka.topics import wait_for_partition_count
from emulator.model.errors import LogConfigError, LogTimeout
from tests.fixtures.broker import TansuBroker, _resolve_tansu, own_tansu
from tests.fixtures.cli import run_cli
from tests.fixtures.daemon import DaemonFactory, DaemonProcess, free_port
from tests.fixtures.processes import kill_process, spawn_tansu, wait_ready
from tests.fixtures.waits import until
from tests.integration.raw_log import read_topic
from tests.integration.scrape import scrape, scrape_until

pytestmark = pytest.mark.kafka

PARTITION = {"filename": "/data/stall.txt"}
STALL_S = 20.0
WRITE_TIMEOUT_S = 10.0  # the default of --write-timeout: the test starts daemons without the flag


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """A Tansu for this module alone: pausing it stalls nobody else's test."""
    with own_tansu(tmp_path_factory.mktemp("tansu-faults")) as broker:
        yield broker


@dataclass
class Timeline:
    """Every answer seen, in seconds since the test's clock started."""

    t0: float = field(default_factory=time.monotonic)
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def add(self, **event: Any) -> None:
        with self.lock:
            self.events.append(event)

    def of(self, what: str) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["what"] == what]


def body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": PARTITION, "offset": {"position": position}}]}


def probe(url: str, timeline: Timeline, stop: threading.Event) -> None:
    """``/readyz`` and ``/healthz`` four times a second, each with a 2 s deadline."""
    with httpx.Client(base_url=url, timeout=2.0) as http:
        while not stop.is_set():
            for path in ("/readyz", "/healthz"):
                sent = timeline.now()
                try:
                    answer = http.get(path)
                    status, reason = (
                        answer.status_code,
                        answer.json().get("unreachable") or answer.json().get("message"),
                    )
                except httpx.HTTPError as exc:
                    status, reason = 0, repr(exc)
                timeline.add(what=path, sent=sent, answered=timeline.now(), status=status, reason=reason)
            stop.wait(0.25)


def sequenced_writer(url: str, connector: str, timeline: Timeline, stop: threading.Event) -> None:
    """Commits 1, 2, 3, ... with sequence = position; after a 503 it retries the SAME commit, as a
    careful client does (Retry-After), so a commit is never skipped and never meant twice."""
    with httpx.Client(base_url=url, timeout=60.0) as http:
        n = 1
        while not stop.is_set():
            sent = timeline.now()
            answer = http.patch(
                f"/connectors/{connector}/offsets",
                params={"sequence_source": "stall", "sequence": str(n)},
                json=body(n),
            )
            payload = answer.json()
            timeline.add(
                what="PATCH",
                n=n,
                sent=sent,
                answered=timeline.now(),
                status=answer.status_code,
                kind=answer.headers.get("X-Connect-Offsets-Error"),
                retry_after=answer.headers.get("Retry-After"),
                dropped=payload.get("dropped"),
                message=payload.get("message"),
            )
            if answer.status_code == 200:
                n += 1
                stop.wait(0.2)
            else:
                stop.wait(float(answer.headers.get("Retry-After", "1")))


def _answer(e: dict[str, Any]) -> tuple[Any, ...]:
    """(commit, sent at, took, status, kind or dropped) for the summary line."""
    return e["n"], round(e["sent"], 1), round(e["answered"] - e["sent"], 1), e["status"], e["kind"] or e["dropped"]


@pytest.mark.slow
def test_a_20_s_broker_stall_timeline(own_broker: TansuBroker, daemon_factory: DaemonFactory) -> None:
    topic = own_broker.unique_topic("stall")
    daemon = daemon_factory(
        "--bootstrap-servers", own_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3"
    )
    connector, retried = f"stall-{uuid.uuid4().hex[:8]}", f"stall-client-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(daemon.url) as client:
        client.alter(connector, body(0), create=True)
        client.alter(retried, body(0), create=True)

    timeline, stop = Timeline(), threading.Event()
    threads = [
        threading.Thread(target=probe, args=(daemon.url, timeline, stop)),
        threading.Thread(target=sequenced_writer, args=(daemon.url, connector, timeline, stop)),
    ]
    for thread in threads:
        thread.start()
    client_answer: dict[str, Any] = {}

    def retrying_client() -> None:
        """The Python client retries a sequenced commit by itself after a 503 (docs/operations.md)."""
        with OffsetsClient(daemon.url, timeout_s=60, retry_for_s=60) as client:
            started = timeline.now()
            client_answer["answer"] = client.alter(retried, body(7), auth=Auth(sequence_source="client", sequence=7))
            client_answer["took"] = (started, timeline.now())

    try:
        time.sleep(1.0)
        paused_at = timeline.now()
        with own_broker.paused():
            time.sleep(2.0)
            client_thread = threading.Thread(target=retrying_client)
            client_thread.start()
            time.sleep(STALL_S - 2.0)
            resumed_at = timeline.now()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            after = [e for e in timeline.of("PATCH") if e["sent"] > resumed_at and e["status"] == 200]
            if len(after) >= 5:
                break
            time.sleep(0.2)
        time.sleep(1.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(70)
    client_thread.join(70)

    patches, ready, health = timeline.of("PATCH"), timeline.of("/readyz"), timeline.of("/healthz")
    stalled = [e for e in patches if e["answered"] >= paused_at and e["sent"] < resumed_at]
    first_503 = min((e["answered"] for e in stalled if e["status"] == 503), default=None)
    not_ready = [e for e in ready if e["status"] == 503 and paused_at <= e["sent"] <= resumed_at]
    ready_again = min((e["answered"] for e in ready if e["sent"] > resumed_at and e["status"] == 200), default=None)
    resumed_write = min(
        (e["answered"] for e in patches if e["answered"] > resumed_at and e["status"] == 200), default=None
    )
    summary = (
        f"stall {paused_at:.1f}-{resumed_at:.1f} s; PATCH answers during it: "
        f"{[_answer(e) for e in stalled]}; "
        f"first 503 at {first_503}; /readyz 503 from "
        f"{min((e['answered'] for e in not_ready), default=None)} to {ready_again}; first 200 PATCH after resume "
        f"at {resumed_write}; client: {client_answer}"
    )
    print(summary)

    assert all(e["status"] == 200 for e in health), f"/healthz is about the process: {summary}"
    assert not [e for e in patches if e["status"] not in (200, 503)], f"only 200 or 503, never a 500: {summary}"
    assert all(e["answered"] - e["sent"] <= WRITE_TIMEOUT_S + 3 for e in patches), (
        f"every write has a deadline: {summary}"
    )
    for e in patches:
        if e["status"] == 503:
            assert e["kind"] in ("write_outcome_unknown", "log_timeout") and e["retry_after"], summary
    assert first_503 is not None, summary
    assert not_ready and min(e["answered"] for e in not_ready) <= paused_at + 5, (
        f"/readyz says so within 5 s: {summary}"
    )
    assert all(e["reason"] and own_broker.bootstrap in e["reason"] for e in not_ready), summary
    assert ready_again is not None and ready_again <= resumed_at + 5, summary
    assert resumed_write is not None and resumed_write <= resumed_at + 5, f"writes resume within seconds: {summary}"

    # The log, in log order: each commit at most once, increasing; every acknowledged one there.
    in_log = read_topic(own_broker.bootstrap, topic, 3, encode_key(connector, PARTITION))
    assert in_log == sorted(set(in_log)), f"applied at most once, never backwards: {in_log}"
    acknowledged = {e["n"] for e in patches if e["status"] == 200 and not e["dropped"]}
    replays = {e["n"] for e in patches if e["status"] == 200 and e["dropped"]}
    assert acknowledged <= set(in_log), f"nothing acknowledged is lost: {sorted(acknowledged - set(in_log))}"
    for n in replays:  # the retry of a commit whose first attempt landed late: it says so
        [entry] = next(e for e in patches if e["n"] == n and e["dropped"])["dropped"]
        assert entry["reason"] == f"stale sequence {n} from source 'stall': {n} was already applied"
        assert n in in_log
    assert set(in_log) == {0} | acknowledged | replays, "only commits some answer accounted for reached the log"
    with OffsetsClient(daemon.url) as client:
        [row] = client.offsets(connector, fresh=True)
        assert row["offset"]["position"] == in_log[-1] == max(acknowledged | replays)
        assert client.offsets(retried) == [{"partition": PARTITION, "offset": {"position": 7}}]
    assert read_topic(own_broker.bootstrap, topic, 3, encode_key(retried, PARTITION)) == [0, 7], (
        "the client's retried commit is in the log exactly once"
    )


def claimed_connector(
    broker: TansuBroker, daemon_factory: DaemonFactory, name: str, write_timeout: str
) -> tuple[str, DaemonProcess, str, int]:
    """A daemon on a topic of its own with ``--write-timeout``, and a connector at position 0
    claimed by ``stall-test``: (topic, daemon, connector, claim epoch)."""
    topic = broker.unique_topic(name)
    daemon = daemon_factory(
        "--bootstrap-servers", broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3",
        "--write-timeout", write_timeout,
    )  # fmt: skip
    connector = f"{name}-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(daemon.url) as client:
        client.alter(connector, body(0), create=True)
        epoch = int(client.claim(connector, "stall-test")["epoch"])
    return topic, daemon, connector, epoch


@pytest.mark.slow
def test_a_claimed_write_during_a_stall_is_answered_in_time_and_applied_at_most_once(
    own_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    topic, daemon, connector, epoch = claimed_connector(own_broker, daemon_factory, "stall-claimed", "5s")
    auth = {"claim_epoch": str(epoch), "sequence_source": "claimed", "sequence": "1"}
    with httpx.Client(base_url=daemon.url, timeout=30) as http:
        with own_broker.paused():
            sent = time.monotonic()
            answer = http.patch(f"/connectors/{connector}/offsets", params=auth, json=body(1))
            took = time.monotonic() - sent
            assert answer.status_code == 503, answer.text
            assert answer.headers["X-Connect-Offsets-Error"] in ("write_outcome_unknown", "log_timeout")
            assert answer.headers["Retry-After"] and took <= 5 + 3, took
            time.sleep(5)
        retry_deadline = time.monotonic() + 20
        while True:  # retry the same commit until the daemon can answer it
            retry = http.patch(f"/connectors/{connector}/offsets", params=auth, json=body(1))
            if retry.status_code != 503 or time.monotonic() > retry_deadline:
                break
            time.sleep(float(retry.headers.get("Retry-After", "1")))
    assert retry.status_code == 200, retry.text
    in_log = read_topic(own_broker.bootstrap, topic, 3, encode_key(connector, PARTITION), committed_only=True)
    assert in_log == [0, 1], f"the commit that timed out was applied exactly once: {in_log} ({retry.json()})"


@pytest.mark.slow
def test_serve_names_an_unreachable_broker_at_once_and_gives_up_when_asked(tmp_path: Path) -> None:
    """Nothing listens on the port: a line names the bootstrap servers within seconds (the daemon
    says so after one 2 s metadata attempt; the bounds below leave room for a loaded machine's
    interpreter start-up)."""
    bootstrap = f"127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "emulator.cli", "serve", "--bootstrap-servers", bootstrap]
    common = ["--port", str(free_port()), "--data-dir", str(tmp_path / "data")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    gives_up = subprocess.run(
        [*command, *common, "--startup-timeout", "3s"], capture_output=True, text=True, timeout=30, env=env
    )
    took = time.monotonic() - started
    assert gives_up.returncode == 2, gives_up.stderr[-2000:]
    assert took < 15, f"gave up after {took:.1f} s, asked for 3 s"
    last = gives_up.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot reach the Kafka cluster at " + bootstrap) and "--startup-timeout" in last

    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        keeps_trying = subprocess.Popen([*command, *common], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        started = time.monotonic()
        while time.monotonic() < started + 10 and f"the Kafka cluster at {bootstrap}" not in log_path.read_text():
            time.sleep(0.1)
        text = log_path.read_text()
        assert f"cannot reach the Kafka cluster at {bootstrap}" in text, f"no word within 10 s:\n{text[-2000:]}"
        print(f"unreachable broker named after {time.monotonic() - started:.1f} s (interpreter start-up included)")
        assert keeps_trying.poll() is None, "without --startup-timeout it keeps trying"
    finally:
        keeps_trying.send_signal(signal.SIGTERM)
        try:
            ended = keeps_trying.wait(10)
        except subprocess.TimeoutExpired:
            keeps_trying.kill()
            keeps_trying.wait(10)
            raise AssertionError("SIGTERM did not stop a daemon waiting for its broker within 10 s") from None
    assert ended == -signal.SIGTERM, f"ended by {ended}, not by the SIGTERM it was sent"
    stopped = f"WARNING emulator.server.starting: SIGTERM while the daemon starts (opening the offsets log kafka://{bootstrap}/"
    assert stopped in log_path.read_text(), "a stop during the start leaves a word in the log"


@pytest.mark.slow
def test_the_port_answers_while_the_broker_is_unreachable_and_the_daemon_serves_once_it_comes(
    tmp_path: Path, daemon_factory: DaemonFactory
) -> None:
    """Waiting for a cluster at start-up, the daemon is alive (``/healthz`` 200: a liveness probe must
    not restart it for its broker's absence) and says why it is not ready; once the broker answers,
    the daemon's own app takes over the port and serves, without a restart."""
    bootstrap = f"127.0.0.1:{free_port()}"
    topic = f"late-broker-{uuid.uuid4().hex[:8]}"
    metrics = f"http://127.0.0.1:{free_port()}"
    daemon = daemon_factory(
        "--bootstrap-servers",
        bootstrap,
        "--offsets-topic",
        topic,
        "--metrics-port",
        metrics.rsplit(":", 1)[1],
        wait_ready=False,
    )
    assert scrape(metrics).get("connect_offsets_ready") == 0, "the metrics port answers too: not ready"
    ready = httpx.get(f"{daemon.url}/readyz", timeout=5)
    assert ready.status_code == 503, ready.text
    assert ready.json()["starting"] is True and ready.json()["error_code"] == 503
    assert f"opening the offsets log kafka://{bootstrap}/{topic}" in ready.json()["unreachable"]
    # the first metadata request fails after 2 s; from then on the reason names what failed
    until(
        lambda: f"cannot reach the Kafka cluster at {bootstrap}" in httpx.get(f"{daemon.url}/readyz").json()["message"],
        "/readyz named the unreachable cluster",
    )
    write = httpx.patch(f"{daemon.url}/connectors/late/offsets?create=true", json={"offsets": []}, timeout=5)
    assert (write.status_code, write.headers["x-connect-offsets-error"], write.headers["retry-after"]) == (
        503,
        "not_ready",
        "1",
    )
    assert "the daemon is starting" in write.json()["message"]
    status = run_cli("status", "--url", daemon.url)
    assert status.returncode == 1, status.stderr
    first, why = status.stdout.splitlines()[:2]
    assert first == f"{daemon.url}: NOT READY", status.stdout
    assert why.startswith("  why: the daemon is starting: opening the offsets log"), status.stdout
    assert f"cannot reach the Kafka cluster at {bootstrap}" in why, status.stdout

    port = int(bootstrap.rsplit(":", 1)[1])
    broker = spawn_tansu(_resolve_tansu(), tmp_path / "tansu.log", port, port)
    try:
        problem = wait_ready(broker, bootstrap)
        if problem is not None:
            pytest.skip(f"could not start a broker on the port the daemon waits for ({problem}); another took it")
        daemon.wait_until("/readyz", 60)
        scrape_until(metrics, lambda samples: samples.get("connect_offsets_ready") == 1, "the daemon's own metrics")
        body = {"offsets": [{"partition": PARTITION, "offset": {"position": 3}}]}
        assert (
            httpx.patch(f"{daemon.url}/connectors/late/offsets?create=true", json=body, timeout=10).status_code == 200
        )
        assert httpx.get(f"{daemon.url}/connectors/late/offsets", timeout=10).json() == body
        assert "the daemon's app takes over the port" in daemon.log_tail(40)
    finally:
        daemon.stop()
        kill_process(broker)


@pytest.mark.slow
def test_a_claim_made_through_one_daemon_holds_off_writes_through_another(
    kafka_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """B never claimed and never saw the claims topic before A's claim: it learns of it in the
    background, and A's claim answers only once every watching daemon can have."""
    topic = kafka_broker.unique_topic("claims-across")
    args = ("--bootstrap-servers", kafka_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3")
    a, b = daemon_factory(*args), daemon_factory(*args)
    connector = f"across-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(a.url) as through_a, OffsetsClient(b.url) as through_b:
        through_a.alter(connector, body(1), create=True)
        claim = through_a.claim(connector, "owner-on-a")
        unclaimed = httpx.patch(f"{b.url}/connectors/{connector}/offsets", json=body(2), timeout=30)
        assert unclaimed.status_code == 400, unclaimed.text
        assert unclaimed.headers["X-Connect-Offsets-Error"] == "claim_held"
        with_epoch = httpx.patch(
            f"{b.url}/connectors/{connector}/offsets", params={"claim_epoch": claim["epoch"]}, json=body(3), timeout=30
        )
        assert with_epoch.status_code == 409, with_epoch.text
        assert "made through another daemon" in with_epoch.json()["message"]
        assert through_b.offsets(connector, fresh=True) == [{"partition": PARTITION, "offset": {"position": 1}}]


@pytest.mark.slow
def test_history_answers_from_the_archive_while_the_broker_is_stalled(
    own_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """History's read-your-writes is a local wait (the reader passing this daemon's own writes), not
    a read of the broker: a stalled broker neither delays nor empties a history query."""
    topic = own_broker.unique_topic("stall-history")
    daemon = daemon_factory(
        "--bootstrap-servers", own_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3"
    )
    name = f"stall-history-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(daemon.url, timeout_s=30) as client:
        for n in range(3):
            client.alter(name, body(n), create=True)
        httpx.get(f"{daemon.url}/connectors/{name}/offsets/history", timeout=30)  # the reader has them all now
        with own_broker.paused():
            started = time.monotonic()
            answer = httpx.get(f"{daemon.url}/connectors/{name}/offsets/history", timeout=30)
            took = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    page = answer.json()
    assert [c["offset"] for c in page["changes"]] == [body(n)["offsets"][0]["offset"] for n in (2, 1, 0)]
    assert "warning" not in page, page
    assert took < 2.0, f"a history query waited {took:.1f} s on a stalled broker"


@pytest.mark.slow
def test_reads_from_the_log_end_during_a_stall_answer_503_within_the_write_timeout(
    own_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """``GET …/claim``, ``GET /claims`` and ``GET …/offsets?fresh=true`` read a topic to its end first.
    With the broker stalled all three answer 503 ``log_timeout`` within ``--write-timeout``: the claim
    read used to wait the log's own 30 s, and both then answered 200 from a stale view (librdkafka
    resolves an unanswered ``ListOffsets`` with offset -1001, which every position had "passed"). The
    console keeps showing the offsets (as ``GET`` serves them) under the reason, the claim's cell
    saying why it is unknown."""
    _, daemon, connector, _ = claimed_connector(own_broker, daemon_factory, "stall-end-reads", "3s")
    with httpx.Client(base_url=daemon.url, timeout=60) as http:
        assert http.get(f"/connectors/{connector}/claim").json()["owner"] == "stall-test"
        with own_broker.paused():
            answers = {}
            for path in (f"/connectors/{connector}/claim", f"/connectors/{connector}/offsets?fresh=true", "/claims"):
                sent = time.monotonic()
                answers[path] = (http.get(path), time.monotonic() - sent)
            sent = time.monotonic()
            page = http.get("/ui/api/connectors")
            page_took = time.monotonic() - sent
        after = http.get(f"/connectors/{connector}/claim")
    for path, (answer, took) in answers.items():
        assert answer.status_code == 503, (path, answer.text)
        assert answer.headers["X-Connect-Offsets-Error"] == "log_timeout", (path, answer.headers)
        assert answer.headers["Retry-After"] == "1"
        assert "within 3 s" in answer.json()["message"], (path, answer.json())
        assert took < 3 + 2, f"GET {path} took {took:.1f} s with --write-timeout 3s"
    assert "not read to its end" in answers[f"/connectors/{connector}/claim"][0].json()["message"]
    assert "not read to its end" in answers["/claims"][0].json()["message"], "every claim: read as one is"
    fresh = answers[f"/connectors/{connector}/offsets?fresh=true"][0].json()["message"]
    assert fresh.startswith("The offsets log was not read to its end within 3 s (--write-timeout; see /readyz)"), fresh
    assert fresh.count("within 3 s") == 1, f"said twice: {fresh}"
    shown = page.json()
    assert page.status_code == 200 and page_took < 2 + 2, (page_took, page.text)
    assert shown["ready"] is False and "did not answer a metadata request" in shown["progress"]["unreachable"]
    assert shown["serving"] is True, "the console shows the offsets as last read, as GET serves them"
    row = next(r for r in shown["connectors"] if r["name"] == connector)
    assert row["partitions"] == 1 and "not read to its end within 2 s" in row["claim"]["error"], row
    assert after.status_code == 200 and after.json()["owner"] == "stall-test", after.text


@pytest.mark.slow
def test_a_rollback_during_a_stall_answers_503_within_the_write_timeout(
    own_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """A rollback, and its dry run, plan from the log read to its end, as a reset does. With the broker
    stalled that read ends at ``--write-timeout`` in a 503 ``log_timeout`` that says so, nothing
    written; both answered 200 from the view as it stood ("Nothing to roll back"), which may lack
    another writer's latest write."""
    topic = own_broker.unique_topic("stall-rollback")
    daemon = daemon_factory(
        "--bootstrap-servers", own_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3",
        "--write-timeout", "3s",
    )  # fmt: skip
    path = f"/connectors/stall-rollback-{uuid.uuid4().hex[:8]}/offsets"
    with httpx.Client(base_url=daemon.url, timeout=60) as http:
        assert http.patch(path, params={"create": "true"}, json=body(0)).status_code == 200
        time.sleep(0.05)
        at = str(time.time_ns() // 1_000_000)
        with own_broker.paused():
            answers = {}
            for dry_run in ("true", "false"):
                sent = time.monotonic()
                answer = http.post(f"{path}/rollback", params={"to": at, "dry_run": dry_run}, json={})
                answers[dry_run] = (answer, time.monotonic() - sent)
        after = http.post(f"{path}/rollback", params={"to": at}, json={})
    for dry_run, (answer, took) in answers.items():
        assert answer.status_code == 503, (dry_run, answer.text)
        assert answer.headers["X-Connect-Offsets-Error"] == "log_timeout", (dry_run, answer.headers)
        assert answer.headers["Retry-After"] == "1"
        message = answer.json()["message"]
        assert "not read to its end within 3 s" in message, (dry_run, message)
        assert took < 3 + 2, f"the rollback (dry_run={dry_run}) took {took:.1f} s with --write-timeout 3s"
    assert after.status_code == 200 and after.json()["changes"] == [], after.text


@pytest.mark.slow
def test_a_sink_read_during_a_stall_answers_503_with_why_within_the_write_timeout(
    own_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """A sink connector's offsets are its consumer group's: asked of a stalled broker, the read waited
    30 s and answered Connect's 500 with no reason; now a 503 to retry, within --write-timeout."""
    topic, connector = own_broker.unique_topic("stall-sink"), f"stall-sink-{uuid.uuid4().hex[:8]}"
    own_broker.create_topic(topic, 1)
    daemon = daemon_factory(
        "--bootstrap-servers",
        own_broker.bootstrap,
        "--offsets-topic",
        own_broker.unique_topic("o"),
        "--write-timeout",
        "3s",
    )
    path = f"/connectors/{connector}/offsets"
    body = {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 4}}]}
    with httpx.Client(base_url=daemon.url, timeout=60) as http:
        assert http.patch(path, params={"kind": "sink"}, json=body).status_code == 200
        with own_broker.paused():
            sent = time.monotonic()
            answer = http.get(path, params={"kind": "sink"})
            took = time.monotonic() - sent
        after = http.get(path, params={"kind": "sink"})
    assert answer.status_code == 503, answer.text
    assert answer.headers["X-Connect-Offsets-Error"] == "log_timeout"
    assert "the Kafka cluster did not answer within 3 s (--write-timeout" in answer.json()["message"]
    assert took < 3 + 4, f"the sink read took {took:.1f} s with --write-timeout 3s"
    assert after.status_code == 200 and after.json()["offsets"][0]["offset"] == {"kafka_offset": 4}, after.text


def _import_of(connector: str) -> dict[str, Any]:
    key, value = encode_key(connector, PARTITION), encode_offset({"position": 1})
    return {"records": [{"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}]}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("what", "then"),
    [("patch", "nothing was written"), ("claim", "nothing was claimed"), ("import", "nothing was written")],
)
def test_a_write_checked_against_a_stalled_config_topic_answers_503_naming_that_read(
    own_broker: TansuBroker, daemon_factory: DaemonFactory, what: str, then: str
) -> None:
    """With a Connect cluster, a PATCH, a claim and an import first read the config topic to its end
    (a ``PUT /stop`` a moment earlier must be seen). With the broker stalled that read ends at
    ``--write-timeout`` in a 503 that says which read it was and that nothing was done (a PATCH said
    "Checking the connector took longer", naming neither the topic nor the cluster; a claim and an
    import answered 500 ``log_unavailable``, which the clients do not retry: cluster QA)."""
    config_topic = own_broker.unique_topic("stall-config")
    own_broker.create_topic(config_topic, 1, {"cleanup.policy": "compact"})
    daemon = daemon_factory(
        "--bootstrap-servers",
        own_broker.bootstrap,
        "--offsets-topic",
        own_broker.unique_topic("o"),
        "--config-topic",
        config_topic,
        "--write-timeout",
        "3s",
    )
    connector = f"stall-config-{uuid.uuid4().hex[:8]}"

    def send(http: httpx.Client) -> httpx.Response:
        if what == "claim":
            return http.post(f"/connectors/{connector}/claim", json={"owner": "operator"})
        if what == "import":
            return http.post("/offsets/records", json=_import_of(connector))
        return http.patch(f"/connectors/{connector}/offsets", json=body(1))

    with httpx.Client(base_url=daemon.url, timeout=60) as http:
        with own_broker.paused():
            sent = time.monotonic()
            answer = send(http)
            took = time.monotonic() - sent
        after = send(http)
    assert answer.status_code == 503, answer.text
    assert answer.headers["X-Connect-Offsets-Error"] == "log_timeout"
    assert answer.headers["Retry-After"] == "1"
    message = answer.json()["message"]
    assert message.startswith("Reading Connect's config topic to its end"), message
    assert f"took longer than 3 s (--write-timeout); {then}" in message, message
    assert took < 3 + 2, f"the {what} took {took:.1f} s with --write-timeout 3s"
    assert after.status_code != 503, f"answered again once the broker is back: {after.text}"


@pytest.mark.slow
def test_a_broker_that_is_gone_is_logged_once_per_client_and_kind_not_on_every_retry(
    tmp_path: Path, daemon_factory: DaemonFactory
) -> None:
    """librdkafka retries a gone broker every few hundred milliseconds in every client, and each try
    reached the log twice (its FAIL line and the error callback): ~45 lines a second, half of them
    ERROR, burying the line that says what is wrong. Each kind is now one line per client per 30 s
    (docs/operations.md, "Logs"), and the error is still what ``/status`` shows."""
    with own_tansu(tmp_path) as broker:
        daemon = daemon_factory(
            "--bootstrap-servers", broker.bootstrap, "--offsets-topic", f"gone-{uuid.uuid4().hex[:8]}"
        )
        body = {"offsets": [{"partition": PARTITION, "offset": {"position": 1}}]}
        assert (
            httpx.patch(f"{daemon.url}/connectors/gone/offsets?create=true", json=body, timeout=10).status_code == 200
        )
        before = len(daemon.log_path.read_text(errors="replace").splitlines())
        broker.stop()
        time.sleep(12)
    lines = daemon.log_path.read_text(errors="replace").splitlines()[before:]
    refused = [line for line in lines if "Connection refused" in line or "_TRANSPORT" in line]
    assert refused, "the gone broker is logged at all:\n" + "\n".join(lines[-20:])
    assert len(refused) <= 12, f"{len(refused)} lines in 12 s:\n" + "\n".join(refused[:40])
    assert "Connection refused" in str(httpx.get(f"{daemon.url}/status", timeout=5).json()["reader"]["last_error"])
    daemon.stop()


@pytest.mark.slow
def test_a_metadata_wait_the_cluster_never_answers_says_so_not_that_the_topic_lacks_partitions() -> None:
    """After a stall, the Connect topics' readers reported "Offsets topic 'connect-configs' has no
    partitions in metadata" — a config topic, and partitions it had: the broker had not answered."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{free_port()}", "log_level": 0})
    with pytest.raises(LogConfigError) as refused:
        wait_for_partition_count(admin, "connect-configs", 1.0)
    assert str(refused.value).startswith(
        "the Kafka cluster did not answer a metadata request for topic 'connect-configs' within 1 s"
    ), str(refused.value)


@pytest.mark.slow  # 50,000 records written to a broker that stops answering mid-write, 10 s of --timeout
def test_a_migration_whose_write_the_broker_never_acknowledges_exits_4_may_still_land(
    own_broker: TansuBroker, tmp_path: Path
) -> None:
    """Records handed to the producer and not acknowledged within --timeout may still land. Exit 1
    ("refused") told a script nothing changed, and it ran the migration again; a daemon's 503
    write_outcome_unknown exits 4 already (``test_client.py``), a Kafka destination of its own now
    too. The broker stops answering (SIGSTOP) as soon as the migration says it starts writing."""
    from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog

    source = EmbeddedOffsetLog(tmp_path / "source", partitions=3, synchronous="NORMAL")
    source.open()
    connector = f"unacked-{uuid.uuid4().hex[:8]}"
    for start in range(0, 50_000, 10_000):
        source.append([(encode_key(connector, {"n": n}), b'{"pos":1}') for n in range(start, start + 10_000)], 60)
    source.close()
    topic = own_broker.unique_topic("unacked")
    to = f"kafka://{own_broker.bootstrap}/{topic}"
    args = ["migrate", "--from", f"embedded:{tmp_path / 'source'}", "--to", to, "--partitions", "3", "--timeout", "10"]
    migration = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert migration.stderr is not None
        for line in migration.stderr:
            lines.append(line)
            if line.startswith("warning: writing directly to kafka://"):
                break
        with own_broker.paused():
            lines += migration.stderr.readlines()  # to its end: the process exits within --timeout
            code = migration.wait(timeout=60)
    finally:
        if migration.poll() is None:
            migration.kill()
    last = lines[-1] if lines else ""
    assert code == 4, "".join(lines)
    assert last.startswith("error: ") and "the write may still land" in last, last


@pytest.mark.slow
def test_an_outage_only_the_broker_watch_met_stays_the_last_error_after_recovery(
    own_broker: TansuBroker, daemon_factory: DaemonFactory
) -> None:
    """An idle daemon lives through a stall: nothing but its broker watch (``/readyz``) and its claims
    reader ask the broker meanwhile, and librdkafka reports nothing for a broker that stops answering
    on open connections. The daemon logged the failed metadata requests, yet ``reader.last_error``
    stayed ``null`` and ``connect_offsets_reader_last_error_timestamp_seconds`` absent once it was
    ready again, so the ``ConnectOffsetsReaderErrors`` alert (docs/operations.md) never fired (QA D5).
    And nothing is recorded while nothing failed: a claim, its reader, writes and reads leave none."""
    topic = own_broker.unique_topic("stall-last-error")
    daemon = daemon_factory(
        "--bootstrap-servers", own_broker.bootstrap, "--offsets-topic", topic, "--offsets-partitions", "3"
    )
    connector = f"stall-last-error-{uuid.uuid4().hex[:8]}"
    with OffsetsClient(daemon.url) as client:
        client.alter(connector, body(0), create=True)
        client.claim(connector, "stall-test")  # the claims store and its reader run from here on
        assert client.offsets(connector, fresh=True) == [{"partition": PARTITION, "offset": {"position": 0}}]

    def reader_status() -> dict[str, Any]:
        reader: dict[str, Any] = httpx.get(f"{daemon.url}/status", timeout=5).json()["reader"]
        return reader

    def last_error_at() -> float | None:
        return scrape(daemon.url).get("connect_offsets_reader_last_error_timestamp_seconds")

    time.sleep(1.0)  # two probes of the watch, answered
    before = reader_status()
    assert (before["last_error"], before["last_error_at"], last_error_at()) == (None, None, None), before

    paused_at = time.time()
    with own_broker.paused():
        until(
            lambda: httpx.get(f"{daemon.url}/readyz", timeout=5).status_code == 503,
            "/readyz says the broker does not answer",
            timeout_s=10,
        )
        time.sleep(3.0)
    resumed_at = time.time()
    daemon.wait_until("/readyz", 30)

    after = reader_status()
    assert after["last_error"] and "did not answer a metadata request" in after["last_error"], after
    assert own_broker.bootstrap in after["last_error"], after
    at = last_error_at()
    assert at is not None and paused_at <= at <= resumed_at + 1.0, (paused_at, at, resumed_at)
    time.sleep(1.5)
    assert last_error_at() == at, "kept after recovery, and no error recorded once the broker answers"


@pytest.mark.slow
def test_the_claims_readers_failure_during_a_stall_is_the_offsets_logs_last_error(own_broker: TansuBroker) -> None:
    """The claims topic's reader kept its errors to itself: through an outage daemon A logged "cannot
    read the end offsets of …-emulator-claims" (a claim it was asked for) and ``/status``
    ``reader.last_error``, the offsets log's ``last_error``, had nothing of it (QA D5). The log is
    opened without its broker watch (``claims=False``; ``claim`` still opens the claims store), whose
    failed probes would be the last error too: here only the claims reader's can be."""
    topic = own_broker.unique_topic("stall-claims-error")
    log = KafkaOffsetLog(own_broker.bootstrap, topic, partitions=3, claims=False, operation_timeout_s=10)
    log.open()
    try:
        claim = log.claim("c", "stall-test")
        assert log.current_claim("c", timeout_s=10) == claim
        assert (log.last_error, log.last_error_at) == (None, None), "nothing failed: no error"
        with own_broker.paused():
            failed_from = time.time()
            with pytest.raises(LogTimeout):
                log.current_claim("c", timeout_s=3)
        claims_topic = f"{topic}-emulator-claims"
        assert log.last_error is not None and f"cannot read the end offsets of {claims_topic}" in log.last_error, (
            log.last_error
        )
        assert log.last_error_at is not None and log.last_error_at >= failed_from
    finally:
        log.close()
