"""Memory per live key of the daemon's ``OffsetView``, with Connect-shaped keys.

An ``OffsetView`` gets 100,000 distinct live keys
(``["bench-conn-<k%20>",{"filename":"/data/file-<k>.txt","line":k}]`` → ``{"position":N}``) applied in
batches of 1,000 ``LogRecord`` s, as a log reader delivers them; each batch is dropped once applied, so
what remains is what the view keeps (since round 8 of benchmarks/RESULTS.md: its record arena and
the tables that find records by raw key and by logical partition). Two independent measurements,
each in a fresh interpreter:

* ``rss``: resident set size after ``gc.collect()``, view filled minus view empty (what the OS sees,
  allocator slack included);
* ``tracemalloc``: Python-allocated bytes still live, view filled minus view empty (what the view's
  objects really hold, no allocator slack; tracemalloc's own bookkeeping excluded).

``--updates 10`` applies every key 10 times (the restore benchmark's shape): memory must follow live
keys, not records. Writes ``benchmarks/results/memory-<utc>.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import linecache
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from benchmarks.support import ROOT, bench_key, bench_value, command_line, machine, rss_kib, write_results
from emulator.codec.murmur2 import partition_for
from emulator.model.records import LogRecord
from emulator.view.offset_view import OffsetView

BATCH = 1000


def fill(view: OffsetView, keys: int, updates: int, partitions: int) -> tuple[int, int]:
    """Apply ``keys * updates`` records; returns (records applied, payload bytes of the live keys)."""
    next_offset = [0] * partitions
    payload = 0
    applied = 0
    for update in range(updates):
        for start in range(0, keys, BATCH):
            batch = []
            for k in range(start, min(start + BATCH, keys)):
                key = bench_key(k)
                value = bench_value(update)
                p = partition_for(key, partitions)
                batch.append(LogRecord(key, value, p, next_offset[p], 1_700_000_000_000 + applied))
                next_offset[p] += 1
                applied += 1
                if update == updates - 1:
                    payload += len(key) + len(value)
            view.apply(batch)
            del batch
    return applied, payload


def measure(mode: str, keys: int, updates: int, partitions: int) -> dict[str, Any]:
    if mode == "tracemalloc":
        tracemalloc.start()
    gc.collect()
    view = OffsetView()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0] if mode == "tracemalloc" else rss_kib()["VmRSS"] * 1024
    t0 = time.perf_counter()
    applied, payload = fill(view, keys, updates, partitions)
    elapsed = time.perf_counter() - t0
    gc.collect()
    after = tracemalloc.get_traced_memory()[0] if mode == "tracemalloc" else rss_kib()["VmRSS"] * 1024
    if view.live_keys() != keys or view.stats.records_applied != applied:
        raise SystemExit(f"view holds {view.live_keys()} keys after {view.stats.records_applied} records")
    delta = after - before
    breakdown = []
    if mode == "tracemalloc":
        # Where the bytes still held were allocated: one line of the view (or codec) per row.
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        for stat in snapshot.statistics("lineno")[:12]:
            frame = stat.traceback[0]
            breakdown.append(
                {
                    "where": f"{Path(frame.filename).name}:{frame.lineno}",
                    "code": linecache.getline(frame.filename, frame.lineno).strip(),
                    "bytes_per_key": round(stat.size / keys, 1),
                    "blocks": stat.count,
                }
            )
    return {
        "mode": mode,
        "keys": keys,
        "updates_per_key": updates,
        "records_applied": applied,
        "bytes_before": before,
        "bytes_after": after,
        "delta_bytes": delta,
        "bytes_per_key": round(delta / keys, 1),
        "payload_bytes_per_key": round(payload / keys, 1),
        "apply_s": round(elapsed, 3),
        "records_per_s": round(applied / elapsed),
        "breakdown": breakdown,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--updates", type=int, action="append", help="updates per key (repeatable; default 1 and 10)")
    ap.add_argument("--partitions", type=int, default=25)
    ap.add_argument("--child", choices=("rss", "tracemalloc"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    updates_list = args.updates or [1, 10]

    if args.child:
        print(json.dumps(measure(args.child, args.keys, updates_list[0], args.partitions)))
        return

    payload: dict[str, Any] = {
        "benchmark": "memory",
        "command": command_line(),
        "machine": machine(),
        "params": vars(args) | {"updates": updates_list},
        "runs": [],
    }
    for updates in updates_list:
        # tracemalloc slows allocation ~10x: measured once, on the first updates-per-key setting.
        for mode in ("rss", "tracemalloc") if updates == updates_list[0] else ("rss",):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.memory",
                    "--child",
                    mode,
                    "--keys",
                    str(args.keys),
                    "--updates",
                    str(updates),
                    "--partitions",
                    str(args.partitions),
                ],
                capture_output=True,
                text=True,
                timeout=600,
                cwd=ROOT,
            )
            if out.returncode != 0:
                raise SystemExit(f"memory child ({mode}, updates={updates}) failed:\n{out.stderr[-3000:]}")
            run = json.loads(out.stdout.strip().splitlines()[-1])
            payload["runs"].append(run)
            print(
                f"  {mode:11s} {args.keys:,} live keys, {updates} update(s)/key: "
                f"{run['bytes_per_key']:.0f} bytes/key "
                f"(delta {run['delta_bytes'] / 2**20:.1f} MiB; raw key+value {run['payload_bytes_per_key']:.0f} B; "
                f"apply {run['records_per_s']:,} records/s)",
                flush=True,
            )
    traced = next(r for r in payload["runs"] if r["mode"] == "tracemalloc")
    print("  where the bytes are (tracemalloc, allocation site -> bytes/key):")
    for row in traced["breakdown"]:
        print(f"    {row['bytes_per_key']:7.1f}  {row['where']:28s} {row['code'][:70]}")
    path = write_results("memory", payload)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
