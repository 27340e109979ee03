"""What the daemon's own compaction costs a daemon that many writers keep busy.

``compaction_pause`` measures the log alone; this runs the daemon. It loads ``--records`` records of
``--keys`` keys, starts ``connect-offsets serve`` on it twice, once with ``--compaction-interval
never`` and once with ``--compaction-interval 3s`` (so the compaction runs during the measurement),
and each time lets ``--writers`` threads PATCH one partition each without pause for ``--seconds``,
side by side on the same machine, with the daemon's defaults otherwise (history archive and
access log on): PATCHes answered, their p50/p99/max, errors, and what the
compaction did (``/status`` ``compaction``). Writes ``benchmarks/results/compaction-load-<utc>.json``.
"""

from __future__ import annotations

import argparse
import collections
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.support import (
    Daemon,
    bench_records,
    command_line,
    load_embedded_log,
    machine,
    percentile,
    workdir,
    write_results,
)


def _phase(work: Path, interval: str, writers: int, seconds: float) -> dict[str, Any]:
    args = ["--data-dir", str(work / "data"), "--compaction-interval", interval]  # history and access log on
    with Daemon(args, work / f"daemon-{interval}.log") as daemon:
        latencies: list[float] = []
        statuses: collections.Counter[int] = collections.Counter()
        stop = threading.Event()

        def write(i: int) -> None:
            with httpx.Client(base_url=daemon.url, timeout=60) as client:
                n = 0
                while not stop.is_set():
                    n += 1
                    body = {"offsets": [{"partition": {"file": "a"}, "offset": {"n": n}}]}
                    started = time.perf_counter()
                    response = client.patch(f"/connectors/writer-{i}/offsets?create=true", json=body)
                    latencies.append(time.perf_counter() - started)
                    statuses[response.status_code] += 1

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join()
        compaction = httpx.get(f"{daemon.url}/status", timeout=60).json()["compaction"]
    return {
        "compaction_interval": interval,
        "patches": len(latencies),
        "statuses": dict(statuses),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "compaction": compaction,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=15.0)
    args = ap.parse_args()
    print(f"compaction under load: {args.records:,} records of {args.keys:,} keys, {args.writers} writers")
    rows = []
    for interval in ("never", "3s"):  # each on a fresh copy of the same records
        work = workdir(f"compaction-load-{interval}")
        entries = ((k, v) for k, v, _ in bench_records(args.records, args.keys, 25))
        load_embedded_log(work / "data", "connect-offsets", 25, entries)
        row = _phase(work, interval, args.writers, args.seconds)
        print(f"  {row}", flush=True)
        rows.append(row)
    path = write_results(
        "compaction-load", {"command": command_line(), "machine": machine(), "params": vars(args), "phases": rows}
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
