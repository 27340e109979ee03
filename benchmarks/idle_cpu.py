"""What an idle daemon costs the host: CPU per second of a daemon nobody is talking to.

Operators run the daemon beside a Connect cluster that commits offsets every minute or so; most of its
life it is idle, and whatever it does then it does all day. This starts an embedded daemon with the
defaults (history on), writes a few offsets so the log, the archive and the view are not empty, waits
``--settle`` seconds, then reads the process's CPU time (``/proc``: all threads, and the event loop's
thread alone) over ``--seconds``, ``--rounds`` times, each round a fresh daemon.

Compare codes by running this in a worktree of each, alternated (benchmarks/RESULTS.md, round 23).
Writes ``benchmarks/results/idle-cpu-<utc>.json``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import httpx

from benchmarks.support import Daemon, command_line, machine, median, process_cpu_s, workdir, write_results


def _one_round(seconds: float, settle_s: float) -> dict[str, float]:
    data_dir = workdir("idle-cpu")
    with Daemon(["--data-dir", str(data_dir)], data_dir / "daemon.log") as daemon, httpx.Client() as http:
        for i in range(10):
            body = {"offsets": [{"partition": {"file": f"/idle/{i}"}, "offset": {"position": i}}]}
            answer = http.patch(f"{daemon.url}/connectors/idle-bench/offsets?create=true", json=body, timeout=30)
            answer.raise_for_status()
        time.sleep(settle_s)
        all0, loop0 = process_cpu_s(daemon.pid), process_cpu_s(daemon.pid, daemon.pid)
        time.sleep(seconds)
        all1, loop1 = process_cpu_s(daemon.pid), process_cpu_s(daemon.pid, daemon.pid)
    return {
        "cpu_ms_per_s": round((all1 - all0) / seconds * 1000, 2),
        "loop_cpu_ms_per_s": round((loop1 - loop0) / seconds * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to measure each idle daemon")
    parser.add_argument("--settle", type=float, default=5.0, help="idle time before measuring")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds = []
    for n in range(args.rounds):
        result = _one_round(args.seconds, args.settle)
        rounds.append(result)
        print(f"round {n + 1}: {result['cpu_ms_per_s']} ms of CPU per s ({result['loop_cpu_ms_per_s']} on the loop)")
    payload: dict[str, Any] = {
        "command": command_line(),
        "machine": machine(),
        "seconds": args.seconds,
        "settle_s": args.settle,
        "rounds": rounds,
        "median_cpu_ms_per_s": median([r["cpu_ms_per_s"] for r in rounds]),
    }
    print(f"median: {payload['median_cpu_ms_per_s']} ms of CPU per second idle; {write_results('idle-cpu', payload)}")


if __name__ == "__main__":
    main()
