"""The longest single write the view makes a request wait for, at a million live keys.

Every change to the view runs under its lock, which requests on the event loop also take, so the
slowest single change is a pause every request may wait out. This drives an ``OffsetView`` the way
write-through does (one ``apply_acknowledged`` call per record) through four phases, timing each
call:

* ``insert``: ``--keys`` new Connect-shaped keys (``bench_key``), offsets ``{"position":N}``;
* ``grow``: every key rewritten with an offset that no longer fits its record's slack, twice (the
  records move and leave garbage: the second pass crosses the point where garbage outweighs live
  records, and compaction runs);
* ``delete``: half the keys deleted (tombstones).

Reported per phase: calls, mean, p99.9 and the maximum, in microseconds and milliseconds. Run it
from a worktree of an older commit with the same interpreter for a side-by-side comparison
(benchmarks/RESULTS.md says how each round did). Writes ``benchmarks/results/view-pauses-<utc>.json``.
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

from benchmarks.support import bench_key, command_line, machine, percentile, write_results
from emulator.codec.murmur2 import partition_for
from emulator.model.records import LogRecord
from emulator.view.offset_view import OffsetView

PARTITIONS = 25


def timed(view: OffsetView, records: list[LogRecord]) -> dict[str, float]:
    samples: list[float] = []
    apply = view.apply_acknowledged
    clock = time.perf_counter
    for record in records:
        start = clock()
        apply((record,))
        samples.append(clock() - start)
    samples.sort()
    return {
        "calls": len(samples),
        "mean_us": round(sum(samples) / len(samples) * 1e6, 2),
        "p999_ms": round(percentile(samples, 99.9) * 1e3, 3),
        "max_ms": round(samples[-1] * 1e3, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    args = ap.parse_args()

    keys = [bench_key(k) for k in range(args.keys)]
    parts = [partition_for(key, PARTITIONS) for key in keys]
    view = OffsetView()
    offsets = [0] * PARTITIONS
    phases: dict[str, Any] = {}

    def records(values: list[bytes | None], which: range) -> list[LogRecord]:
        batch = []
        for k in which:
            p = parts[k]
            batch.append(LogRecord(keys[k], values[k % len(values)], p, offsets[p], 0))
            offsets[p] += 1
        return batch

    gc.collect()
    gc.disable()  # the collector's own pauses are not the view's; measured as in a warm daemon
    try:
        everyone = range(args.keys)
        plan: list[tuple[str, list[bytes | None]]] = [
            ("insert", [b'{"position":1}']),
            ("grow-1", [b'{"position":1000000000001}']),
            ("grow-2", [b'{"position":1000000000001,"file":"/data/x"}']),
        ]
        for name, values in plan:
            phases[name] = timed(view, records(values, everyone))
            print(f"  {name}: {phases[name]}", flush=True)
        phases["delete-half"] = timed(view, records([None], range(0, args.keys, 2)))
        print(f"  delete-half: {phases['delete-half']}", flush=True)
    finally:
        gc.enable()
    stats = {"live_keys": view.live_keys(), "arena_bytes": view._records.arena_bytes}
    print(f"  {stats}")
    path = write_results(
        "view-pauses",
        {"benchmark": "view_pauses", "command": command_line(), "machine": machine(), "phases": phases, **stats},
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
