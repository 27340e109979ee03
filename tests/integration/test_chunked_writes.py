"""A write of many chunks gets a deadline per chunk, not one for the whole write.

More than ``_APPEND_CHUNK`` records go to the log a chunk at a time, each durable on its own. A big
write that keeps making progress is answered once it is done (200, everything applied), however
long all its chunks take together; a log that stops answering in the middle of it is still
answered within about one ``--write-timeout`` of the stalled chunk, saying how much was written.
Before, the request's single deadline covered every chunk: a legal PATCH of 250,000 partitions on an
idle embedded log answered 503 ``write_outcome_unknown`` after 14.5 s and was applied 2.8 s later.

The app runs in-process over a real SQLite log, with the chunk, the write timeout and the overrun
made small so the test takes seconds; the log's fenced append is wrapped to be slow (a log that
answers each chunk well within the timeout) or to stall on one chunk.
"""

from __future__ import annotations

import base64
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import emulator.service.writer as writer_module
from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.model.errors import WriteOutcomeUnknown
from emulator.server.wiring import assemble_runtime, make_app, start_reading
from emulator.view.offset_view import OffsetView
from tests.fixtures.waits import until

CHUNK = 20
CHUNKS = 10
WRITE_TIMEOUT_S = 0.6
# The time a request waits past --write-timeout for the log's own answer. At 0.3 s, under the load of a
# whole test run, the log's "not applied" once came later than that, and the answer was
# write_outcome_unknown instead of the log's refusal this file checks.
OVERRUN_S = 1.0
SLOW_CHUNK_S = 0.2  # each chunk well within the timeout; all of them together well past timeout + overrun


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedOffsetLog]:
    monkeypatch.setattr(writer_module, "_APPEND_CHUNK", CHUNK)
    monkeypatch.setattr(writer_module, "OVERRUN_S", OVERRUN_S)
    opened = EmbeddedOffsetLog(tmp_path, partitions=2, synchronous="NORMAL")
    opened.open()
    try:
        yield opened
    finally:
        opened.close()


def _client(log: EmbeddedOffsetLog) -> TestClient:
    runtime = assemble_runtime(log, OffsetView(), NoConnectCluster(), write_timeout_s=WRITE_TIMEOUT_S)
    start_reading(runtime)
    return TestClient(make_app(runtime, reading_started=True), base_url="http://localhost")


def _wrap_appends(log: EmbeddedOffsetLog, before: Callable[[int], None]) -> list[int]:
    """Call ``before(n)`` ahead of the log's n-th fenced append (0-based); the sizes appended."""
    real = log.append_fenced
    sizes: list[int] = []

    def append_fenced(fence: Any, entries: Any, timeout_s: float = 30.0) -> Any:
        before(len(sizes))
        sizes.append(len(entries))
        return real(fence, entries, timeout_s)

    log.append_fenced = append_fenced  # type: ignore[method-assign]
    return sizes


