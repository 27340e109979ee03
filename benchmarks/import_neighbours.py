"""What a large import costs the commits of other connectors, sent while it runs.

An embedded daemon (default ``--write-timeout`` 10 s) gets one ``POST /offsets/records`` of
``--records`` records of one connector; meanwhile one client commits one partition of another
connector every ``--every-ms`` ms (as a Connect task's offset commits through the daemon do), each
waited for before the next. Reported per round: how long the import took, and for the commits sent
while it ran, how many were written (200) and refused (503), with their times' p50, p99 and max.

Until 2026-11-29 an import held every connector's write section while it was checked and written, so
these commits waited for it whole, and one longer than the deadline refused them all
(``emulator/service/writer.py``, ``ConnectorLocks``). Run it beside an older commit in a worktree to
compare (``cd /tmp/base && PYTHONPATH=/tmp/base python -m benchmarks.import_neighbours``). Writes
``benchmarks/results/import_neighbours-<utc>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from typing import Any

import httpx

from benchmarks.support import Daemon, command_line, machine, percentile, workdir, write_results


def import_body(connector: str, records: int, position: int) -> bytes:
    def encoded(document: object) -> str:
        return base64.b64encode(json.dumps(document, separators=(",", ":")).encode()).decode()

    rows = [
        {"key": encoded([connector, {"file": f"/data/f{i}"}]), "value": encoded({"position": position})}
        for i in range(records)
    ]
    return json.dumps({"records": rows}).encode()


async def commits(client: httpx.AsyncClient, url: str, every_s: float, stop: asyncio.Event) -> list[dict[str, Any]]:
    answers = []
    n = 0
    while not stop.is_set():
        n += 1
        body = {"offsets": [{"partition": {"file": "/data/live"}, "offset": {"position": n}}]}
        started = time.monotonic()
        answer = await client.patch(url, json=body, timeout=60)
        answers.append({"status": answer.status_code, "s": round(time.monotonic() - started, 4)})
        await asyncio.sleep(every_s)
    return answers


async def one_round(base: str, records: int, every_s: float, round_no: int) -> dict[str, Any]:
    bulk, neighbour = f"bulk-{round_no}", f"neighbour-{round_no}"
    content = import_body(bulk, records, round_no)
    async with httpx.AsyncClient() as client:
        url = f"{base}/connectors/{neighbour}/offsets?create=true"
        first = await client.patch(url, json={"offsets": [{"partition": {"file": "/data/live"}, "offset": {"p": 0}}]})
        assert first.status_code == 200, first.text
        stop = asyncio.Event()
        committing = asyncio.create_task(commits(client, url, every_s, stop))
        await asyncio.sleep(0.5)  # the commits' pace before the import
        started = time.monotonic()
        imported = await client.post(
            f"{base}/offsets/records", content=content, headers={"content-type": "application/json"}, timeout=600
        )
        took = time.monotonic() - started
        stop.set()
        answers = await committing
    times = [a["s"] for a in answers]
    return {
        "import_status": imported.status_code,
        "import_s": round(took, 2),
        "commits": len(answers),
        "written": sum(a["status"] == 200 for a in answers),
        "refused": sum(a["status"] != 200 for a in answers),
        "p50_s": round(percentile(times, 50), 4),
        "p99_s": round(percentile(times, 99), 4),
        "max_s": round(max(times), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=150_000)
    parser.add_argument("--every-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = workdir("bench-import-neighbours-")
    rounds = []
    with Daemon(["--data-dir", str(work / "data")], work / "daemon.log") as daemon:
        for round_no in range(args.rounds):
            result = asyncio.run(one_round(daemon.url, args.records, args.every_ms / 1000, round_no))
            rounds.append(result)
            print(
                f"round {round_no}: import of {args.records:,} records {result['import_status']} after "
                f"{result['import_s']:.1f} s; another connector's commits meanwhile: {result['written']} written, "
                f"{result['refused']} refused; p50 {result['p50_s'] * 1000:.0f} ms, "
                f"p99 {result['p99_s'] * 1000:.0f} ms, max {result['max_s'] * 1000:.0f} ms"
            )
    path = write_results(
        "import_neighbours",
        {"command": command_line(), "machine": machine(), "args": vars(args), "rounds": rounds},
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
