"""One thread per streaming query that runs a listener's publishes in the order of its events.

Spark calls every listener of a session on one listener-bus thread, one event after another, and
in classic PySpark the JVM's bus waits for the Python callback to return. A publish that waits for
the daemon (not answering, restarting, or still reading its log: the client waits up to 30 s, the
termination's publish retries for 30 s more) would hold every other listener's events — Spark's own
UI included — for as long. So the callbacks only queue a step here and return.

Steps of one query run in event order on its thread (a termination's publish after the progress
publishes before it); a progress step queued right behind one that has not started yet is dropped,
since each progress publish reads the latest completed batch anyway (one behind a termination is
the next run's, and is kept). Queries do not wait for each other: a termination retrying for a
restarting daemon holds up only its own query's steps. A thread ends when its query's queue is
empty after a termination; a run restarted from the same checkpoint (the same query id) gets a new
one.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Step:
    """``run_id`` is the run whose termination this is (None for a progress step)."""

    kind: str
    run_id: str | None = None


class QueryWorkers:
    """``run(query_id, step)`` does the work on the query's thread. It should not raise (the
    listener's steps catch everything themselves); anything that escapes is logged here, so the
    thread still runs the query's next step."""

    def __init__(self, run: Callable[[str, Step], None]) -> None:
        self._run = run
        self._guard = threading.Condition()
        self._queues: dict[str, deque[Step]] = {}
        self._busy: set[str] = set()

    def progress(self, query_id: str) -> None:
        with self._guard:
            queue = self._queue(query_id)
            if not queue or queue[-1] != Step("progress"):  # one after a termination is the next run's
                queue.append(Step("progress"))
                self._guard.notify_all()

    def terminated(self, query_id: str, run_id: str | None) -> None:
        with self._guard:
            self._queue(query_id).append(Step("termination", run_id))
            self._guard.notify_all()

    def idle(self, timeout_s: float = 30.0) -> bool:
        """Wait until no step is queued or running, for any query (tests, orderly shutdowns)."""
        with self._guard:
            return self._guard.wait_for(lambda: not self._busy and not any(self._queues.values()), timeout_s)

    def _queue(self, query_id: str) -> deque[Step]:
        """The query's queue, and its thread started if it has none (called under the guard)."""
        queue = self._queues.get(query_id)
        if queue is None:
            queue = self._queues[query_id] = deque()
            name = f"spark-offsets-{query_id[:8]}"
            threading.Thread(target=self._serve, args=(query_id,), name=name, daemon=True).start()
        return queue

    def _serve(self, query_id: str) -> None:
        while True:
            with self._guard:
                self._guard.wait_for(lambda: bool(self._queues[query_id]))
                step = self._queues[query_id].popleft()
                self._busy.add(query_id)
            try:
                self._run(query_id, step)
            except Exception:  # the thread must survive to run the query's next step
                log.exception("query %s: unexpected error in the listener's %s step", query_id, step.kind)
            with self._guard:
                self._busy.discard(query_id)
                self._guard.notify_all()
                if step.kind == "termination" and not self._queues[query_id]:
                    del self._queues[query_id]
                    return
