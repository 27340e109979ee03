"""Write sections: one critical section per connector, never one for the whole daemon.

A connector's writes are decided one at a time (check, write, record), within a deadline; writes
to different connectors go on side by side; a write that spans connectors (an import) takes the
sections of the connectors it names, in sorted order, and other connectors' writes go on meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
from emulator.model.connectors import NoConnectCluster
from emulator.model.errors import LogTimeout, LogUnavailable
from emulator.model.sequences import SequenceTracker
from emulator.service.write_guard import NO_AUTH, WriteGuard
from emulator.service.writer import ConnectorLocks, Deadline, OffsetsWriter
from emulator.view.offset_view import OffsetView


def test_sections_of_different_connectors_are_held_at_the_same_time() -> None:
    async def scenario() -> None:
        locks = ConnectorLocks()
        await locks.acquire("a", 1.0)
        await locks.acquire("b", 1.0)  # does not wait for "a"
        locks.release("a")
        locks.release("b")

    asyncio.run(asyncio.wait_for(scenario(), 5))


def test_a_connectors_second_section_waits_and_gives_up_at_its_deadline() -> None:
    async def scenario() -> None:
        locks = ConnectorLocks()
        await locks.acquire("a", 1.0)
        with pytest.raises(TimeoutError):
            await locks.acquire("a", 0.2)
        locks.release("a")
        await locks.acquire("a", 0.2)  # the one that gave up left nothing behind
        locks.release("a")

    asyncio.run(asyncio.wait_for(scenario(), 5))


def test_a_write_spanning_connectors_waits_for_theirs_alone_and_holds_them_off_meanwhile() -> None:
    async def scenario() -> list[str]:
        locks, order = ConnectorLocks(), []
        await locks.acquire("z", 1.0)

        async def spanning() -> None:
            taken = await locks.acquire_many(["z", "a"], 2.0)  # "a" first: sorted
            order.append("a+z")
            await asyncio.sleep(0.05)
            locks.release_many(taken)
            order.append("a+z done")

        async def section(name: str) -> None:
            await locks.acquire(name, 2.0)
            order.append(name)
            locks.release(name)

        task = asyncio.create_task(spanning())
        await asyncio.sleep(0.05)
        other = asyncio.create_task(section("c"))  # a connector the spanning write does not name
        late = asyncio.create_task(section("a"))
        await asyncio.sleep(0.05)
        assert order == ["c"], "the spanning write holds 'a' and waits for 'z'; 'c' does not wait; 'a' waits behind it"
        locks.release("z")
        await asyncio.gather(task, other, late)
        return order

    assert asyncio.run(asyncio.wait_for(scenario(), 5)) == ["c", "a+z", "a+z done", "a"]


def test_two_writes_spanning_the_same_connectors_in_opposite_orders_never_wait_for_each_other() -> None:
    async def scenario() -> None:
        locks = ConnectorLocks()

        async def spanning(names: list[str]) -> None:
            for _ in range(50):
                taken = await locks.acquire_many(names, 2.0)
                await asyncio.sleep(0)
                locks.release_many(taken)

        await asyncio.gather(spanning(["x", "y", "z"]), spanning(["z", "y", "x"]), spanning(["y", "x"]))
        assert not locks.importing

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_write_spanning_connectors_that_times_out_holds_none_of_them() -> None:
    async def scenario() -> None:
        locks = ConnectorLocks()
        await locks.acquire("m", 1.0)
        with pytest.raises(TimeoutError):
            await locks.acquire_many(["a", "m", "z"], 0.2)  # takes "a", then waits for "m"
        assert not locks.importing
        await locks.acquire("a", 0.2)  # given back
        await locks.acquire("z", 0.2)  # never taken
        for name in ("a", "m", "z"):
            locks.release(name)

    asyncio.run(asyncio.wait_for(scenario(), 5))


def test_a_write_waiting_for_a_busy_connector_answers_log_timeout_having_written_nothing(tmp_path: Path) -> None:
    log = EmbeddedOffsetLog(tmp_path, partitions=3, synchronous="NORMAL")
    log.open()
    try:
        view = OffsetView()
        writer = OffsetsWriter(log, view, WriteGuard(log, NoConnectCluster(), SequenceTracker()), 0.3)
        mine = writer.planned(b'["c",{"f":"a"}]', b'{"p":1}', existing=False)
        theirs = writer.planned(b'["other",{"f":"a"}]', b'{"p":1}', existing=False)

        async def scenario() -> None:
            async with writer.section("c", Deadline(5.0)):
                with pytest.raises(LogTimeout, match="nothing was written"):
                    await writer.write("c", [mine], NO_AUTH)
                await writer.write("other", [theirs], NO_AUTH)  # another connector is not held up

        asyncio.run(asyncio.wait_for(scenario(), 10))
        assert sum(log.end_offsets().values()) == 1, "only the other connector's record reached the log"
        assert view.connectors() == ["other"]
    finally:
        log.close()


class _StalledConfigTopic(NoConnectCluster):
    """A Connect cluster whose config topic is not read to its end in any time given (a stalled broker)."""

    def __init__(self) -> None:
        self.given: list[float] = []

    def refresh(self, timeout_s: float) -> None:
        self.given.append(timeout_s)
        time.sleep(timeout_s)
        raise LogUnavailable("Connect's config topic was not read to its end")


def test_a_claim_reads_connects_config_topic_within_its_own_deadline_not_the_logs_30_s(tmp_path: Path) -> None:
    """A claim holds its connector's write section while it reads the config topic; with the log's own 30 s
    a stalled broker kept every write of the connector waiting that long after the claim had answered."""
    log = EmbeddedOffsetLog(tmp_path, partitions=3, synchronous="NORMAL")
    log.open()
    try:
        states = _StalledConfigTopic()
        guard = WriteGuard(log, states, SequenceTracker())
        started = time.monotonic()
        with pytest.raises(LogUnavailable):
            asyncio.run(asyncio.wait_for(guard.claim("c", "spark-query", timeout_s=0.5), 10))
        assert states.given and states.given[0] <= 0.5
        assert time.monotonic() - started < 2.0
        assert log.current_claim("c", 1.0) is None, "nothing was claimed"
    finally:
        log.close()
