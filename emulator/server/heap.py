"""Keeping Python's cycle collector off the daemon's long-lived objects.

A full (generation 2) collection walks every container object the interpreter tracks: for the
daemon that is mostly what never becomes garbage, the imported modules, FastAPI's and pydantic's
route and schema objects, the app, the log's clients and the view. Under concurrent writes the
objects of requests in flight live long enough to be promoted, which triggers full collections
every half second or so; each walked the whole startup heap (about 80,000 objects) while holding
the interpreter lock, 35–45 ms in the daemon under 32 writers, and every request in flight waited
that long. Those pauses were the 32-writer p99 (benchmarks/RESULTS.md, round 12).

``gc.freeze`` moves every object tracked now into a permanent generation the collector no longer
walks; objects still die by reference counting as before, only reference cycles among frozen
objects would never be collected, so the collector runs once first to leave none behind. Called
once the app is built (before the first request) and again once the replay has read the log to its
end (the view's objects), so a full collection walks only what was created since.

Young collections are made rarer too (``YOUNG_THRESHOLD``): they run when allocations of container
objects outnumber deallocations by the threshold, and with Python's default of 700 the objects of
32 requests in flight crossed it a hundred times a second, about 5 % of the daemon's time, only to
find them still alive. The daemon makes little cyclic garbage, so at 10,000 the young generation is
collected when garbage has accumulated, not when requests are busy. What reference cycles there are
wait longer for collection; a refused request does not leave its body in one (40 PATCHes with
20 MB bodies that are not JSON, each answered 400, left the daemon's RSS where it started).

``CollectorPauses`` times every collection into the daemon's metrics, so that an operator looking at
a latency tail can tell a collector pause from a slow broker. Both act on the whole process (the
collector and its callbacks are process-wide): the daemon installs them in ``wiring.serve``, never
an in-process app, whose test process would keep its tests' reference cycles forever.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram

log = logging.getLogger(__name__)

YOUNG_THRESHOLD = 10_000
"""Net container allocations between young collections (Python's default: 700)."""


def collect_young_less_often() -> None:
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def freeze_long_lived(moment: str) -> None:
    """Collect, then exempt every object alive now from later collections. Blocks for one full
    collection (tens of ms): call it at a moment the daemon is not yet, or not much, serving."""
    started = time.perf_counter()
    collected = gc.collect()
    gc.freeze()
    log.debug(
        "%s: %d objects exempted from garbage collection (%d collected first, %.1f ms)",
        moment,
        gc.get_freeze_count(),
        collected,
        (time.perf_counter() - started) * 1000,
    )


PAUSE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
"""Seconds: a young collection takes tens to hundreds of µs, a full one over a frozen heap about a
millisecond, over an unfrozen one tens of ms."""


class CollectorPauses:
    """A ``gc.callbacks`` entry observing each collection's duration by generation. The collector
    runs on whichever thread allocated, holding the interpreter lock, and collections do not nest,
    so one start time suffices."""

    def __init__(self, registry: CollectorRegistry) -> None:
        pauses = Histogram(
            "connect_offsets_gc_pause_seconds",
            "Duration of each garbage collection by generation (every thread of the daemon waits meanwhile)",
            ["generation"],
            buckets=PAUSE_BUCKETS,
            registry=registry,
        )
        self._by_generation = [pauses.labels(str(generation)) for generation in range(3)]
        frozen = Gauge(
            "connect_offsets_gc_frozen_objects",
            "Objects exempted from garbage collection (the startup heap and the view, once read)",
            registry=registry,
        )
        frozen.set_function(gc.get_freeze_count)
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._by_generation[info["generation"]].observe(time.perf_counter() - self._started)

    def install(self) -> Callable[[], None]:
        """Start observing; returns the function that stops it."""
        gc.callbacks.append(self)
        return lambda: gc.callbacks.remove(self)
