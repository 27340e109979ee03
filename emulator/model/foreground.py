"""How many requests this process is answering right now, so that background work can step aside.

Background threads of the daemon (the history archiver) are pure Python and hold the interpreter
lock while they work. A request that arrives during such a burst waits for it at every hand-over
between the event loop and its worker threads: with history on, one embedded commit's p99 was
1.6–1.9 ms against 1.2–1.4 ms without (benchmarks/RESULTS.md, round 14). Work that can wait a few
milliseconds therefore asks ``FOREGROUND.active`` first and, while requests are being answered,
waits for a gap, within a bound of its own so that it never falls behind under sustained load.

One counter per process, not per app: the interpreter lock it works around is per process too, so
every request served here (of any app) is one a background thread here would slow down. Only the
event loop's thread writes it (``emulator.server.access_log.RequestObserver``); other threads read
an int, which needs no lock.
"""

from __future__ import annotations


class Foreground:
    """A count of requests being answered (the outermost middleware counts them in and out)."""

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = 0


FOREGROUND = Foreground()
