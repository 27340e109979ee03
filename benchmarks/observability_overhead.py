"""What the access log and the metrics cost: request latency with and without the access log, and a scrape.

Embedded daemons (no broker), started alternately with the defaults (access log on) and with
``--no-access-log``; the request observer (request metrics, audit of writes) runs in both. Each
round seeds one connector with 10 partitions, warms up with 200 requests, then times ``--requests``
``GET /connectors/bench/offsets`` on one kept-alive connection, and 50 ``GET /metrics`` (a scrape of
a 25-partition daemon). Prints p50/p99 per round and writes
``benchmarks/results/observability_overhead-<utc>.json``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.support import (
    command_line,
    machine,
    percentile,
    stop_process,
    workdir,
    write_results,
)
from tests.fixtures.processes import die_with_parent, free_port


def timed(client: httpx.Client, path: str, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        response = client.get(path)
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
    return samples


def one_round(label: str, extra: list[str], requests: int, base: Path) -> dict[str, Any]:
    data, port = base / f"{label}-{time.monotonic_ns()}", free_port()
    data.mkdir(parents=True)
    with (data / "daemon.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "emulator.cli", "serve", "--data-dir", str(data), "--port", str(port), *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if client.get("/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, f"daemon not ready within 60 s; see {data / 'daemon.log'}"
                time.sleep(0.1)
            seed = [{"partition": {"file": f"f{n}"}, "offset": {"position": n}} for n in range(10)]
            client.patch("/connectors/bench/offsets", params={"create": "true"}, json={"offsets": seed})
            timed(client, "/connectors/bench/offsets", 200)
            gets = timed(client, "/connectors/bench/offsets", requests)
            scrapes = timed(client, "/metrics", 50)
    finally:
        stop_process(proc)
    result = {
        "label": label,
        "get_p50_ms": percentile(gets, 50) * 1000,
        "get_p99_ms": percentile(gets, 99) * 1000,
        "scrape_p50_ms": percentile(scrapes, 50) * 1000,
    }
    print(
        f"{label:<16} GET offsets p50 {result['get_p50_ms']:.2f} ms  p99 {result['get_p99_ms']:.2f} ms   "
        f"/metrics p50 {result['scrape_p50_ms']:.2f} ms",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="timed GETs per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each variant, alternating (default 3)")
    args = parser.parse_args()
    base = workdir("observability-overhead")
    print(f"work directory: {base}")
    rounds = []
    for _ in range(args.rounds):
        rounds.append(one_round("access-log", [], args.requests, base))
        rounds.append(one_round("no-access-log", ["--no-access-log"], args.requests, base))
    write_results("observability_overhead", {"command": command_line(), "machine": machine(), "rounds": rounds})


if __name__ == "__main__":
    main()
