"""The memory of a burst of large requests goes back to the operating system once they are done.

Specified on a real daemon: large offset values, written and read, leave glibc with free pages that
only ``malloc_trim`` returns (``emulator.server.heap_trim``). Without it the RSS stayed at its peak
for as long as the daemon ran.
"""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client import CollectorRegistry

from emulator.server.heap_trim import FREE_BYTES, GROWTH_BYTES, GlibcHeap, HeapTrimmer
from tests.fixtures.daemon import DaemonFactory
from tests.fixtures.processes import rss_kib
from tests.integration.connect_helpers import unique
from tests.integration.scrape import scrape

VALUE_CHARS = 5_000_000
VALUES = 6


def rss_bytes(pid: int) -> int:
    return rss_kib(pid)["VmRSS"] * 1024


@pytest.mark.slow
@pytest.mark.skipif(GlibcHeap.load() is None, reason="the C library has no mallinfo2/malloc_trim (not glibc 2.33+)")
def test_after_a_burst_of_large_values_the_daemon_gives_the_freed_memory_back(daemon_factory: DaemonFactory) -> None:
    daemon = daemon_factory()
    assert daemon.proc is not None
    name = unique("big-values")
    started = rss_bytes(daemon.proc.pid)
    peak = started
    for i in range(VALUES):
        offsets = [{"partition": {"p": i}, "offset": {"v": "x" * VALUE_CHARS}}]
        answer = httpx.patch(
            f"{daemon.url}/connectors/{name}/offsets", params={"create": "true"}, json={"offsets": offsets}, timeout=120
        )
        assert answer.status_code == 200, answer.text
        peak = max(peak, rss_bytes(daemon.proc.pid))
    assert len(httpx.get(f"{daemon.url}/connectors/{name}/offsets", timeout=120).json()["offsets"]) == VALUES
    peak = max(peak, rss_bytes(daemon.proc.pid))  # sampled as it goes: a slow burst may see a look midway
    grown = peak - started
    assert grown > 2 * GROWTH_BYTES, f"the burst grew the RSS by {grown} bytes only: nothing to give back"

    # Looks every 5 s. Under load the burst is slow enough for a look (and a trim) midway, after
    # which the rest of the burst grows the heap back to its peak (a CI run met exactly that): so
    # what is awaited is a trim *and* the RSS below the peak, whichever look brings it.
    deadline = time.monotonic() + 20
    while True:
        samples = scrape(daemon.url)
        now = rss_bytes(daemon.proc.pid)
        if samples.value("connect_offsets_heap_trims_total") >= 1 and now < peak - FREE_BYTES:
            break
        assert time.monotonic() < deadline, f"no trim to below the peak 20 s after the burst: RSS {now}, peak {peak}"
        time.sleep(0.5)
    assert samples.value("connect_offsets_heap_returned_bytes_total") >= FREE_BYTES

    # What is still held is still served.
    values = httpx.get(f"{daemon.url}/connectors/{name}/offsets", timeout=120).json()["offsets"]
    assert sorted(o["partition"]["p"] for o in values) == list(range(VALUES))
    assert all(len(o["offset"]["v"]) == VALUE_CHARS for o in values)


class Heap:
    """glibc's answers, as a test sets them: how much it holds free, and the trims asked of it."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.trims = 0

    def free_bytes(self) -> int:
        return self.free

    def trim(self) -> None:
        self.trims += 1


def test_growth_that_is_live_data_is_not_trimmed_and_growth_with_free_memory_is() -> None:
    resident = [100 * 1024 * 1024]
    heap = Heap(free=1024 * 1024)
    registry = CollectorRegistry()
    trimmer = HeapTrimmer(heap, registry, resident=lambda: resident[0])

    resident[0] += GROWTH_BYTES - 1
    assert not trimmer.look() and heap.trims == 0, "less growth than GROWTH_BYTES: glibc is not even asked"

    resident[0] += 1
    assert not trimmer.look() and heap.trims == 0, "grown, but glibc holds little free: live data"
    resident[0] += GROWTH_BYTES // 2
    assert not trimmer.look(), "measured from the last decision, not from the start"

    heap.free = FREE_BYTES
    resident[0] += GROWTH_BYTES
    assert trimmer.look() and heap.trims == 1
    assert registry.get_sample_value("connect_offsets_heap_trims_total") == 1
    assert trimmer.look() is False, "right after a trim nothing has grown"
