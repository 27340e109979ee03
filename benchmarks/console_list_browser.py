"""What the console's connectors page costs the browser with many connectors, in Debian's headless
Chromium driven by Playwright: the page's answer is every row (4.2 MB at 10,000 connectors), and
what the page draws of it each 2 s refresh is the browser's main-thread work.

    python -m benchmarks.console_list_browser [--connectors 10000] [--loads 3] [--watch-s 12]

Per load (a fresh page): seconds from navigation until the first row is drawn; then, while the page
refreshes by itself for ``--watch-s``, the main thread's long tasks (over 50 ms, the browser's
``longtask`` entries: count, sum, longest); then seconds from typing a filter until the list shows
its matches. ``benchmarks.console_list`` measures the daemon's side of the same page.
"""

from __future__ import annotations

import argparse
import base64
import json
import time

import httpx

from benchmarks.support import Daemon, command_line, headless_chromium, machine, median, workdir, write_results

OBSERVE_LONG_TASKS = """() => {
    window.__long = [];
    new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__long.push(e.duration); })
        .observe({ entryTypes: ["longtask"] });
}"""


def seed(client: httpx.Client, connectors: int) -> None:
    """One record per connector, through the raw-records import (a PATCH each takes minutes)."""
    value = base64.b64encode(b'{"position":1}').decode()
    for first in range(0, connectors, 5000):
        records = [
            {"key": base64.b64encode(f'["bench-c-{i}",{{"file":"/in"}}]'.encode()).decode(), "value": value}
            for i in range(first, min(first + 5000, connectors))
        ]
        answer = client.post("/offsets/records", json={"records": records})
        assert answer.status_code == 200, answer.text[:500]


def page_loads(url: str, loads: int, watch_s: float) -> list[dict[str, float]]:
    samples = []
    with headless_chromium() as browser:
        for _ in range(loads):
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            started = time.monotonic()
            page.goto(f"{url}/ui")
            page.wait_for_selector("tr[data-connector]", timeout=120_000)
            first_rows_s = time.monotonic() - started
            page.evaluate(OBSERVE_LONG_TASKS)
            time.sleep(watch_s)
            long = page.evaluate("() => window.__long")
            started = time.monotonic()
            page.fill("#filter", "bench-c-999")
            page.wait_for_selector("#count >> text=/^11 of /", timeout=60_000)  # 999, 9990-9999
            filter_s = time.monotonic() - started
            samples.append(
                {
                    "first_rows_s": round(first_rows_s, 3),
                    "long_tasks": len(long),
                    "long_tasks_ms": round(sum(long)),
                    "longest_task_ms": round(max(long, default=0.0)),
                    "filter_s": round(filter_s, 3),
                }
            )
            print(f"  {samples[-1]}", flush=True)
            page.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connectors", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--watch-s", type=float, default=12.0, help="seconds of refreshes watched per load")
    args = parser.parse_args()
    work = workdir("console-list-browser")
    with Daemon(["--data-dir", str(work / "data")], work / "daemon.log") as daemon:
        with httpx.Client(base_url=daemon.url, timeout=300) as client:
            seed(client, args.connectors)
        samples = page_loads(daemon.url, args.loads, args.watch_s)
    medians = {f"{key}_median": median([s[key] for s in samples]) for key in samples[0]}
    path = write_results(
        "console-list-browser",
        {"command": command_line(), "machine": machine(), "params": vars(args), "samples": samples, **medians},
    )
    print(json.dumps(medians, indent=2))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
