"""Concurrent commits: 32 writers on 32 connectors vs one writer alone, on the same daemon, in one run.

Each writer is one kept-alive HTTP connection that PATCHes one partition of its own connector
(``bench-w-<i>``) in a loop, the next commit as soon as the previous one answered, as a Connect task's
offset flush or a Spark committer does. For ``--seconds`` each, alternating ``--rounds`` times:

* ``one``: writer 0 alone; commits/s and its latencies;
* ``many``: ``--writers`` writers at once (default 32); commits/s of all of them together and every
  commit's latency.

Target (issue 12): many ≥ 3 × one commits/s, with p99 ≤ 50 ms, by group commit (many writers'
records in one produce/flush, one SQLite transaction). Every answer must be 200, and at the end every
connector's ``GET`` must show exactly its writer's last position (read-your-writes, per-connector
order). The load generator is ``benchmarks.http_load`` (prebuilt requests on raw asyncio streams),
so the client's own CPU is small next to the daemon's; it still shares the machine's two cores.

Each phase also reports where the CPU went: the daemon's cores in use (all its threads, and its
event loop's thread alone, from ``/proc``), its CPU ms per commit and the load generator's cores, so
a ceiling can be told apart: a daemon at about one core is bound by its own Python work (one
interpreter lock for all its threads), not by fsync or the broker. And the daemon's
garbage-collection pauses in it, from its ``/metrics``: a full collection stops every request in
flight, so its pauses show up in the p99. And the log's own writes, from the same ``/metrics``: how
many (concurrent writes share one on the embedded log, so ``log_records / log_writes`` is the
group size), their mean, and how many the disk's fsync or the broker held past 50 and 250 ms —
every writer waiting behind such a write waits as long, which no change to the daemon helps. On
Kafka, the broker's cores too: Tansu runs on the same two cores, and serving the daemon's reader as
well as its writes it takes about one of them.

``--backend embedded`` (default: both) runs a daemon on a fresh data directory (SQLite, fsync per
commit); ``kafka`` a daemon on a fresh Tansu broker. Writes ``benchmarks/results/concurrency-<utc>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from benchmarks.http_load import RawConnection, request_bytes
from benchmarks.support import (
    TANSU_TAIL,
    Daemon,
    Tansu,
    command_line,
    daemon_totals,
    machine,
    percentile,
    process_cpu_s,
    workdir,
    write_results,
)


def body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": {"file": "/data/in.txt"}, "offset": {"position": position}}]}


class Writer:
    """One connector's writer on its own connection; remembers its last acknowledged position."""

    def __init__(self, port: int, index: int) -> None:
        self.connector = f"bench-w-{index}"
        self.connection = RawConnection("127.0.0.1", port)
        self.position = 0
        self.path = f"/connectors/{self.connector}/offsets"

    async def commit(self, create: bool = False) -> float:
        self.position += 1
        path = self.path + ("?create=true" if create else "")
        request = request_bytes("PATCH", path, body(self.position))
        t0 = time.perf_counter()
        status, answer = await self.connection.send(request)
        elapsed = time.perf_counter() - t0
        if status != 200:
            raise RuntimeError(f"{self.connector}: PATCH answered {status}: {answer[:300]!r}")
        return elapsed

    async def loop(self, until: float, samples: list[float]) -> None:
        while time.perf_counter() < until:
            samples.append(await self.commit())

    async def check(self) -> None:
        status, answer = await self.connection.send(request_bytes("GET", self.path))
        offsets = json.loads(answer)["offsets"] if status == 200 else None
        expected = [{"partition": {"file": "/data/in.txt"}, "offset": {"position": self.position}}]
        if offsets != expected:
            raise RuntimeError(f"{self.connector}: GET shows {offsets} after the last commit {self.position}")


