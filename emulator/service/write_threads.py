"""Threads that run the offsets log's blocking writes for the event loop, and wake it when done.

Every write that cannot be handed to the log without blocking (every write on the embedded log: a
SQLite transaction with its fsync) runs in a thread while the request waits. The loop's own
executor (``run_in_executor``) pays for a ``concurrent.futures.Future`` with its condition
variable, a second future chained to it and a callback hop, on the loop and in the thread; here the
call goes over a plain queue and the thread resolves the request's asyncio future itself (one
``call_soon_threadsafe``). Measured on this project's 2-core machines (``python -m
benchmarks.write_handoff``, both side by side, 3 runs): 34-45 µs of the loop's CPU per hand-over
against 63-68 µs through the executor (0.50-0.71×), 65-73 µs from hand-over to resumption against
90-95 µs; a whole one-partition PATCH on the embedded log, the app driven in-process: 0.387 against
0.418 ms of the loop's CPU (medians of 6 runs alternated), its latency within the runs' spread
(benchmarks/RESULTS.md, round 16). The loop's CPU per commit is what bounds many writers on one
daemon.

One set of threads per process, started on first use and never stopped (daemon threads, like the
executor's): writes of every app in the process share them, as they share the interpreter lock. There
are ``THREADS`` of them, as many as the loop's default executor has on two cores, so that several
writes can wait on the log at once: the embedded log writes every waiting one in one transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

THREADS = 6

_Call = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[], Any]]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """On the loop: the request may have stopped waiting (cancelled); then nobody reads the outcome."""
    if future.done():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


class WriteThreads:
    """A fixed set of threads taking calls from one queue; ``submit`` from a running event loop."""

    def __init__(self, threads: int = THREADS, name: str = "offsets-write") -> None:
        self._threads = threads
        self._name = name
        self._queue: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._started = False
        self._lock = threading.Lock()

    def submit(self, call: Callable[[], T]) -> asyncio.Future[T]:
        """Run ``call`` in one of the threads, in a copy of the caller's context (log fields); the
        future is resolved on the caller's loop. Cancelling it does not stop the call."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._started:
            self._start()
        self._queue.put((loop, future, contextvars.copy_context(), call))
        return future

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            for i in range(self._threads):
                threading.Thread(target=self._serve, name=f"{self._name}-{i}", daemon=True).start()
            self._started = True

    def _serve(self) -> None:
        take = self._queue.get
        while True:
            loop, future, context, call = take()
            result: Any = None
            error: BaseException | None = None
            try:
                result = context.run(call)
            except BaseException as exc:  # the request gets whatever the log raised, as from an executor
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting any more
                loop.call_soon_threadsafe(_settle, future, result, error)
            del loop, future, context, call, result, error  # no references kept while idle

    def _forget_threads(self) -> None:
        """In a forked child: the parent's threads do not exist there, so start afresh on first use."""
        self._queue = queue.SimpleQueue()
        self._started = False
        self._lock = threading.Lock()


WRITE_THREADS = WriteThreads()
os.register_at_fork(after_in_child=WRITE_THREADS._forget_threads)
