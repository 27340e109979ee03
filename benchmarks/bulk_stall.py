"""Bulk requests on a big log (export, import, PATCH and reset of many partitions): what they cost other requests.

An operator's ``connect-offsets export`` (``GET /offsets/records``) asks for every live record at
once: with 200,000 keys a 52 MB answer. An import (``POST /offsets/records``) sends records back, up
to ~280,000 in one body (``--max-body-bytes``); a PATCH or a reset may name 10,000 partitions.
Whatever of their work runs on the daemon's event loop, or holds the interpreter lock in one long
call, holds every other request — Connect's and Spark's commits, ``/readyz`` probes — as long.

An embedded log is filled with ``--keys`` records (one per key, 25 partitions) before the daemon
starts; once it is ready and its history archiver has archived them all, a probe sends ``GET
/healthz`` back to back on one kept-alive connection: for ``--seconds`` alone ("quiet"), then while a
separate process (so that its 52 MB do not stall this one) exports ``--exports`` times in a row
("export"), then while it imports ``--import-keys`` records giving each of the first keys a new
value, first as a dry run and then for real ("import"; ``diff_limit=10``), then while it PATCHes and
resets a connector of ``--partitions`` partitions three times, each first as a dry run ("modify").
Reported per phase: the probe's p50 / p99 / max and how many probes waited over 50 and 100 ms, the
daemon's garbage-collection pauses (they stop every thread), and the bulk requests' times. Writes
``benchmarks/results/bulk_stall-<utc>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.http_load import RawConnection, probe_healthz, probe_row
from benchmarks.support import (
    Daemon,
    bench_key,
    bench_value,
    command_line,
    daemon_totals,
    load_embedded_log,
    machine,
    workdir,
    write_results,
)

READER = """
import sys, time, httpx
url, n = sys.argv[1], int(sys.argv[2])
for _ in range(n):
    t = time.perf_counter()
    size = 0
    with httpx.stream("GET", url, timeout=600) as answer:
        if answer.status_code != 200:
            raise SystemExit(f"export answered {answer.status_code}")
        for chunk in answer.iter_bytes():
            size += len(chunk)
    print(f"{time.perf_counter() - t:.4f} {size}", flush=True)
"""

IMPORTER = """
import sys, time, httpx
url, body = sys.argv[1], open(sys.argv[2], "rb").read()
for query in ("dry_run=true&diff_limit=10", "diff_limit=10"):
    t = time.perf_counter()
    answer = httpx.post(f"{url}?{query}", content=body, headers={"content-type": "application/json"}, timeout=600)
    if answer.status_code != 200:
        raise SystemExit(f"import answered {answer.status_code}: {answer.text[:300]}")
    print(f"{time.perf_counter() - t:.4f} {answer.json()['written']}", flush=True)
"""


MODIFIER = """
import sys, time, httpx
url, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
path = "/connectors/bench-bulk/offsets"
def body(k):
    return {"offsets": [{"partition": {"file": f"/d/{p}.txt"}, "offset": {"position": p + k}} for p in range(n)]}
with httpx.Client(base_url=url, timeout=600) as http:
    for r in range(rounds):
        for what, call in (
            ("patch_dry", lambda: http.patch(path, params={"create": "true", "dry_run": "true"}, json=body(r))),
            ("patch", lambda: http.patch(path, params={"create": "true"}, json=body(r))),
            ("delete_dry", lambda: http.delete(path, params={"dry_run": "true"})),
            ("delete", lambda: http.delete(path)),
        ):
            t = time.perf_counter()
            answer = call()
            if answer.status_code != 200:
                raise SystemExit(f"{what} answered {answer.status_code}: {answer.text[:300]}")
            print(f"{what} {time.perf_counter() - t:.4f}", flush=True)
"""


def import_body(keys: int) -> bytes:
    """``keys`` records, each key's value changed (position + 7), as ``POST /offsets/records`` takes them."""
    records = [
        {"key": base64.b64encode(bench_key(k)).decode(), "value": base64.b64encode(bench_value(k + 7)).decode()}
        for k in range(keys)
    ]
    return json.dumps({"records": records}).encode()


OVER_MS = (50, 100)
"""Probe waits counted: past 50 and 100 ms."""


