"""Reads: ``GET`` of one 10,000-partition connector, and ``GET /connectors`` with 10,000 connectors.

An embedded-backend daemon (fresh data directory) gets one connector ``bench-wide`` with
``--partitions-per-connector`` partitions (default 10,000; PATCHed in chunks of 1,000) and
``--connectors`` one-partition connectors (``bench-c-<i>``, default 10,000; one PATCH each). Then, on
one kept-alive connection (``benchmarks.http_load``), alternating, ``--n`` times each after a warm-up
that is not counted: ``GET /connectors/bench-wide/offsets``, ``GET /connectors`` and ``GET /healthz``
(the floor any request pays). Nothing is written while the reads run, so every answer is the same:
this is the steady-state read of an unchanged connector. Then ``--n-after-write`` times: PATCH one
partition of ``bench-wide`` (not timed) and GET it (timed, ``get_wide_after_write``): the first read
after a change renders the whole body again.

Target (issue 12): p99 ≤ 20 ms for each of the two reads. Every answer must be 200 and hold
exactly the partitions / connectors written. Writes ``benchmarks/results/reads-<utc>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.http_load import RawConnection, request_bytes
from benchmarks.support import Daemon, command_line, machine, percentile, workdir, write_results

WIDE = "bench-wide"


def summary(samples: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p90_ms": round(percentile(ms, 90), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "max_ms": round(max(ms), 3),
    }


async def fill(conn: RawConnection, partitions: int, connectors: int) -> None:
    chunk = 1000
    for start in range(0, partitions, chunk):
        offsets = [
            {"partition": {"file": f"/data/file-{p}.txt"}, "offset": {"position": p}}
            for p in range(start, min(start + chunk, partitions))
        ]
        status, answer = await conn.send(
            request_bytes("PATCH", f"/connectors/{WIDE}/offsets?create=true", {"offsets": offsets})
        )
        if status != 200:
            raise RuntimeError(f"PATCH {WIDE} answered {status}: {answer[:300]!r}")
    for i in range(connectors):
        body = {"offsets": [{"partition": {"file": "/data/in.txt"}, "offset": {"position": i}}]}
        status, answer = await conn.send(request_bytes("PATCH", f"/connectors/bench-c-{i}/offsets?create=true", body))
        if status != 200:
            raise RuntimeError(f"PATCH bench-c-{i} answered {status}: {answer[:300]!r}")


async def measure(port: int, args: argparse.Namespace) -> dict[str, Any]:
    conn = await RawConnection("127.0.0.1", port).open()
    try:
        t0 = time.perf_counter()
        await fill(conn, args.partitions_per_connector, args.connectors)
        fill_s = time.perf_counter() - t0
        print(f"  filled in {fill_s:.1f} s", flush=True)
        requests = {
            "get_wide_connector": request_bytes("GET", f"/connectors/{WIDE}/offsets"),
            "get_connectors": request_bytes("GET", "/connectors"),
            "healthz": request_bytes("GET", "/healthz"),
        }
        samples: dict[str, list[float]] = {name: [] for name in requests}
        sizes: dict[str, int] = {}
        for i in range(args.warmup + args.n):
            for name, request in requests.items():
                t = time.perf_counter()
                status, answer = await conn.send(request)
                elapsed = time.perf_counter() - t
                if status != 200:
                    raise RuntimeError(f"{name} answered {status}: {answer[:300]!r}")
                if i == 0:
                    check(name, answer, args)
                    sizes[name] = len(answer)
                if i >= args.warmup:
                    samples[name].append(elapsed)
        samples["get_wide_after_write"] = await after_writes(conn, args)
    finally:
        await conn.close()
    return {
        "fill_s": round(fill_s, 1),
        "body_bytes": sizes,
        **{name: summary(s) for name, s in samples.items()},
    }


async def after_writes(conn: RawConnection, args: argparse.Namespace) -> list[float]:
    samples = []
    get = request_bytes("GET", f"/connectors/{WIDE}/offsets")
    for i in range(args.n_after_write):
        body = {"offsets": [{"partition": {"file": "/data/file-0.txt"}, "offset": {"position": -i}}]}
        status, answer = await conn.send(request_bytes("PATCH", f"/connectors/{WIDE}/offsets", body))
        if status != 200:
            raise RuntimeError(f"PATCH {WIDE} answered {status}: {answer[:300]!r}")
        t = time.perf_counter()
        status, answer = await conn.send(get)
        samples.append(time.perf_counter() - t)
        if status != 200 or b'"position":%d}' % -i not in answer:
            raise RuntimeError(f"GET after a write answered {status} without the written offset")
        check("get_wide_connector", answer, args)
    return samples


def check(name: str, answer: bytes, args: argparse.Namespace) -> None:
    if name == "get_wide_connector":
        got = len(json.loads(answer)["offsets"])
        if got != args.partitions_per_connector:
            raise RuntimeError(f"GET {WIDE} shows {got} partitions, wrote {args.partitions_per_connector}")
    elif name == "get_connectors":
        got = len(json.loads(answer))
        if got != args.connectors + 1:
            raise RuntimeError(f"GET /connectors shows {got} connectors, wrote {args.connectors + 1}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions-per-connector", type=int, default=10_000)
    ap.add_argument("--connectors", type=int, default=10_000)
    ap.add_argument("--n", type=int, default=200, help="measured requests of each kind")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--n-after-write", type=int, default=50, help="timed GETs each right after a one-partition PATCH")
    args = ap.parse_args()

    work = workdir("reads")
    payload: dict[str, Any] = {
        "benchmark": "reads",
        "command": command_line(),
        "machine": machine(),
        "params": vars(args),
        "workdir": str(work),
    }
    print(f"reads benchmark; logs in {work}", flush=True)
    with Daemon(["--data-dir", str(work / "embedded")], work / "daemon-embedded.log") as daemon:
        payload["embedded"] = result = asyncio.run(measure(daemon.port, args))
    payload["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    for name in ("get_wide_connector", "get_connectors", "healthz", "get_wide_after_write"):
        print(f" {name}: {result[name]}", flush=True)
    print(f"results: {write_results('reads', payload)}")


if __name__ == "__main__":
    main()
