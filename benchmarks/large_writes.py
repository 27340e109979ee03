"""Large writes sent together: how many are written within their deadline, and when each is answered.

Each request is a PATCH of ``--partitions`` partitions of a connector of its own, sent to an embedded
daemon started with ``--write-timeout``. First one alone (what one such write takes), then
``--requests`` of them at once from one client (httpx, one connection each). Reported per round: the
lone write's time, then for the burst how many were written (200), how many refused (503, with the
first words of each kind of refusal), and each answer's time in arrival order of the answers. The
work is Python on worker threads that share one interpreter, so without turns every write of a
burst goes as slowly as their number (``emulator/service/bulk_lane.py``).

Run it beside an older commit in a worktree to compare (``cd /tmp/base && PYTHONPATH=/tmp/base
python -m benchmarks.large_writes``). Writes ``benchmarks/results/large_writes-<utc>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from typing import Any

import httpx

from benchmarks.support import Daemon, command_line, machine, workdir, write_results


def body(partitions: int, position: int) -> bytes:
    offsets = [{"partition": {"file": f"/data/f{j}"}, "offset": {"position": position}} for j in range(partitions)]
    return json.dumps({"offsets": offsets}).encode()


async def patch(client: httpx.AsyncClient, url: str, content: bytes) -> dict[str, Any]:
    started = time.monotonic()
    answer = await client.patch(url, content=content, headers={"content-type": "application/json"}, timeout=300)
    message = answer.json().get("message", "") if answer.status_code != 200 else ""
    return {"status": answer.status_code, "s": round(time.monotonic() - started, 3), "message": message[:90]}


async def burst(base: str, requests: int, partitions: int, round_no: int) -> dict[str, Any]:
    bodies = [body(partitions, i) for i in range(requests)]
    limits = httpx.Limits(max_connections=requests + 1)
    async with httpx.AsyncClient(limits=limits) as client:
        lone = await patch(client, f"{base}/connectors/lone-{round_no}/offsets?create=true", body(partitions, 0))
        started = time.monotonic()
        answers = await asyncio.gather(
            *(
                patch(client, f"{base}/connectors/burst-{round_no}-{i}/offsets?create=true", bodies[i])
                for i in range(requests)
            )
        )
        took = time.monotonic() - started
    answers.sort(key=lambda a: a["s"])
    kinds = Counter(a["message"][:60] for a in answers if a["status"] != 200)
    return {
        "lone_s": lone["s"],
        "lone_status": lone["status"],
        "written": sum(a["status"] == 200 for a in answers),
        "refused": sum(a["status"] != 200 for a in answers),
        "refusals": dict(kinds),
        "burst_s": round(took, 3),
        "answers": answers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=20000)
    parser.add_argument("--write-timeout", default="6s")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = workdir("bench-large-writes-")
    rounds = []
    daemon_args = ["--data-dir", str(work / "data"), "--write-timeout", args.write_timeout]
    with Daemon(daemon_args, work / "daemon.log") as daemon:
        for round_no in range(args.rounds):
            result = asyncio.run(burst(daemon.url, args.requests, args.partitions, round_no))
            rounds.append(result)
            times = ", ".join(f"{a['s']:.1f}{'' if a['status'] == 200 else '*'}" for a in result["answers"])
            print(
                f"round {round_no}: one alone {result['lone_s']:.2f} s ({result['lone_status']}); "
                f"{args.requests} at once: {result['written']} written, {result['refused']} refused, "
                f"answers after {times} s (* refused)"
            )
            for kind, n in result["refusals"].items():
                print(f"    {n} x {kind}")
    path = write_results(
        "large_writes",
        {"command": command_line(), "machine": machine(), "args": vars(args), "rounds": rounds},
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
