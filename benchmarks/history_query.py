"""What a tiny connector's history costs as the archive around it grows.

One daemon (``serve``, embedded log, history on by default). PATCH connector ``tiny`` once, then
connector ``bulk`` with ``--partitions`` partitions per request until the archive holds each of
``--sizes`` records. At the start (1 record: the baseline, measured in the same run) and at each
size: ``GET /connectors/tiny/offsets/history?limit=1``, ``GET /connectors/tiny/offsets?as_of=<now>``
and ``GET /connectors/bulk/offsets/history?limit=50`` (the big connector's newest page; at 1
record bulk has none: a 404, timed all the same), ``--n`` times each. The first query after the
archive grew is reported apart (it decodes the blocks no query has read yet), the others as
median and p90, and as a ratio to the baseline's median (the 1-record ``tiny`` history page).
Writes ``benchmarks/results/history-query-<utc>.json``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import httpx

from benchmarks.support import Daemon, command_line, machine, median, percentile, workdir, write_results


def _timed(client: httpx.Client, path: str, params: dict[str, Any]) -> float:
    started = time.perf_counter()
    answer = client.get(path, params=params)
    if answer.status_code != 404:
        answer.raise_for_status()
    return time.perf_counter() - started


def _measure(client: httpx.Client, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    queries: dict[str, tuple[str, dict[str, Any]]] = {
        "history_limit_1": ("/connectors/tiny/offsets/history", {"limit": 1}),
        "as_of_now": ("/connectors/tiny/offsets", {"as_of": str(int(time.time() * 1000) + 60_000)}),
        "bulk_history_limit_50": ("/connectors/bulk/offsets/history", {"limit": 50}),
    }
    for name, (path, params) in queries.items():
        first = _timed(client, path, params)
        samples = [_timed(client, path, params) for _ in range(n)]
        out[name] = {"first_s": first, "median_s": median(samples), "p90_s": percentile(samples, 90)}
        out[name]["samples"] = samples
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20001,100001", help="archive sizes (records) to measure at, comma-separated")
    ap.add_argument("--partitions", type=int, default=1000, help="partitions per bulk PATCH")
    ap.add_argument("--n", type=int, default=20, help="measured queries of each kind per size")
    ap.add_argument("--port", type=int, default=None, help="the daemon's port (default: a free one)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = workdir("history-query")
    payload: dict[str, Any] = {
        "benchmark": "history_query",
        "command": command_line(),
        "machine": machine(),
        "params": vars(args),
        "workdir": str(work),
        "results": [],
    }
    print(f"history query benchmark: sizes {sizes}, {args.n} queries each; logs in {work}", flush=True)
    with (
        Daemon(["--data-dir", str(work / "data")], work / "daemon.log", port=args.port) as daemon,
        httpx.Client(base_url=daemon.url, timeout=600) as client,
    ):
        client.patch(
            "/connectors/tiny/offsets?create=true", json={"offsets": [{"partition": {"f": "t"}, "offset": {"p": 0}}]}
        ).raise_for_status()
        time.sleep(1)
        archived = 1
        baseline: float | None = None
        request = 0
        for size in [1, *sizes]:
            while archived < size:
                count = min(args.partitions, size - archived)
                body = {"offsets": [{"partition": {"f": f"{request}-{j}"}, "offset": {"p": j}} for j in range(count)]}
                client.patch("/connectors/bulk/offsets?create=true", json=body).raise_for_status()
                archived += count
                request += 1
            measured = _measure(client, args.n)
            if baseline is None:
                baseline = measured["history_limit_1"]["median_s"]
            payload["results"].append({"records": size, **measured})
            line = ", ".join(
                f"{name}: first {m['first_s'] * 1000:.1f} ms, median {m['median_s'] * 1000:.1f} ms "
                f"({m['median_s'] / baseline:.1f}x the 1-record history page), p90 {m['p90_s'] * 1000:.1f} ms"
                for name, m in measured.items()
            )
            print(f"{size:>8} records: {line}", flush=True)
    print(f"results: {write_results('history-query', payload)}")


if __name__ == "__main__":
    main()
