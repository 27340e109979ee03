"""The write threads hand a blocking call's outcome back to the awaiting request, as an executor would."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time
import warnings

import pytest

from emulator.service.write_threads import WRITE_THREADS, WriteThreads

REQUEST = contextvars.ContextVar("request", default="none")


def test_the_call_runs_off_the_loop_in_the_callers_context_and_its_result_comes_back() -> None:
    threads = WriteThreads(threads=2, name="test-write")

    async def main() -> tuple[str, str, str]:
        REQUEST.set("req-1")
        return await threads.submit(lambda: (threading.current_thread().name, REQUEST.get(), "ok"))

    name, request, result = asyncio.run(main())

    assert name.startswith("test-write-") and request == "req-1" and result == "ok"


def test_what_the_call_raises_is_raised_to_the_request() -> None:
    threads = WriteThreads(threads=1, name="test-write-error")

    def fails() -> None:
        raise ValueError("the log refused")

    async def main() -> None:
        await threads.submit(fails)

    with pytest.raises(ValueError, match="the log refused"):
        asyncio.run(main())


def test_a_request_that_stopped_waiting_leaves_the_call_to_finish_quietly() -> None:
    threads = WriteThreads(threads=1, name="test-write-cancel")
    finished = threading.Event()
    errors: list[object] = []

    def slow() -> str:
        time.sleep(0.2)
        finished.set()
        return "written"

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
        future = threads.submit(slow)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await future
        assert future.cancelled()
        await asyncio.sleep(0.4)  # the thread settles the cancelled future on this loop meanwhile

    asyncio.run(main())

    assert finished.is_set() and errors == []


def test_several_calls_wait_at_once_on_several_threads() -> None:
    threads = WriteThreads(threads=3, name="test-write-many")
    barrier = threading.Barrier(3, timeout=5)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(threads.submit(lambda i=i: (barrier.wait(), i)[1]) for i in range(3))))

    assert asyncio.run(main()) == [0, 1, 2]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
def test_a_forked_child_starts_threads_of_its_own() -> None:
    """A child forked after writes (a worker pool, a Spark Python worker) must not queue to the parent's threads."""

    async def write() -> str:
        return await WRITE_THREADS.submit(lambda: threading.current_thread().name)

    assert asyncio.run(write()).startswith("offsets-write-")  # the parent's threads are running
    with warnings.catch_warnings():  # Python 3.12+ warns that forking a process with threads may deadlock
        warnings.simplefilter("ignore", DeprecationWarning)
        child = os.fork()
    if child == 0:  # the child: exit 0 only if a write completes in time
        code = 1
        try:
            code = 0 if asyncio.run(asyncio.wait_for(write(), 5)).startswith("offsets-write-") else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