def stats(samples: list[float], seconds: float) -> dict[str, float]:
    ms = [s * 1000 for s in samples]
    return {
        "commits": len(ms),
        "commits_per_s": round(len(ms) / seconds, 1),
        "p50_ms": round(percentile(ms, 50), 3),
        "p90_ms": round(percentile(ms, 90), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "max_ms": round(max(ms), 3),
    }


def cpu_row(
    daemon_cpu_s: float, loop_cpu_s: float, client_cpu_s: float, elapsed: float, commits: int
) -> dict[str, float]:
    """Where the phase's CPU went.

    A daemon near one core (1.0) is bound by its own Python work (one interpreter lock), not by
    waiting on fsync or the broker: then more writers cannot raise commits/s, grouped or not.
    """
    return {
        "daemon_cores": round(daemon_cpu_s / elapsed, 2),
        "daemon_loop_cores": round(loop_cpu_s / elapsed, 2),  # the event loop's thread alone
        "daemon_cpu_ms_per_commit": round(daemon_cpu_s * 1000 / max(commits, 1), 3),
        "client_cores": round(client_cpu_s / elapsed, 2),
    }


def stall_row(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What held every writer during the phase, from the daemon's own metrics: garbage-collection
    pauses (a full collection stops every request in flight, round 12) and writes the log itself
    took long to make durable (the disk's fsync or the broker, round 15); both show up in the p99.
    A daemon without a metric (an older commit) leaves its keys out."""

    def delta(key: str, digits: int = 1) -> dict[str, float]:
        if key not in after:
            return {}
        return {key: round(after[key] - before.get(key, 0.0), digits)}

    gc_names = {"full_count": "gc_full_collections", "full_ms": "gc_full_pause_ms", "all_ms": "gc_pause_ms"}
    row = {
        **{gc_names[k]: v for k in gc_names for v in delta(k).values()},
        **delta("log_writes", 0),
        **delta("log_records", 0),
    }
    for key in after:
        if key.startswith("log_writes_over_"):
            row |= delta(key, 0)
    if "log_write_ms" in after and row.get("log_writes"):
        spent_ms = after["log_write_ms"] - before.get("log_write_ms", 0.0)
        row["log_write_mean_ms"] = round(spent_ms / row["log_writes"], 3)
    return row


async def run_phases(port: int, pid: int, args: argparse.Namespace, broker_pid: int | None = None) -> dict[str, Any]:
    writers = [Writer(port, i) for i in range(args.writers)]
    for w in writers:
        await w.connection.open()
    for w in writers:  # every connector exists before anything is timed
        await w.commit(create=True)
    rounds: list[dict[str, Any]] = []
    try:
        for round_no in range(args.rounds):
            for phase in ("one", "many") if round_no % 2 == 0 else ("many", "one"):
                active = writers[:1] if phase == "one" else writers
                # The server closes connections idle past its keep-alive timeout (uvicorn: 5 s), as the
                # writers not in the last phase were: every phase starts on fresh connections.
                for w in active:
                    await w.connection.close()
                    await w.connection.open()
                warm = time.perf_counter() + args.warmup
                await asyncio.gather(*(w.loop(warm, []) for w in active))
                samples: list[float] = []
                totals_before = await asyncio.to_thread(daemon_totals, port)
                daemon_cpu, loop_cpu, client_cpu = process_cpu_s(pid), process_cpu_s(pid, pid), time.process_time()
                broker_cpu = process_cpu_s(broker_pid) if broker_pid is not None else 0.0
                t0 = time.perf_counter()
                await asyncio.gather(*(w.loop(t0 + args.seconds, samples) for w in active))
                elapsed = time.perf_counter() - t0
                broker_cores = (process_cpu_s(broker_pid) - broker_cpu) / elapsed if broker_pid is not None else None
                cpu = cpu_row(
                    process_cpu_s(pid) - daemon_cpu,
                    process_cpu_s(pid, pid) - loop_cpu,
                    time.process_time() - client_cpu,
                    elapsed,
                    len(samples),
                )
                totals_after = await asyncio.to_thread(daemon_totals, port)
                row = {
                    "round": round_no + 1,
                    "phase": phase,
                    "writers": len(active),
                    **stats(samples, elapsed),
                    **cpu,
                    **stall_row(totals_before, totals_after),
                }
                if broker_cores is not None:  # the broker shares the machine's cores with the daemon
                    row["broker_cores"] = round(broker_cores, 2)
                rounds.append(row)
                print(f"  {row}", flush=True)
        for w in writers:
            await w.connection.close()
            await w.connection.open()
            await w.check()
    finally:
        for w in writers:
            await w.connection.close()
    one = [r["commits_per_s"] for r in rounds if r["phase"] == "one"]
    many = [r for r in rounds if r["phase"] == "many"]
    best_one = max(one)
    return {
        "rounds": rounds,
        "one_commits_per_s": one,
        "many_commits_per_s": [r["commits_per_s"] for r in many],
        "many_p99_ms": [r["p99_ms"] for r in many],
        # Against the best single-writer round: the ratio is not flattered by a slow "one" round.
        "ratio_many_vs_one": round(min(r["commits_per_s"] for r in many) / best_one, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("embedded", "kafka", "both"), default="both")
    ap.add_argument("--writers", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per phase")
    ap.add_argument("--warmup", type=float, default=1.0, help="untimed seconds before each phase")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=25)
    ap.add_argument("--serve-arg", action="append", default=[], metavar="ARG", help="extra argument for serve")
    args = ap.parse_args()

    work = workdir("concurrency")
    payload: dict[str, Any] = {
        "benchmark": "concurrency",
        "command": command_line(),
        "machine": machine(),
        "params": vars(args),
        "workdir": str(work),
    }
    print(f"concurrency benchmark: 1 vs {args.writers} writers; logs in {work}", flush=True)
    base = ["--offsets-partitions", str(args.partitions), *args.serve_arg]
    if args.backend in ("embedded", "both"):
        with Daemon(["--data-dir", str(work / "embedded"), *base], work / "daemon-embedded.log") as daemon:
            print(" embedded daemon:", flush=True)
            payload["embedded"] = asyncio.run(run_phases(daemon.port, daemon.pid, args))
    if args.backend in ("kafka", "both"):
        with Tansu(work / "tansu.log") as broker:
            topic = f"bench-concurrency-{os.getpid()}"
            kafka_args = ["--bootstrap-servers", broker.bootstrap, "--offsets-topic", topic, *TANSU_TAIL]
            with Daemon([*kafka_args, "--data-dir", str(work / "kafka"), *base], work / "daemon-kafka.log") as daemon:
                print(" Kafka daemon:", flush=True)
                assert broker.process is not None
                payload["kafka"] = asyncio.run(run_phases(daemon.port, daemon.pid, args, broker.process.pid))
    payload["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    for name in ("embedded", "kafka"):
        if name in payload:
            r = payload[name]
            print(
                f" {name}: one writer {r['one_commits_per_s']} commits/s; {args.writers} writers "
                f"{r['many_commits_per_s']} commits/s (p99 {r['many_p99_ms']} ms); ratio {r['ratio_many_vs_one']}",
                flush=True,
            )
    print(f"results: {write_results('concurrency', payload)}")


if __name__ == "__main__":
    main()
