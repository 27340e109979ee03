"""The large writes' lane: first come first served, within each one's deadline, and never a turn lost.

A turn lost (a waiter that leaves without passing on a turn it was given, or a refused write that
keeps its turn) would stop every large write of the daemon for good; each way out is checked here
by taking a turn afterwards.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import pytest

from emulator.model.errors import InvalidRequest, LogTimeout, NotReadyYet
from emulator.service.bulk_lane import BulkLane
from emulator.service.writer import Deadline


async def _free_again(lane: BulkLane) -> None:
    """The lane is idle and a new write gets its turn at once."""
    assert (lane.running, lane.waiting) == (0, 0)
    async with asyncio.timeout(0.1), lane.turn(Deadline(5), "A check"):
        assert lane.running == 1


def test_writes_take_their_turns_in_the_order_they_came() -> None:
    async def scenario() -> list[int]:
        lane = BulkLane()
        order: list[int] = []
        release = asyncio.Event()

        async def write(n: int) -> None:
            async with lane.turn(Deadline(5), f"Write {n}"):
                order.append(n)
                if n == 0:
                    await release.wait()

        tasks = [asyncio.create_task(write(0))]
        await asyncio.sleep(0.01)
        for n in range(1, 6):
            tasks.append(asyncio.create_task(write(n)))
            await asyncio.sleep(0.01)
        assert (lane.running, lane.waiting) == (1, 5)
        release.set()
        await asyncio.gather(*tasks)
        await _free_again(lane)
        return order

    assert asyncio.run(scenario()) == [0, 1, 2, 3, 4, 5]


def test_a_write_whose_turn_does_not_come_by_its_deadline_is_refused_and_the_next_keeps_its_place() -> None:
    async def scenario() -> tuple[str, list[str]]:
        lane = BulkLane()
        release = asyncio.Event()
        order: list[str] = []

        async def write(name: str, seconds: float) -> None:
            async with lane.turn(Deadline(seconds), name):
                order.append(name)
                if name == "first":
                    await release.wait()

        first = asyncio.create_task(write("first", 5))
        await asyncio.sleep(0.01)
        short = asyncio.create_task(write("short", 0.2))
        await asyncio.sleep(0.01)
        patient = asyncio.create_task(write("patient", 5))
        with pytest.raises(LogTimeout) as refused:
            await short
        assert lane.waiting == 1
        release.set()
        await asyncio.gather(first, patient)
        await _free_again(lane)
        return str(refused.value), order

    message, order = asyncio.run(scenario())
    assert message.startswith("short waited 0.2 s (--write-timeout) for its turn behind 1 other large write(s)")
    assert order == ["first", "patient"]


@dataclass
class _Queued:
    """``first`` holding the turn, then ``abandoned`` (whose client leaves when ``gone`` is set) and
    ``after`` waiting, in that order; ``order`` lists the writes that got their turn."""

    lane: BulkLane
    release: asyncio.Event
    order: list[str] = field(default_factory=list)
    gone: bool = False
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    async def client_gone(self) -> bool:
        return self.gone

    async def write(self, name: str) -> None:
        async with self.lane.turn(Deadline(10), name, self.client_gone if name == "abandoned" else None):
            self.order.append(name)
            if name == "first":
                await self.release.wait()


async def _three_queued() -> _Queued:
    queued = _Queued(BulkLane(), asyncio.Event())
    for name in ("first", "abandoned", "after"):
        queued.tasks[name] = asyncio.create_task(queued.write(name))
        await asyncio.sleep(0.01)
    return queued


def test_a_waiting_write_whose_client_left_goes_without_its_turn_and_writes_nothing() -> None:
    """The lane QA's retrying clients: each try that timed out on the client's side kept its place,
    was written when its turn came, and the retries queued behind them."""

    async def scenario() -> tuple[str, list[str], float]:
        queued = await _three_queued()
        queued.gone = True
        started = asyncio.get_running_loop().time()
        with pytest.raises(InvalidRequest) as left:
            await queued.tasks["abandoned"]
        took = asyncio.get_running_loop().time() - started
        assert queued.lane.waiting == 1
        queued.release.set()
        await asyncio.gather(queued.tasks["first"], queued.tasks["after"])
        await _free_again(queued.lane)
        return str(left.value), queued.order, took

    message, order, took = asyncio.run(scenario())
    assert message == (
        "The connection closed while abandoned waited for its turn among large writes; nothing was written"
    )
    assert order == ["first", "after"]
    assert took < 1.0, f"left the queue {took:.2f} s after its client did"


def test_a_client_that_left_just_as_its_turn_came_passes_the_turn_on() -> None:
    async def scenario() -> list[str]:
        queued = await _three_queued()
        queued.gone = True
        queued.release.set()  # the turn goes to "abandoned", whose client left: it must go on to "after"
        await queued.tasks["first"]
        with pytest.raises(InvalidRequest):
            await queued.tasks["abandoned"]
        await queued.tasks["after"]
        await _free_again(queued.lane)
        return queued.order

    assert asyncio.run(scenario()) == ["first", "after"]


def test_a_cancelled_waiter_and_a_failing_write_leave_no_turn_behind() -> None:
    async def scenario() -> None:
        lane = BulkLane()
        release = asyncio.Event()

        async def holding() -> None:
            async with lane.turn(Deadline(10), "first"):
                await release.wait()

        first = asyncio.create_task(holding())
        await asyncio.sleep(0.01)

        async def waiting() -> None:
            async with lane.turn(Deadline(10), "cancelled"):
                raise AssertionError("never its turn")

        cancelled = asyncio.create_task(waiting())
        await asyncio.sleep(0.01)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        release.set()
        await first
        with pytest.raises(RuntimeError):
            async with lane.turn(Deadline(10), "failing"):
                raise RuntimeError("the write failed")
        await _free_again(lane)

    asyncio.run(scenario())


def test_a_closed_lane_refuses_the_writes_waiting_and_later_ones_but_the_running_one_finishes() -> None:
    async def scenario() -> tuple[str, bool]:
        lane = BulkLane()
        release = asyncio.Event()
        finished = False

        async def running() -> None:
            nonlocal finished
            async with lane.turn(Deadline(10), "running"):
                await release.wait()
                finished = True

        first = asyncio.create_task(running())
        await asyncio.sleep(0.01)

        async def waiting() -> None:
            async with lane.turn(Deadline(10), "waiting"):
                raise AssertionError("started after the shutdown began")

        waiter = asyncio.create_task(waiting())
        await asyncio.sleep(0.01)
        lane.close()
        with pytest.raises(NotReadyYet) as refused:
            await waiter
        with pytest.raises(NotReadyYet):
            async with lane.turn(Deadline(10), "later"):
                raise AssertionError("started after the shutdown began")
        release.set()
        await first
        return str(refused.value), finished

    message, finished = asyncio.run(scenario())
    assert message == "the daemon is stopping: this large write was not started; nothing was written"
    assert finished


def test_a_turn_that_comes_as_the_deadline_passes_is_refused_as_waited_and_passed_on() -> None:
    """Found by a fresh-clone CI run: the loop was busy when a turn was passed on and a waiter's
    deadline was due at once, so the waiter took the turn with no time left, and its first pass was
    refused at once saying reading its offsets took longer than the deadline, after no reading."""

    async def scenario() -> tuple[list[str], str]:
        lane = BulkLane()
        ran: list[str] = []

        async def holder() -> None:
            async with lane.turn(Deadline(5), "The holder"):
                await asyncio.sleep(0.05)
                time.sleep(0.3)  # the loop busy past the waiter's deadline; the turn is passed on after it

        async def waiter() -> None:
            async with lane.turn(Deadline(0.2), "The waiter"):
                ran.append("waiter")

        held = asyncio.create_task(holder())
        await asyncio.sleep(0.01)
        with pytest.raises(LogTimeout) as refused:
            await waiter()
        await held
        await _free_again(lane)
        return ran, str(refused.value)

    ran, message = asyncio.run(scenario())
    assert ran == [], "the waiter's write was started after its deadline"
    assert message.startswith("The waiter waited 0.2 s (--write-timeout) for its turn behind 1 other large write(s)")
