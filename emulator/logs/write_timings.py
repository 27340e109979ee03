"""How long the offsets log takes to make a write durable, for the daemon's metrics and its log.

A commit's latency is the daemon's own work plus the log's: on the embedded log the SQLite
transaction with its fsync, on Kafka the broker's acknowledgement. When the tail of the request
latencies grows, an operator needs to know which of the two grew. A disk whose fsync stalls makes
every write wait, whatever the daemon does: on this project's machines single fsyncs of the embedded
log stalled for up to 0.6 s under 32 writers while the same run on tmpfs never passed 15 ms
(benchmarks/RESULTS.md, round 15). So each backend times what only it sees, here, and the
metrics show it beside the request durations; a write slower than ``SLOW_WRITE_S`` is also logged,
at most once per ``WARN_EVERY_S``, naming the log, so the stall is in the daemon's log and not only
in a dashboard.

Timing costs one clock read and a short locked update per write (per transaction on the embedded
log, where concurrent writes share one), with fixed buckets, so it stays on in production.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Seconds: a local fsync or a broker round trip takes a fraction of a millisecond to a few, a
stalling disk or a broker electing a leader hundreds of milliseconds to seconds, and a request
gives up at its deadline (``--write-timeout``, 10 s by default)."""

SLOW_WRITE_S = 1.0
WARN_EVERY_S = 60.0


@dataclass(frozen=True, slots=True)
class WriteTimingsSnapshot:
    """Totals since the log opened, in Prometheus's histogram shape."""

    cumulative: tuple[tuple[float, int], ...]
    """``(upper bound, writes that took at most that long)``, the last bound ``inf``."""
    count: int
    sum_s: float
    records: int
    """Records those writes carried (over ``count``: how many records a write carried on average)."""
    slow: int
    """Writes that took ``SLOW_WRITE_S`` or more."""
    last_slow_at: float | None
    """Wall-clock time (``time.time()``) the latest of those ended."""
    last_slow_s: float | None

    def prometheus_buckets(self) -> list[tuple[str, float]]:
        """``cumulative`` as a Prometheus histogram's buckets (``le`` strings, the last ``+Inf``)."""
        return [("+Inf" if bound == float("inf") else repr(bound), n) for bound, n in self.cumulative]


class WriteTimings:
    """Durations of one log's successful writes.

    ``waits_on`` names what a slow write waited for in the warning (``"the disk's fsync"``,
    ``"the broker's acknowledgement"``); ``clock`` is for tests.
    """

    def __init__(self, description: str, waits_on: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._description = description
        self._waits_on = waits_on
        self._clock = clock
        self._lock = threading.Lock()
        self._counts = [0] * (len(BUCKETS) + 1)
        self._count = 0
        self._sum_s = 0.0
        self._records = 0
        self._slow = 0
        self._slow_unreported = 0
        self._warned_at: float | None = None
        self._last_slow: tuple[float, float] | None = None  # (ended at, wall clock; seconds)

    def observe(self, seconds: float, records: int) -> None:
        """One write of ``records`` records became durable ``seconds`` after it started."""
        warn = 0
        with self._lock:
            self._counts[bisect.bisect_left(BUCKETS, seconds)] += 1
            self._count += 1
            self._sum_s += seconds
            self._records += records
            if seconds >= SLOW_WRITE_S:
                self._slow += 1
                self._last_slow = (time.time(), seconds)
                self._slow_unreported += 1
                now = self._clock()
                if self._warned_at is None or now - self._warned_at >= WARN_EVERY_S:
                    self._warned_at = now
                    warn, self._slow_unreported = self._slow_unreported, 0
        if warn:
            log.warning(
                "%s: a write took %.2f s to become durable (%d write(s) of %g s or more since the last such "
                "warning); it waited for %s, not for the daemon",
                self._description,
                seconds,
                warn,
                SLOW_WRITE_S,
                self._waits_on,
            )

    def snapshot(self) -> WriteTimingsSnapshot:
        with self._lock:
            counts = list(self._counts)
            count, sum_s, records = self._count, self._sum_s, self._records
            slow, last_slow = self._slow, self._last_slow
        cumulative: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*BUCKETS, float("inf")), counts, strict=True):
            running += n
            cumulative.append((bound, running))
        return WriteTimingsSnapshot(
            tuple(cumulative),
            count,
            sum_s,
            records,
            slow,
            None if last_slow is None else last_slow[0],
            None if last_slow is None else last_slow[1],
        )
