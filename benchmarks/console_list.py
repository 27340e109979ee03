"""An open console with 10,000 connectors: what its connectors page costs every other request.

The console's connectors page refreshes ``GET /ui/api/connectors`` every 2 s, asking for the page it
shows (``--ask page``, the default: ``?sort=name&at=0&limit=100``, as the console does since the
daemon cuts the page) or every connector (``--ask all``, what it asked before; a daemon older than
the paging answers every row either way). Whatever of the answer runs on the daemon's event loop
holds every other request for as long. An embedded-backend daemon (fresh data directory)
gets ``--connectors`` one-partition connectors (``bench-c-<i>``, one PATCH each); then, alternating
``--rounds`` times, for ``--seconds`` each:

* ``quiet``: a probe sends ``GET /healthz`` back to back on one kept-alive connection;
* ``console``: the same probe while a second connection loads the connectors page every
  ``--poll-s`` seconds (the console's cadence), the next load as soon as the last answered if it took
  longer than that.

Reported per phase: the probe's p50 / p99 / max and how many probes waited over 10 and 100 ms, the
page loads' latency and the daemon's full garbage collections (they stop every thread). Then
``--pages`` page loads back to back with nothing else running: their latency, size and the event
loop thread's CPU each (``loop_ms_per_page``). Every answer must count every connector. Writes
``benchmarks/results/console_list-<utc>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.http_load import RawConnection, probe_healthz, probe_row, request_bytes
from benchmarks.reads import fill
from benchmarks.support import (
    Daemon,
    command_line,
    daemon_totals,
    machine,
    percentile,
    process_cpu_s,
    workdir,
    write_results,
)

PAGES = {"page": "/ui/api/connectors?sort=name&at=0&limit=100", "all": "/ui/api/connectors"}
PAGE = PAGES["page"]


async def console(conn: RawConnection, until: float, poll_s: float, pages: list[bytes]) -> list[float]:
    """Loads the page every ``poll_s`` until ``until``; keeps the answers, checked after the phase (parsing
    2.5 MB of JSON here would stall this process's probe, not the daemon's)."""
    page = request_bytes("GET", PAGE)
    samples = []
    while time.perf_counter() < until:
        t = time.perf_counter()
        status, answer = await conn.send(page)
        elapsed = time.perf_counter() - t
        samples.append(elapsed)
        if status != 200:
            raise RuntimeError(f"{PAGE} answered {status}: {answer[:300]!r}")
        pages.append(answer)
        await asyncio.sleep(max(0.0, min(poll_s - elapsed, until - time.perf_counter())))
    return samples


def check_pages(pages: list[bytes], connectors: int) -> None:
    for answer in pages:
        body = json.loads(answer)
        counted = body.get("matching", len(body["connectors"]))  # a daemon before the paging: every row
        if counted != connectors:
            raise RuntimeError(f"{PAGE} counts {counted} connectors, wrote {connectors}")


async def pages_alone(conn: RawConnection, pid: int, n: int, connectors: int) -> dict[str, float]:
    """``n`` page loads back to back with nothing else running: their latency and the event loop's CPU each."""
    page = request_bytes("GET", PAGE)
    answers, samples = [], []
    loop_cpu = process_cpu_s(pid, pid)
    for _ in range(n):
        t = time.perf_counter()
        status, answer = await conn.send(page)
        samples.append((time.perf_counter() - t) * 1000)
        if status != 200:
            raise RuntimeError(f"{PAGE} answered {status}: {answer[:300]!r}")
        answers.append(answer)
    loop_ms = (process_cpu_s(pid, pid) - loop_cpu) * 1000
    check_pages(answers, connectors)
    return {
        "pages": n,
        "page_bytes": len(answers[-1]),
        "page_p50_ms": round(percentile(samples, 50), 1),
        "page_max_ms": round(max(samples), 1),
        "loop_ms_per_page": round(loop_ms / n, 1),
    }


async def measure(port: int, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    probe_conn = await RawConnection("127.0.0.1", port).open()
    rows: list[dict[str, Any]] = []
    try:
        t0 = time.perf_counter()
        await fill(probe_conn, 0, args.connectors)
        print(f"  filled in {time.perf_counter() - t0:.1f} s", flush=True)
        for round_no in range(args.rounds):
            for phase in ("quiet", "console"):
                gc_before = await asyncio.to_thread(daemon_totals, port)
                until = time.perf_counter() + args.seconds
                answers: list[bytes] = []
                tasks = [probe_healthz(probe_conn, until=until)]
                # The page's connection is opened for its phase: the daemon closes one that sends
                # nothing for --header-timeout (10 s), as it would a real console's idle one.
                page_conn = await RawConnection("127.0.0.1", port).open()
                if phase == "console":
                    tasks.append(console(page_conn, until, args.poll_s, answers))
                try:
                    results = await asyncio.gather(*tasks)
                finally:
                    await page_conn.close()
                gc_after = await asyncio.to_thread(daemon_totals, port)
                check_pages(answers, args.connectors)
                row: dict[str, Any] = {"round": round_no + 1, "phase": phase, **probe_row(results[0], (10, 100))}
                for key, name in (("full_count", "gc_full_collections"), ("full_ms", "gc_full_pause_ms")):
                    row[name] = round(gc_after.get(key, 0.0) - gc_before.get(key, 0.0), 1)
                if phase == "console":
                    pages = [s * 1000 for s in results[1]]
                    row |= {
                        "pages": len(pages),
                        "page_p50_ms": round(percentile(pages, 50), 1),
                        "page_max_ms": round(max(pages), 1),
                    }
                rows.append(row)
                print(f"  {row}", flush=True)
        page_conn = await RawConnection("127.0.0.1", port).open()
        try:
            alone = await pages_alone(page_conn, pid, args.pages, args.connectors)
        finally:
            await page_conn.close()
        print(f"  pages alone: {alone}", flush=True)
    finally:
        await probe_conn.close()
    return {"rounds": rows, "pages_alone": alone}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connectors", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds per phase")
    ap.add_argument("--poll-s", type=float, default=2.0, help="seconds between page loads (the console's refresh)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--pages", type=int, default=10, help="page loads back to back, alone, for the loop's CPU per page")
    ap.add_argument("--ask", choices=sorted(PAGES), default="page", help="what the console asks for (above)")
    args = ap.parse_args()
    global PAGE
    PAGE = PAGES[args.ask]

    work = workdir("console-list")
    payload: dict[str, Any] = {
        "benchmark": "console_list",
        "command": command_line(),
        "machine": machine(),
        "params": vars(args),
        "workdir": str(work),
    }
    print(f"console list benchmark: {args.connectors} connectors; logs in {work}", flush=True)
    with Daemon(["--data-dir", str(work / "embedded")], work / "daemon-embedded.log") as daemon:
        payload["embedded"] = asyncio.run(measure(daemon.port, daemon.pid, args))
    payload["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    print(f"results: {write_results('console_list', payload)}")


if __name__ == "__main__":
    main()
