"""Daemon CPU per request, by kind of request, against ``/healthz`` in the same run.

Latency benchmarks mix the daemon's work with waiting (fsync, the broker, thread wake-ups); this one
counts only the CPU the daemon's process spends (all its threads, and its event loop's thread alone,
from ``/proc``) per answered request, for ``--seconds`` of back-to-back requests on ``--connections``
kept-alive connections, one kind at a time:

* ``healthz``: ``GET /healthz``, the floor every request pays (HTTP, uvicorn, the middleware);
* ``get``: ``GET /connectors/<c>/offsets`` of a one-partition connector (answered from the body cache);
* ``dry``: ``PATCH ?dry_run=true`` of one partition: everything a commit does but the write;
* ``patch``: ``PATCH`` of one partition: the commit (embedded log: one SQLite transaction, fsync).

Each connection has its own connector (``bench-cpu-<i>``). A kind's CPU per request minus
``healthz``'s is what that route adds; ``patch`` minus ``dry`` is the write. ``--rounds`` repeats the
kinds in turn. Embedded log on a fresh data directory. Writes
``benchmarks/results/request-cpu-<utc>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

from benchmarks.http_load import RawConnection, request_bytes
from benchmarks.support import Daemon, command_line, machine, process_cpu_s, workdir, write_results

KINDS = ("healthz", "get", "dry", "patch")


def parse_kinds(ap: argparse.ArgumentParser, raw: str) -> list[str]:
    """``--kinds``: comma-separated names of ``KINDS`` (``benchmarks.app_cpu`` measures the same kinds);
    an unknown one is a usage error."""
    kinds = [k for k in raw.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown kinds: {', '.join(sorted(unknown))} (known: {', '.join(KINDS)})")
    return kinds


def _body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": {"file": "/data/in.txt"}, "offset": {"position": position}}]}


def _requests(kind: str, connector: str) -> Callable[[int], bytes]:
    path = f"/connectors/{connector}/offsets"
    if kind == "healthz":
        fixed = request_bytes("GET", "/healthz")
        return lambda _: fixed
    if kind == "get":
        fixed = request_bytes("GET", path)
        return lambda _: fixed
    if kind == "dry":
        return lambda i: request_bytes("PATCH", f"{path}?dry_run=true", _body(i))
    return lambda i: request_bytes("PATCH", path, _body(i))


async def _phase(port: int, pid: int, kind: str, connections: int, seconds: float, start: int) -> dict[str, Any]:
    opened = [await RawConnection("127.0.0.1", port).open() for _ in range(connections)]
    answered = [0]

    async def drive(index: int, connection: RawConnection, until: float) -> None:
        make = _requests(kind, f"bench-cpu-{index}")
        i = start
        while time.monotonic() < until:
            status, body = await connection.send(make(i))
            if status != 200:
                raise RuntimeError(f"{kind}: HTTP {status}: {body[:300]!r}")
            i += 1
            answered[0] += 1

    try:
        await asyncio.gather(*(drive(j, c, time.monotonic() + 0.5) for j, c in enumerate(opened)))  # warm-up
        answered[0] = 0
        cpu, loop_cpu, t0 = process_cpu_s(pid), process_cpu_s(pid, pid), time.monotonic()
        await asyncio.gather(*(drive(j, c, t0 + seconds) for j, c in enumerate(opened)))
        elapsed = time.monotonic() - t0
        cpu, loop_cpu = process_cpu_s(pid) - cpu, process_cpu_s(pid, pid) - loop_cpu
    finally:
        for connection in opened:
            await connection.close()
    n = answered[0]
    return {
        "kind": kind,
        "requests_per_s": round(n / elapsed, 1),
        "daemon_cores": round(cpu / elapsed, 3),
        "cpu_ms_per_request": round(cpu / n * 1000, 4),
        "loop_cpu_ms_per_request": round(loop_cpu / n * 1000, 4),
    }


async def _run(port: int, pid: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    for j in range(args.connections):  # every connector exists before the first GET
        connection = await RawConnection("127.0.0.1", port).open()
        create = request_bytes("PATCH", f"/connectors/bench-cpu-{j}/offsets?create=true", _body(0))
        status, body = await connection.send(create)
        await connection.close()
        if status != 200:
            raise RuntimeError(f"creating bench-cpu-{j}: HTTP {status}: {body[:300]!r}")
    phases = []
    position = 1
    for _ in range(args.rounds):
        for kind in args.kinds:
            phase = await _phase(port, pid, kind, args.connections, args.seconds, position)
            position += 1_000_000
            print(
                f"  {kind:8s} {phase['requests_per_s']:8.0f}/s  daemon {phase['daemon_cores']:.2f} cores  "
                f"{phase['cpu_ms_per_request']:.3f} ms CPU/request "
                f"(event loop thread {phase['loop_cpu_ms_per_request']:.3f})",
                flush=True,
            )
            phases.append(phase)
    return phases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per kind and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    ap.add_argument(
        "--log-level",
        default="WARNING",
        help="the daemon's --log-level (WARNING, like every benchmark here: no access or audit line is "
        "written; INFO, serve's default, writes one per request to the daemon's log file)",
    )
    args = ap.parse_args()
    args.kinds = parse_kinds(ap, args.kinds)
    work = workdir("request-cpu")
    print(f"daemon CPU per request: {args.connections} connection(s), {args.seconds:g} s per kind; logs in {work}")
    daemon_args = ["--data-dir", str(work / "data"), "--offsets-partitions", "25", "--log-level", args.log_level]
    with Daemon(daemon_args, work / "daemon.log") as daemon:
        phases = asyncio.run(_run(daemon.port, daemon.pid, args))
    summary = {kind: sorted(p["cpu_ms_per_request"] for p in phases if p["kind"] == kind) for kind in args.kinds}
    path = write_results(
        "request-cpu",
        {"command": command_line(), "machine": machine(), "params": vars(args), "phases": phases, "summary": summary},
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
