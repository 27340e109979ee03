"""A condition of the embedded log that a write of ours runs into and nothing announces the end of.

The storage refusing writes (``storage_faults``) and another process holding SQLite's write lock
(``lock_contention``) are learnt from a write that failed, and readiness reports them (``/readyz``
503) until they are over. Nothing tells this process when that is: with ``/readyz`` at 503 no write
may come to prove it. So while the condition holds, a thread of its own probes every ``interval_s``,
and the first success, the probe's or a write's, ends it (logged with how long it lasted). Readiness
reads two attributes and never waits; nothing is probed while the condition does not hold.
"""

from __future__ import annotations

import abc
import logging
import threading
import time

log = logging.getLogger(__name__)


class ProbedCondition(abc.ABC):
    """Whether the condition holds, since when, and the probe thread that notices its end."""

    _PROBE_THREAD = "embedded-log-probe"
    _log = log
    """The subclass's own logger: its lines keep the name of the module that says what they are about."""

    def __init__(self, description: str, interval_s: float) -> None:
        self._description = description
        self._interval_s = interval_s
        self._lock = threading.Lock()  # guards _since, the subclass's details and _prober
        self._since: float | None = None  # monotonic start of the condition, None while it does not hold
        self._prober: threading.Thread | None = None
        self._stop = threading.Event()

    def _begin(self) -> bool:
        """Called under ``_lock`` by the write that found the condition: True when it begins with this
        write (the caller logs it), and then the probe starts (unless the log is closing)."""
        if self._since is not None:
            return False
        self._since = time.monotonic()
        if not self._stop.is_set():
            self._prober = threading.Thread(target=self._probe_until_over, name=self._PROBE_THREAD, daemon=True)
            self._prober.start()
        return True

    def succeeded(self) -> None:
        """A write of ours (or the probe) succeeded: the condition is over. One attribute read when it
        did not hold."""
        if self._since is None:
            return
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            self._log.warning(self._ended(time.monotonic() - since))

    def _held_for(self) -> float | None:
        """Seconds the condition has held, or None; never blocks."""
        since = self._since
        return None if since is None else time.monotonic() - since

    def close(self) -> None:
        """Stop probing (the log is closing). Idempotent."""
        self._stop.set()
        prober = self._prober
        if prober is not None and prober is not threading.current_thread():
            prober.join(timeout=10.0)

    def _probe_until_over(self) -> None:
        while not self._stop.wait(self._interval_s):
            if self._since is None or self._prober is not threading.current_thread():
                return  # a write succeeded first (and a later run of the condition has a probe of its own)
            over = self._probe_once()
            if over is None:
                return
            if over:
                self.succeeded()
                return

    @abc.abstractmethod
    def _probe_once(self) -> bool | None:
        """One probe: True when the condition is over, False when it still holds, None to stop probing."""

    @abc.abstractmethod
    def _ended(self, seconds: float) -> str:
        """The WARNING that says the condition is over after ``seconds``."""
