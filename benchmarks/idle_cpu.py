"""What an idle daemon costs the host: CPU per second of a daemon nobody is talking to.

Operators run the daemon beside a Connect cluster that commits offsets every minute or so; most of its
life it is idle, and whatever it does then it does all day. This starts a daemon with the defaults
(history on) on the embedded log, on a fresh Tansu broker, or both (``--backend``), writes a few
offsets so the log, the archive and the view are not empty, waits ``--settle`` seconds, then reads
the process's CPU time (``/proc``: all threads, and the event loop's thread alone) over
``--seconds``, ``--rounds`` times, each round a fresh daemon. On Kafka the broker's CPU over the same
seconds is reported beside it: what answering the idle daemon's fetches costs the broker (Tansu's
figure; a JVM broker's differs).

Compare codes by running this in a worktree of each, alternated (benchmarks/RESULTS.md, round 23).
Writes ``benchmarks/results/idle-cpu-<utc>.json``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.support import Daemon, Tansu, command_line, machine, median, process_cpu_s, workdir, write_results


def _idle(args: list[str], work: Path, seconds: float, settle_s: float, broker_pid: int | None) -> dict[str, float]:
    """One fresh daemon: a few writes, ``settle_s`` of quiet, then ``seconds`` measured."""
    with Daemon(["--data-dir", str(work / "data"), *args], work / "daemon.log") as daemon, httpx.Client() as http:
        for i in range(10):
            body = {"offsets": [{"partition": {"file": f"/idle/{i}"}, "offset": {"position": i}}]}
            answer = http.patch(f"{daemon.url}/connectors/idle-bench/offsets?create=true", json=body, timeout=30)
            answer.raise_for_status()
        time.sleep(settle_s)
        before = _cpu(daemon.pid, broker_pid)
        time.sleep(seconds)
        after = _cpu(daemon.pid, broker_pid)
    return {name: round((after[name] - before[name]) / seconds * 1000, 2) for name in after}


def _cpu(pid: int, broker_pid: int | None) -> dict[str, float]:
    found = {"cpu_ms_per_s": process_cpu_s(pid), "loop_cpu_ms_per_s": process_cpu_s(pid, pid)}
    if broker_pid is not None:
        found["broker_cpu_ms_per_s"] = process_cpu_s(broker_pid)
    return found


def _one_round(backend: str, seconds: float, settle_s: float) -> dict[str, float]:
    work = workdir(f"idle-cpu-{backend}")
    if backend == "embedded":
        return _idle([], work, seconds, settle_s, None)
    with Tansu(work / "tansu.log") as broker:
        assert broker.process is not None
        topic = f"bench-idle-{os.getpid()}"
        return _idle(
            ["--bootstrap-servers", broker.bootstrap, "--offsets-topic", topic],
            work,
            seconds,
            settle_s,
            broker.process.pid,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to measure each idle daemon")
    parser.add_argument("--settle", type=float, default=5.0, help="idle time before measuring")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", choices=("embedded", "kafka", "both"), default="embedded")
    args = parser.parse_args()
    backends = ("embedded", "kafka") if args.backend == "both" else (args.backend,)
    payload: dict[str, Any] = {"command": command_line(), "machine": machine(), "seconds": args.seconds}
    payload["settle_s"] = args.settle
    for backend in backends:
        rounds = []
        for n in range(args.rounds):
            result = _one_round(backend, args.seconds, args.settle)
            rounds.append(result)
            broker = f"; the broker {result['broker_cpu_ms_per_s']}" if "broker_cpu_ms_per_s" in result else ""
            print(
                f"{backend} round {n + 1}: {result['cpu_ms_per_s']} ms of CPU per s "
                f"({result['loop_cpu_ms_per_s']} on the loop){broker}"
            )
        payload[backend] = {"rounds": rounds, "median_cpu_ms_per_s": median([r["cpu_ms_per_s"] for r in rounds])}
        print(f"{backend}: median {payload[backend]['median_cpu_ms_per_s']} ms of CPU per second idle")
    print(f"results: {write_results('idle-cpu', payload)}")


if __name__ == "__main__":
    main()