def gc_row(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    names = {"full_count": "gc_full_collections", "full_ms": "gc_full_pause_ms", "all_ms": "gc_pause_ms"}
    return {name: round(after.get(key, 0.0) - before.get(key, 0.0), 1) for key, name in names.items()}


def wait_archived(port: int, records: int, timeout_s: float = 600) -> None:
    """Until the history archiver has archived every record of the log (its backfill competes for the
    interpreter too, and would be measured with the export otherwise)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = httpx.get(f"http://127.0.0.1:{port}/history/status", timeout=30).json()
        if status["records_archived"] + status["records_skipped_replay"] >= records and not status["queued_records"]:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the history archiver did not archive {records} records within {timeout_s:g} s")


async def while_probing(conn: RawConnection, port: int, script: list[str]) -> tuple[list[list[str]], dict[str, Any]]:
    """Run ``python -c <script> <args>`` in a process of its own while the probe runs: its output lines
    (split), and the probe's and the daemon's garbage collector's numbers meanwhile."""
    stop = asyncio.Event()
    before = await asyncio.to_thread(daemon_totals, port)
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", *script, stdout=asyncio.subprocess.PIPE)
    probing = asyncio.create_task(probe_healthz(conn, stop))
    out, _ = await child.communicate()
    stop.set()
    samples = await probing
    if child.returncode != 0:
        raise RuntimeError(f"the bulk request's process failed ({child.returncode})")
    after = await asyncio.to_thread(daemon_totals, port)
    return [line.split() for line in out.decode().splitlines()], {
        **probe_row(samples, OVER_MS),
        **gc_row(before, after),
    }


async def measure(port: int, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    await asyncio.to_thread(wait_archived, port, args.keys)
    conn = await RawConnection("127.0.0.1", port).open()
    rows: list[dict[str, Any]] = []
    try:
        before = await asyncio.to_thread(daemon_totals, port)
        quiet = await probe_healthz(conn, until=time.perf_counter() + args.seconds)
        rows.append(
            {
                "phase": "quiet",
                **probe_row(quiet, OVER_MS),
                **gc_row(before, await asyncio.to_thread(daemon_totals, port)),
            }
        )
        print(f"  {rows[-1]}", flush=True)

        url = f"http://127.0.0.1:{port}/offsets/records"
        lines, row = await while_probing(conn, port, [READER, url, str(args.exports)])
        rows.append(
            {
                "phase": "export",
                "export_s": [round(float(t), 2) for t, _ in lines],
                "export_mb": round(int(lines[0][1]) / 1e6, 1),
                **row,
            }
        )
        print(f"  {rows[-1]}", flush=True)

        body = work / "import.json"
        body.write_bytes(import_body(args.import_keys))
        lines, row = await while_probing(conn, port, [IMPORTER, url, str(body)])
        if int(lines[1][1]) != args.import_keys:
            raise RuntimeError(f"the import wrote {lines[1][1]} records, not {args.import_keys}")
        rows.append(
            {
                "phase": "import",
                "import_mb": round(body.stat().st_size / 1e6, 1),
                "dry_run_s": round(float(lines[0][0]), 2),
                "import_s": round(float(lines[1][0]), 2),
                **row,
            }
        )
        print(f"  {rows[-1]}", flush=True)

        lines, row = await while_probing(conn, port, [MODIFIER, f"http://127.0.0.1:{port}", str(args.partitions), "3"])
        times: dict[str, list[float]] = {}
        for what, seconds in lines:
            times.setdefault(f"{what}_s", []).append(round(float(seconds), 2))
        rows.append({"phase": "modify", "partitions": args.partitions, **times, **row})
        print(f"  {rows[-1]}", flush=True)
    finally:
        await conn.close()
    return {"phases": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=200_000, help="live records in the log (one per key)")
    ap.add_argument("--exports", type=int, default=3, help="exports in a row while the probe runs")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of the quiet phase")
    ap.add_argument("--import-keys", type=int, default=100_000, help="records imported (each a key's new value)")
    ap.add_argument("--partitions", type=int, default=10_000, help="partitions of the connector PATCHed and reset")
    args = ap.parse_args()

    work = workdir("bulk-stall")
    payload: dict[str, Any] = {
        "benchmark": "bulk_stall",
        "command": command_line(),
        "machine": machine(),
        "params": vars(args),
        "workdir": str(work),
    }
    entries = ((bench_key(k), bench_value(k)) for k in range(args.keys))
    loaded_s = load_embedded_log(work / "embedded", "connect-offsets", 25, entries)
    print(f"bulk stall benchmark: {args.keys} records loaded in {loaded_s:.1f} s; logs in {work}", flush=True)
    with Daemon(["--data-dir", str(work / "embedded")], work / "daemon-embedded.log") as daemon:
        payload["embedded"] = asyncio.run(measure(daemon.port, work, args))
    payload["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    print(f"results: {write_results('bulk_stall', payload)}")


if __name__ == "__main__":
    main()
