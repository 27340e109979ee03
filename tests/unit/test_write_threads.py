"""The write threads hand a blocking call's outcome back to the awaiting request, as an executor would."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from emulator.service.write_threads import WriteThreads

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
