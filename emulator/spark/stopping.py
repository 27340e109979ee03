"""Stopping a streaming query between two micro-batches, for an orderly hand-off.

``query.stop()`` cancels the batch that is running (Spark 4.x interrupts the query's thread and
cancels its jobs). The batch's sink may already have written some or all of its output, but its
``commits/N`` is never written, so the listener publishes the batch before it, and whoever resumes
(the connector after the hand-off, or Spark from the checkpoint) produces that batch again: Spark's
at-least-once for a cut-off batch, as after a crash. Spark has no graceful stop for Structured
Streaming, so ``stop_between_batches`` waits, within a deadline, until no trigger is active
(``query.status["isTriggerActive"]``, false between triggers) and stops then.

What remains: a trigger that starts between that look and the stop (one py4j call later) is cut
off all the same. It is rare where batches are shorter than the trigger interval (the next trigger
is that far away), and likely where they overrun it (the next starts at once, so no gap may be seen
before the deadline). Either way the outcome says so, from the checkpoint (``offsets/N`` without
``commits/N``), and so does the listener's termination report.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from emulator.spark.checkpoint import CheckpointError, unfinished_batch, unfinished_note

log = logging.getLogger(__name__)

POLL_S = 0.01
"""How often the query's status is asked: a gap between triggers is seen if it lasts about this long."""


@dataclass(frozen=True, slots=True)
class StopOutcome:
    """How ``stop_between_batches`` ended."""

    stopped: bool
    """The query is stopped (False only with ``stop_on_timeout=False`` at the deadline)."""
    between_batches: bool
    """No batch was cut off: the resuming side starts right after the sink's last batch."""
    unfinished_batch: int | None
    """The batch cut off mid-way (``offsets/N`` without ``commits/N``), if the checkpoint says so."""
    waited_s: float
    reason: str | None
    """Why not ``between_batches``, or what could not be checked; None when all is well."""


def stop_between_batches(
    query: Any,
    timeout_s: float = 30.0,
    *,
    checkpoint: str | None = None,
    stop_on_timeout: bool = True,
    poll_s: float = POLL_S,
) -> StopOutcome:
    """Stop ``query`` (a ``StreamingQuery``) at a moment no trigger is active, waiting up to
    ``timeout_s`` for one; at the deadline stop it anyway (``stop_on_timeout``) or leave it running.
    Then read the checkpoint (``checkpoint``, else the query's ``checkpointLocation`` as the JVM
    resolved it) for a batch cut off mid-way. A WARNING says when it did not stop between batches.
    Call ``listener.wait_for_termination(query)`` after it, as after ``query.stop()``."""
    location = checkpoint or _checkpoint_of(query)
    started = time.monotonic()
    deadline = started + timeout_s
    idle_seen = False
    ended_before = not query.isActive
    while query.isActive:
        if not query.status.get("isTriggerActive", True):
            idle_seen = True
            query.stop()
            break
        if time.monotonic() >= deadline:
            if not stop_on_timeout:
                outcome = StopOutcome(
                    False,
                    False,
                    None,
                    time.monotonic() - started,
                    f"a trigger was active at every look for {timeout_s:g} s; the query is still running",
                )
                log.warning("query %s: %s", query.id, outcome.reason)
                return outcome
            query.stop()
            break
        time.sleep(poll_s)
    else:
        query.stop()  # already terminated (failed, or stopped elsewhere): a no-op that makes it so
    outcome = _outcome(location, idle_seen, timeout_s, time.monotonic() - started, ended_before)
    if not outcome.between_batches:
        log.warning("query %s: %s", query.id, outcome.reason)
    return outcome


def _outcome(
    location: str | None, idle_seen: bool, timeout_s: float, waited_s: float, ended_before: bool = False
) -> StopOutcome:
    """What the checkpoint says after the stop; without one, the look at the status is all there is.
    ``ended_before``: the query had terminated before the call (it failed, or was stopped elsewhere):
    said as such, not as a wait for a gap between triggers that never took place."""
    unknown: str | None = None
    batch: int | None = None
    if location is None:
        unknown = "the checkpoint location is not known here (pass checkpoint=)"
    else:
        try:
            batch = unfinished_batch(location)
        except CheckpointError as exc:
            unknown = f"the checkpoint is not readable here: {exc}"
    if batch is not None:
        if ended_before:
            why = "the query had already terminated (it failed, or was stopped elsewhere) when it was to be stopped: "
        elif idle_seen:
            why = ""
        else:
            why = f"a trigger was active at every look for {timeout_s:g} s, so it was stopped anyway: "
        return StopOutcome(True, False, batch, waited_s, why + unfinished_note(batch))
    if unknown is not None:
        if ended_before:
            return StopOutcome(
                True, False, None, waited_s, f"the query had already terminated when it was to be stopped; {unknown}"
            )
        if idle_seen:
            return StopOutcome(
                True, True, None, waited_s, f"stopped while no trigger was active; not confirmed: {unknown}"
            )
        return StopOutcome(
            True,
            False,
            None,
            waited_s,
            f"a trigger was active at every look for {timeout_s:g} s, so it was stopped anyway, maybe mid-batch; "
            + unknown,
        )
    return StopOutcome(True, True, None, waited_s, None)


def _checkpoint_of(query: Any) -> str | None:
    """The query's resolved checkpoint root, from the JVM (classic PySpark); None elsewhere (Spark Connect)."""
    try:
        return str(query._jsq.streamingQuery().resolvedCheckpointRoot())
    except Exception as exc:  # Spark Connect or an internal API change: the caller can pass checkpoint=
        log.info("query %s: checkpoint location not available from the JVM (%s)", getattr(query, "id", "?"), exc)
        return None
