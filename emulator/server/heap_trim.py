"""Giving the memory of large requests back to the operating system.

Python hands objects larger than 512 bytes (a request's body, a 20 MB offset value, the text of a big
GET) to the C library's ``malloc``. When they die, glibc keeps their pages: freed memory inside its
heaps is returned only from the very top, and everything below a live allocation stays resident.
Six PATCHes of 5 MB values and one GET of them grew an embedded daemon from 75 to 251 MB of RSS,
and it stayed there idle; glibc's ``malloc_trim(0)``, which hands the free pages inside its heaps
back (``madvise``), brought it to 163 MB, what the daemon still holds (the values and their index).
An operator who sizes a container by its RSS after a burst sees the burst forever otherwise.

So a thread of its own looks every ``CHECK_S`` seconds. It trims when the RSS has grown by
``GROWTH_BYTES`` since its last look that ended in a trim or a decision not to trim *and* glibc holds
at least ``FREE_BYTES`` free (``mallinfo2``): growth that is live data (a view that grows) is left
alone, and a trim follows a burst within seconds. ``malloc_trim`` runs without the interpreter lock
(ctypes releases it) and holds glibc's arena locks while it walks the free chunks, a few ms at most;
at most once per look. Where the C library has neither function (musl, macOS), nothing runs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

log = logging.getLogger(__name__)

CHECK_S = 5.0
"""Seconds between looks: a thread wake-up and two reads, negligible next to an idle daemon's ~3 ms of CPU a second."""
GROWTH_BYTES = 32 * 1024 * 1024
"""RSS growth since the last decision that makes a look ask glibc what it holds free."""
FREE_BYTES = 16 * 1024 * 1024
"""Free memory inside glibc's heaps worth a trim."""


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (2.33 and later): ten ``size_t``; ``fordblks`` is the free total."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


class GlibcHeap:
    """The two glibc calls, or ``None`` from ``load`` where the C library lacks them."""

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._mallinfo2 = libc.mallinfo2
        self._mallinfo2.restype = _MallInfo2
        self._mallinfo2.argtypes = []
        self._malloc_trim = libc.malloc_trim
        self._malloc_trim.restype = ctypes.c_int
        self._malloc_trim.argtypes = [ctypes.c_size_t]

    @staticmethod
    def load() -> GlibcHeap | None:
        name = ctypes.util.find_library("c")
        if name is None:
            return None
        try:
            libc = ctypes.CDLL(name)
            return GlibcHeap(libc) if hasattr(libc, "mallinfo2") and hasattr(libc, "malloc_trim") else None
        except OSError:
            return None

    def free_bytes(self) -> int:
        return int(self._mallinfo2().fordblks)

    def trim(self) -> None:
        self._malloc_trim(0)


def resident_bytes() -> int:
    """The process's RSS, from ``/proc/self/statm`` (pages); 0 where there is no ``/proc``."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class Heap(Protocol):
    """What a trimmer asks of the C library's heap (``GlibcHeap``)."""

    def free_bytes(self) -> int: ...

    def trim(self) -> None: ...


class HeapTrimmer:
    """The looking thread and its two counters (``connect_offsets_heap_trims_total``,
    ``connect_offsets_heap_returned_bytes_total``). ``look`` is one look, callable on its own."""

    def __init__(
        self,
        heap: Heap,
        registry: CollectorRegistry,
        resident: Callable[[], int] = resident_bytes,
        check_s: float = CHECK_S,
    ) -> None:
        self._heap = heap
        self._resident = resident
        self._check_s = check_s
        self._baseline = resident()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._trims = Counter(
            "connect_offsets_heap_trims",
            "Times the daemon gave free memory of its C heap back to the operating system (malloc_trim)",
            registry=registry,
        )
        self._returned = Counter(
            "connect_offsets_heap_returned_bytes",
            "Resident memory the daemon's trims gave back (RSS before minus after each trim)",
            registry=registry,
        )

    def look(self) -> bool:
        """Trim if the RSS grew past ``GROWTH_BYTES`` and glibc holds ``FREE_BYTES`` free; whether it did."""
        before = self._resident()
        if before - self._baseline < GROWTH_BYTES:
            return False
        free = self._heap.free_bytes()
        if free < FREE_BYTES:  # the growth is live data: look again only after as much more
            self._baseline = before
            return False
        self._heap.trim()
        after = self._resident()
        self._baseline = after
        self._trims.inc()
        self._returned.inc(max(before - after, 0))
        log.debug("gave %d bytes of free heap back (RSS %d -> %d bytes)", free, before, after)
        return True

    def start(self) -> Callable[[], None]:
        """Start looking; returns the function that stops it."""
        self._thread = threading.Thread(target=self._run, name="heap-trim", daemon=True)
        self._thread.start()
        return self.stop

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._check_s):
            try:
                self.look()
            except Exception:  # never the daemon's end: a failed look only keeps the memory
                log.exception("looking for free heap to give back failed")


def start_trimming(registry: CollectorRegistry) -> Callable[[], None]:
    """The daemon's trimmer, started; a no-op stop where the C library has no ``malloc_trim``."""
    heap = GlibcHeap.load()
    if heap is None:
        log.debug("the C library has no mallinfo2/malloc_trim: freed heap memory stays with the process")
        return lambda: None
    return HeapTrimmer(heap, registry).start()
