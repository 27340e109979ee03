"""What a compaction of the embedded log costs the writes that run beside it.

The daemon compacts its embedded log by itself (``--compaction-interval``), while Connect tasks and
operators keep writing, so a compaction must not hold writes up. This loads ``--records`` records of
``--keys`` keys (each key rewritten records/keys times: the state a long-running log reaches), then
compacts it while a writer thread appends one record every 5 ms (``synchronous=FULL``, as the
daemon writes), and reports the appends' latency during the compaction (p50, p99, max), how long
the compaction took and how many records it left. Run it from a worktree of the code before a change
to compare (``benchmarks/RESULTS.md`` says how). Writes ``benchmarks/results/compaction-pause-<utc>.json``.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from benchmarks.support import (
    bench_records,
    command_line,
    load_embedded_log,
    machine,
    percentile,
    workdir,
    write_results,
)
from emulator.codec.keys import encode_key
from emulator.codec.values import encode_offset
from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog


def _run(records: int, keys: int, partitions: int) -> dict[str, Any]:
    directory = workdir("compaction")
    loaded_s = load_embedded_log(
        directory, "connect-offsets", partitions, ((k, v) for k, v, _ in bench_records(records, keys, partitions))
    )
    log = EmbeddedOffsetLog(directory, partitions=partitions)
    log.open()
    latencies: list[float] = []
    compacting = threading.Event()
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            started = time.perf_counter()
            log.append([(encode_key("probe", {"file": f"f{n % 10}"}), encode_offset({"position": n}))], 30)
            if compacting.is_set():
                latencies.append(time.perf_counter() - started)
            time.sleep(0.005)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        time.sleep(0.5)
        compacting.set()
        report = log.compact()
        compacting.clear()
    finally:
        stop.set()
        writer.join()
        log.close()
    return {
        "loaded_s": round(loaded_s, 1),
        "records_before": report.records_before,
        "records_after": report.records_after,
        "compaction_s": round(report.duration_s, 2),
        "appends_during": len(latencies),
        "append_p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "append_p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "append_max_ms": round(max(latencies) * 1000, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=25)
    args = ap.parse_args()
    print(f"compaction of {args.records:,} records of {args.keys:,} keys while a writer appends every 5 ms")
    result = _run(args.records, args.keys, args.partitions)
    print(f"  {result}")
    path = write_results(
        "compaction-pause", {"command": command_line(), "machine": machine(), "params": vars(args), "result": result}
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
