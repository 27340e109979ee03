"""``QueryWorkers`` runs a listener's publishes off Spark's listener bus, per query, in event order."""

from __future__ import annotations

import threading
import time

import pytest

from emulator.spark.query_worker import QueryWorkers, Step


class _Publishes:
    """Records the steps run and the threads that ran them; a step of a query held by ``hold`` waits
    at its gate until the test opens it."""

    def __init__(self) -> None:
        self.done: list[tuple[str, Step]] = []
        self.threads: dict[str, set[threading.Thread]] = {}
        self.gates: dict[str, tuple[threading.Event, threading.Event]] = {}

    def hold(self, query_id: str) -> tuple[threading.Event, threading.Event]:
        """(gate, waiting): a step of ``query_id`` sets ``waiting`` and runs once ``gate`` is set."""
        gate, waiting = self.gates[query_id] = (threading.Event(), threading.Event())
        return gate, waiting

    def run(self, query_id: str, step: Step) -> None:
        if query_id in self.gates:
            gate, waiting = self.gates[query_id]
            waiting.set()
            gate.wait(10)
        self.threads.setdefault(query_id, set()).add(threading.current_thread())
        self.done.append((query_id, step))


def _progress_waiting_at_its_gate(publishes: _Publishes, workers: QueryWorkers, query_id: str) -> threading.Event:
    """A progress step of ``query_id`` already running (so not a queued one), held; its gate."""
    gate, waiting = publishes.hold(query_id)
    workers.progress(query_id)
    assert waiting.wait(5), "the step did not start"
    return gate


def test_a_querys_steps_run_in_event_order_and_its_thread_ends_after_the_termination() -> None:
    publishes = _Publishes()
    workers = QueryWorkers(publishes.run)
    gate = _progress_waiting_at_its_gate(publishes, workers, "q1")
    workers.progress("q1")
    workers.progress("q1")  # not queued twice: each progress publish reads the latest batch
    workers.terminated("q1", "run-1")
    gate.set()
    assert workers.idle(10)
    assert [step for _, step in publishes.done] == [Step("progress"), Step("progress"), Step("termination", "run-1")]
    (thread,) = publishes.threads["q1"]
    thread.join(5)
    assert not thread.is_alive(), "the query's thread ends once its termination is published"


def test_a_query_waiting_for_the_daemon_holds_up_neither_the_caller_nor_another_query() -> None:
    publishes = _Publishes()
    workers = QueryWorkers(publishes.run)
    gate, _ = publishes.hold("slow")
    started = time.monotonic()
    workers.terminated("slow", "run-s")
    workers.progress("fast")
    workers.terminated("fast", "run-f")
    assert time.monotonic() - started < 0.1  # the listener's callbacks only queue
    deadline = time.monotonic() + 5
    while len(publishes.done) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [q for q, _ in publishes.done] == ["fast", "fast"]
    assert not workers.idle(0.05)
    gate.set()
    assert workers.idle(10)
    assert publishes.done[-1] == ("slow", Step("termination", "run-s"))


def test_a_new_run_after_a_termination_gets_a_thread_of_its_own() -> None:
    publishes = _Publishes()
    workers = QueryWorkers(publishes.run)
    workers.terminated("q", "run-1")
    assert workers.idle(10)
    workers.progress("q")
    workers.terminated("q", "run-2")
    assert workers.idle(10)
    assert [step.run_id for _, step in publishes.done] == ["run-1", None, "run-2"]
    assert len(publishes.threads["q"]) == 2


def test_a_step_that_raises_is_logged_and_the_next_one_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[Step] = []

    def run(query_id: str, step: Step) -> None:
        ran.append(step)
        if step.kind == "progress":
            raise RuntimeError("a bug in a publish")

    workers = QueryWorkers(run)
    workers.progress("q")
    workers.terminated("q", "run-1")
    assert workers.idle(10)
    assert ran == [Step("progress"), Step("termination", "run-1")]
    assert "query q: unexpected error in the listener's progress step" in caplog.text


def test_a_progress_after_a_termination_is_the_next_runs_and_is_kept() -> None:
    publishes = _Publishes()
    workers = QueryWorkers(publishes.run)
    gate = _progress_waiting_at_its_gate(publishes, workers, "q")
    workers.progress("q")
    workers.terminated("q", "run-1")
    workers.progress("q")  # the query restarted from its checkpoint
    gate.set()
    assert workers.idle(10)
    assert [step for _, step in publishes.done] == [
        Step("progress"),
        Step("progress"),
        Step("termination", "run-1"),
        Step("progress"),
    ]
