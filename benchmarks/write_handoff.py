"""A blocking write's hand-over to a thread and back: the event loop's executor vs the daemon's write threads.

Every write on the embedded log (and a big or claimed one on Kafka) runs in a thread while its request
waits on the event loop, and with many writers the loop's CPU per request is what bounds the daemon's
commits per second (benchmarks/RESULTS.md, rounds 9-16). This measures only the hand-over, both ways
side by side in one process and one run, alternating ``--rounds`` times:

* ``executor``: ``loop.run_in_executor`` on a ``ThreadPoolExecutor`` of the same size (what the
  daemon did before round 16);
* ``write_threads``: ``emulator.service.write_threads.WriteThreads.submit`` (what it does now).

Each hand-over runs a no-op call and is awaited as ``WriteSection`` awaits a write (``asyncio.wait``
with a timeout), ``--n`` times in a row on uvloop; reported per hand-over: the wall time from
hand-over to resumption (p50, p99) and the event loop thread's CPU (``time.thread_time``), and the
ratio of the write threads' over the executor's. Writes ``benchmarks/results/write-handoff-<utc>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

from benchmarks.support import command_line, machine, median, percentile, write_results
from emulator.service.write_threads import THREADS, WriteThreads


def _noop() -> None:
    return None


async def _phase(submit: Callable[[], asyncio.Future[Any]], n: int) -> dict[str, float]:
    walls: list[float] = []
    cpu0 = time.thread_time()
    for _ in range(n):
        started = time.perf_counter()
        call = submit()
        done, _ = await asyncio.wait({call}, timeout=10.0)
        if not done:
            raise RuntimeError("a no-op hand-over took 10 s")
        call.result()
        walls.append(time.perf_counter() - started)
    loop_cpu = time.thread_time() - cpu0
    return {
        "wall_p50_us": round(percentile(walls, 50) * 1e6, 1),
        "wall_p99_us": round(percentile(walls, 99) * 1e6, 1),
        "loop_cpu_us": round(loop_cpu / n * 1e6, 1),
    }


async def _run(n: int, rounds: int) -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    executor = concurrent.futures.ThreadPoolExecutor(THREADS, thread_name_prefix="bench-executor")
    threads = WriteThreads(THREADS, name="bench-write")
    ways: dict[str, Callable[[], asyncio.Future[Any]]] = {
        "executor": lambda: loop.run_in_executor(executor, _noop),
        "write_threads": lambda: threads.submit(_noop),
    }
    for submit in ways.values():  # warm up: threads started, code paths hot
        await _phase(submit, 500)
    rows: list[dict[str, Any]] = []
    try:
        for round_ in range(1, rounds + 1):
            order = list(ways) if round_ % 2 else list(reversed(ways))
            for way in order:
                row = {"round": round_, "way": way, **await _phase(ways[way], n)}
                print(f"  {row}", flush=True)
                rows.append(row)
    finally:
        executor.shutdown(wait=False)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5000, help="hand-overs per way and round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import uvloop

    print(f"write hand-over: executor vs write threads, {args.n} each, {args.rounds} rounds (uvloop)")
    rows = uvloop.run(_run(args.n, args.rounds))
    summary: dict[str, Any] = {}
    for way in ("executor", "write_threads"):
        mine = [r for r in rows if r["way"] == way]
        summary[way] = {key: median([r[key] for r in mine]) for key in ("wall_p50_us", "wall_p99_us", "loop_cpu_us")}
    summary["ratio"] = {
        key: round(summary["write_threads"][key] / summary["executor"][key], 2) for key in summary["executor"]
    }
    print(f"medians: {summary}")
    path = write_results(
        "write-handoff",
        {"command": command_line(), "machine": machine(), "params": vars(args), "rounds": rows, "summary": summary},
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
