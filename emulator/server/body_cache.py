"""Rendered GET bodies, kept until what they show changes.

A 10,000-partition connector's GET costs ~90 ms of Python on these machines (rows from the view,
then JSON; benchmarks/RESULTS.md), on every request, although a connector's offsets rarely change
between two reads of it. Each body is kept with the version of the data it was rendered from
(``OffsetsService.source_version``: the views' per-connector counters and the connector's stores).
The version is taken *before* rendering and versions only grow, so a body that raced with a write
is stored under the older version and never served once the write is visible (read-your-writes
holds: a write bumps the version before it answers).

Bounded: bodies under ``min_bytes`` are not kept (rendering them costs about what a lookup saves)
unless the caller asks (the connector list, one body per daemon),
and at most ``budget_bytes`` are held, the least recently used forgotten first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024
DEFAULT_MIN_BYTES = 16 * 1024


class BodyCache:
    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES, min_bytes: int = DEFAULT_MIN_BYTES) -> None:
        self.budget_bytes = budget_bytes
        self.min_bytes = min_bytes
        self._lock = threading.Lock()
        self._bodies: OrderedDict[Hashable, tuple[Hashable, bytes]] = OrderedDict()
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, version: Hashable) -> bytes | None:
        with self._lock:
            found = self._bodies.get(key)
            if found is None or found[0] != version:
                self.misses += 1
                return None
            self._bodies.move_to_end(key)
            self.hits += 1
            return found[1]

    def put(self, key: Hashable, version: Hashable, body: bytes, keep_small: bool = False) -> None:
        """``keep_small``: keep it whatever its size (one body per daemon, such as the connector list)."""
        with self._lock:
            old = self._bodies.pop(key, None)
            if old is not None:
                self.size_bytes -= len(old[1])
            if (len(body) < self.min_bytes and not keep_small) or len(body) > self.budget_bytes:
                return
            self._bodies[key] = (version, body)
            self.size_bytes += len(body)
            while self.size_bytes > self.budget_bytes:
                _, (_, evicted) = self._bodies.popitem(last=False)
                self.size_bytes -= len(evicted)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"bodies": len(self._bodies), "bytes": self.size_bytes, "hits": self.hits, "misses": self.misses}