def _body(count: int, position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": {"file": f"f{i}"}, "offset": {"position": position}} for i in range(count)]}


def _positions(client: TestClient, connector: str) -> dict[str, int]:
    answer = client.get(f"/connectors/{connector}/offsets?fresh=true")
    assert answer.status_code == 200, answer.text
    return {row["partition"]["file"]: row["offset"]["position"] for row in answer.json()["offsets"]}


@pytest.mark.slow
def test_a_write_of_many_chunks_that_keeps_progressing_is_not_cut_off(log: EmbeddedOffsetLog) -> None:
    sizes = _wrap_appends(log, lambda _: time.sleep(SLOW_CHUNK_S))
    connector = f"chunks-{time.monotonic_ns()}"
    total = CHUNK * CHUNKS
    with _client(log) as client:
        until(lambda: client.get("/readyz").status_code == 200, "ready after the replay")
        started = time.monotonic()
        answer = client.patch(f"/connectors/{connector}/offsets?create=true", json=_body(total, 1))
        took = time.monotonic() - started
        assert answer.status_code == 200, answer.text
        assert took > WRITE_TIMEOUT_S + OVERRUN_S, "the test's write must outlast one deadline to mean anything"
        assert sizes == [CHUNK] * CHUNKS
        assert _positions(client, connector) == {f"f{i}": 1 for i in range(total)}

        del sizes[:]
        answer = client.delete(f"/connectors/{connector}/offsets")  # a reset: as many chunks of tombstones
        assert answer.status_code == 200, answer.text
        assert sizes == [CHUNK] * CHUNKS
        assert _positions(client, connector) == {}


@pytest.mark.slow
def test_a_log_that_stops_answering_mid_write_is_answered_within_one_chunks_deadline(
    log: EmbeddedOffsetLog,
) -> None:
    """The third chunk waits for SQLite's write lock, which another connection holds: that chunk
    times out after its own ``--write-timeout``, nothing of it written, and the answer says the
    first two chunks are written and in effect and the rest were not. Its kind is
    ``write_partly_applied``, 503 with the timeout's ``Retry-After``: it was ``log_timeout``, whose
    meaning (docs/api.md's table of kinds) is that nothing was written."""
    other = sqlite3.connect(log.path, isolation_level=None, check_same_thread=False)
    stalled_at: list[float] = []

    def before(n: int) -> None:
        time.sleep(SLOW_CHUNK_S)
        if n == 2:
            other.execute("BEGIN IMMEDIATE")
            stalled_at.append(time.monotonic())

    _wrap_appends(log, before)
    connector = f"stalled-{time.monotonic_ns()}"
    total = CHUNK * CHUNKS
    try:
        with _client(log) as client:
            until(lambda: client.get("/readyz").status_code == 200, "ready after the replay")
            answer = client.patch(f"/connectors/{connector}/offsets?create=true", json=_body(total, 1))
            answered = time.monotonic()
            other.execute("ROLLBACK")
            assert answer.status_code == 503, answer.text
            assert answer.headers["X-Connect-Offsets-Error"] == "write_partly_applied"
            assert answer.headers["Retry-After"] == "1"
            message = answer.json()["message"]
            assert "nothing was written" not in message, message
            assert f"the first {2 * CHUNK} of this write's {total} records were written before it" in message, message
            assert f"the other {total - 2 * CHUNK} were not" in message, message
            assert answered - stalled_at[0] < WRITE_TIMEOUT_S + OVERRUN_S + 1.0
            assert _positions(client, connector) == {f"f{i}": 1 for i in range(2 * CHUNK)}
    finally:
        other.close()


def test_a_later_chunk_refused_by_a_claim_keeps_the_claims_status_and_says_what_is_written(
    log: EmbeddedOffsetLog,
) -> None:
    """Someone claims the connector between the second and third chunk of an unclaimed PATCH: the
    log refuses the third (``claim_held``, 400: the connector is as good as running), but the first two
    are written. The answer keeps the refusal's status and says so, under ``write_partly_applied``
    (``claim_held`` says nothing was written)."""
    connector = f"claimed-{time.monotonic_ns()}"

    def before(n: int) -> None:
        if n == 2:
            log.claim(connector, "intruder")

    _wrap_appends(log, before)
    total = CHUNK * CHUNKS
    with _client(log) as client:
        until(lambda: client.get("/readyz").status_code == 200, "ready after the replay")
        answer = client.patch(f"/connectors/{connector}/offsets?create=true", json=_body(total, 1))
        assert answer.status_code == 400, answer.text
        assert answer.headers["X-Connect-Offsets-Error"] == "write_partly_applied"
        assert "Retry-After" not in answer.headers
        message = answer.json()["message"]
        assert "intruder" in message and "nothing was written" not in message, message
        assert message.endswith(
            f"the first {2 * CHUNK} of this write's {total} records were written before it and are in effect, the "
            f"other {total - 2 * CHUNK} were not (sending the same request again writes the rest)"
        ), message
        assert _positions(client, connector) == {f"f{i}": 1 for i in range(2 * CHUNK)}


@pytest.mark.slow
def test_a_chunk_the_log_does_not_return_from_answers_503_saying_what_is_written(log: EmbeddedOffsetLog) -> None:
    """The third chunk's log call does not come back (as a commit stuck in its fsync): the request is
    answered ``write_outcome_unknown`` one ``--write-timeout`` + overrun after that chunk started,
    saying the chunks before it are written; the write then finishes in the background."""
    release = threading.Event()
    stalled_at: list[float] = []

    def before(n: int) -> None:
        if n == 2:
            stalled_at.append(time.monotonic())
            release.wait(30)

    _wrap_appends(log, before)
    connector = f"stuck-{time.monotonic_ns()}"
    total = CHUNK * CHUNKS
    try:
        with _client(log) as client:
            until(lambda: client.get("/readyz").status_code == 200, "ready after the replay")
            answer = client.patch(f"/connectors/{connector}/offsets?create=true", json=_body(total, 1))
            answered = time.monotonic()
            assert answer.status_code == 503, answer.text
            assert answer.headers["X-Connect-Offsets-Error"] == "write_outcome_unknown"
            message = answer.json()["message"]
            assert f"the first {2 * CHUNK} of this write's {total} records were written and are in effect" in message
            assert f"the other {total - 2 * CHUNK} may still be applied" in message, message
            assert WRITE_TIMEOUT_S <= answered - stalled_at[0] < WRITE_TIMEOUT_S + OVERRUN_S + 1.0
            assert _positions(client, connector) == {f"f{i}": 1 for i in range(2 * CHUNK)}
            release.set()
            until(lambda: len(_positions(client, connector)) == total, "the rest written in the background")
    finally:
        release.set()


def test_a_later_chunk_the_log_gives_up_on_says_what_is_written_and_what_never_will_be(
    log: EmbeddedOffsetLog,
) -> None:
    """The log answers the third chunk "may still be written" (as Kafka's producer does past the
    deadline): the chunks before it are written, that one may land, the ones after it are not sent."""

    def before(n: int) -> None:
        if n == 2:
            raise WriteOutcomeUnknown("the log did not acknowledge 20 records in time; they may still be written")

    _wrap_appends(log, before)
    connector = f"unknown-{time.monotonic_ns()}"
    total = CHUNK * CHUNKS
    with _client(log) as client:
        until(lambda: client.get("/readyz").status_code == 200, "ready after the replay")
        answer = client.patch(f"/connectors/{connector}/offsets?create=true", json=_body(total, 1))
        assert answer.status_code == 503, answer.text
        assert answer.headers["X-Connect-Offsets-Error"] == "write_outcome_unknown"
        assert answer.json()["message"] == (
            "the log did not acknowledge 20 records in time; they may still be written; the first 40 of this "
            f"write's {total} records were written before it and are in effect, the next 20 may still be applied, "
            f"the other {total - 3 * CHUNK} were not and will not be (sending the same request again writes the rest)"
        )
        assert _positions(client, connector) == {f"f{i}": 1 for i in range(2 * CHUNK)}


def _hold_next_commit(log: EmbeddedOffsetLog) -> tuple[threading.Event, threading.Event]:
    """``(arm, release)``: once armed, the log's next group commit does not come back until released,
    as a commit stuck in its fsync: the thread running it holds the log's writing lock meanwhile."""
    real = log._commits._write
    arm, release = threading.Event(), threading.Event()

    def write(conn: Any, batch: Any, deadline: float) -> Any:
        if arm.is_set():
            arm.clear()
            release.wait(30)
        return real(conn, batch, deadline)

    log._commits._write = write  # type: ignore[method-assign]
    return arm, release


def _records(connector: str, count: int, position: int) -> dict[str, Any]:
    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return {
        "records": [
            {"key": b64(encode_key(connector, {"file": f"f{i}"})), "value": b64(encode_offset({"position": position}))}
            for i in range(count)
        ]
    }


@pytest.mark.slow
def test_an_import_whose_embedded_commit_hangs_answers_503_within_its_deadline(log: EmbeddedOffsetLog) -> None:
    """``POST /offsets/records`` waited for its write with no deadline of its own: a commit that did not
    come back held the request (and every later import) until it did. Now it answers as a PATCH does,
    503 ``write_outcome_unknown`` one ``--write-timeout`` (+ the overrun) after it handed its records to
    the log, keeps the sections of the connectors it names until the log answers (a write meanwhile, of
    those or of another connector queued behind the held commit, answers ``log_timeout`` within its own
    deadline, having written nothing), and the import lands once the
    commit comes back. (Before the fix the request waited until the test let the commit go: 200 after
    ``HELD_S``.)"""
    arm, release = _hold_next_commit(log)
    connector = f"held-import-{time.monotonic_ns()}"
    other = f"held-other-{time.monotonic_ns()}"
    held_s = 4.0
    letting_go = threading.Timer(held_s, release.set)  # so that the request, unfixed, ends rather than hangs
    try:
        with _client(log) as client:
            until(lambda: client.get("/readyz").status_code == 200, "ready after the replay")
            arm.set()
            letting_go.start()
            started = time.monotonic()
            answer = client.post("/offsets/records", json=_records(connector, 5, 1))
            took = time.monotonic() - started
            assert answer.status_code == 503, f"{answer.status_code} after {took:.1f} s: {answer.text}"
            assert answer.headers["X-Connect-Offsets-Error"] == "write_outcome_unknown"
            assert answer.headers["Retry-After"] == "1"
            assert set(answer.json()) == {"error_code", "message"} and answer.json()["error_code"] == 503
            assert "(--write-timeout); it may still be applied" in answer.json()["message"], answer.text
            assert took < WRITE_TIMEOUT_S + OVERRUN_S + 1.0, f"answered after {took:.1f} s"
            assert not release.is_set(), "answered while the commit still hangs"

            started = time.monotonic()
            again = client.post("/offsets/records", json=_records(connector, 5, 2))
            patch = client.patch(f"/connectors/{other}/offsets?create=true", json=_body(1, 1))
            took = time.monotonic() - started
            for waited in (again, patch):
                assert waited.status_code == 503, waited.text
                assert waited.headers["X-Connect-Offsets-Error"] == "log_timeout"  # nothing was written
            assert patch.json()["message"].endswith("nothing was written"), patch.text
            # An import first reads the log to its end, which the held commit keeps it from reaching.
            assert "not read to its end" in again.json()["message"] or again.json()["message"].endswith(
                "nothing was written"
            ), again.text
            assert took < 2 * WRITE_TIMEOUT_S + 1.0, f"both answered after {took:.1f} s"
            assert not release.is_set(), "answered while the commit still hangs"

            release.set()
            until(lambda: _positions(client, connector) == {f"f{i}": 1 for i in range(5)}, "the import landed")
            answer = client.patch(f"/connectors/{other}/offsets?create=true", json=_body(1, 1))
            assert answer.status_code == 200, "the log takes writes again once the commit came back"
    finally:
        letting_go.cancel()
        release.set()
