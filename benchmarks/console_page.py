"""How fast the console's connector page becomes interactive on a big connector: 10,000 partitions
and 100,000 history rows (10 changes each), in Debian's headless Chromium driven by Playwright.

    python -m benchmarks.console_page [--partitions 10000] [--changes 10] [--loads 5]

"Interactive" is the page's own Performance mark ``console:interactive``: set when the offsets
table (its first 100 rows, sorted, with the count of all) is rendered **and** the history chart of
the first partition is drawn; its ``startTime`` counts from the navigation's start, so it includes
the page and its files, the session call, ``/ui/api/connectors/bench`` (the 10,000-row table) and
the partition's history. Each load is a fresh page (no cache). Target: under 1 s.

Also measured, for docs/console.md: one partition's history through the history API (the archive
decoded per query) against ``/ui/api`` (the console's index), on the same archive.
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.support import command_line, headless_chromium, machine, median
from tests.fixtures.processes import free_port

NAME = "bench"


def record(partition: int, position: int) -> dict[str, str]:
    key = json.dumps([NAME, {"table": f"t{partition:05d}"}], separators=(",", ":")).encode()
    value = json.dumps({"position": position, "lsn": 1_000_000 + position}, separators=(",", ":")).encode()
    return {"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}


def wait_ready(client: httpx.Client, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            if client.get("/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError("the daemon did not get ready")


def load(client: httpx.Client, partitions: int, changes: int) -> float:
    started = time.monotonic()
    for position in range(changes):
        for first in range(0, partitions, 5000):
            body = {"records": [record(p, position) for p in range(first, min(first + 5000, partitions))]}
            answer = client.post("/offsets/records", json=body)
            assert answer.status_code == 200, answer.text[:500]
    return time.monotonic() - started


def wait_indexed(client: httpx.Client, rows: int, deadline_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        body = client.get("/ui/api/connectors").json()
        row = next((r for r in body.get("connectors") or [] if r["name"] == NAME), None)
        if row is not None and row["history_records"] >= rows:
            return time.monotonic() - started
        time.sleep(0.2)
    raise TimeoutError("the console's history index did not catch up")


def page_loads(url: str, loads: int) -> list[dict[str, float]]:
    samples = []
    with headless_chromium() as browser:
        for _ in range(loads):
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{url}/ui#/connector/{NAME}")
            page.wait_for_selector("body[data-interactive='true']", timeout=60_000)
            marks = page.evaluate(
                "() => Object.fromEntries(performance.getEntriesByType('mark')"
                ".filter(m => m.name.startsWith('console:')).map(m => [m.name, m.startTime]))"
            )
            # When each request's answer had arrived (ms from the navigation's start): where the time goes.
            arrived = page.evaluate(
                "() => Object.fromEntries(performance.getEntriesByType('resource')"
                ".map(r => [new URL(r.name).pathname, r.responseEnd]))"
            )
            marks |= {f"arrived {path}": at for path, at in arrived.items() if path.startswith("/ui/api")}
            rows = page.locator("#offsets-table tbody tr").count()
            points = page.locator("#chart path.point").count()
            count = page.inner_text("#offset-count")
            assert rows == 100 and points > 0, (rows, points)
            samples.append({**marks, "points": points, "count": count})
            page.close()
    return samples


def history_queries(client: httpx.Client, repeat: int = 3) -> dict[str, float]:
    partition = json.dumps({"table": "t00000"})
    api, console = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        assert client.get(f"/connectors/{NAME}/offsets/history", params={"partition": partition}).status_code == 200
        api.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert client.get(f"/ui/api/connectors/{NAME}/history", params={"partition": partition}).status_code == 200
        console.append(time.perf_counter() - started)
    return {"history_api_s": median(api), "console_api_s": median(console)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=10, help="history rows per partition")
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="console-bench-"))
    print(f"work directory: {work}")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (work / "daemon.log").open("wb") as log:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "emulator.cli", "serve", "--port", str(port), "--data-dir", str(work / "data")],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        with httpx.Client(base_url=url, timeout=300) as client:
            wait_ready(client, 60)
            loaded = load(client, args.partitions, args.changes)
            indexed = wait_indexed(client, args.partitions * args.changes, 600)
            queries = history_queries(client)
            samples = page_loads(url, args.loads)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
    interactive = [s["console:interactive"] for s in samples]
    result = {
        "command": command_line(),
        "machine": machine(),
        "partitions": args.partitions,
        "history_rows": args.partitions * args.changes,
        "load_s": loaded,
        "index_catch_up_s": indexed,
        **queries,
        "samples": samples,
        "interactive_ms_median": median(interactive),
        "interactive_ms_max": max(interactive),
    }
    out = Path("benchmarks/results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "console_page.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k not in ("machine", "samples")}, indent=2))
    print("per load:", [round(s["console:interactive"]) for s in samples], "ms; count shown:", samples[0]["count"])


if __name__ == "__main__":
    main()
