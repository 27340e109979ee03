"""The app's own CPU per request on the event loop, without the HTTP server: the part our code decides.

``benchmarks.request_cpu`` counts the whole daemon's CPU per request, uvicorn's protocol included
(about 0.1 ms of a request on this project's machines: benchmarks/RESULTS.md, round 16), and its
numbers move by a tenth between runs of the same code. This one drives the daemon's ASGI app
directly in one process (the app ``serve`` builds, over an embedded log on a fresh directory, without
the history archive, whose thread is not the loop's), one request at a time, and reads the loop
thread's own CPU (``time.thread_time``) around each: what the routes, the middleware and the write
section cost the loop, which bounds commits per second with many writers. Kinds, alternating
``--rounds`` times, each ``--n`` requests after a warm-up:

* ``healthz``: ``GET /healthz`` through every middleware;
* ``get``: ``GET /connectors/<c>/offsets`` of a one-partition connector;
* ``dry``: ``PATCH ?dry_run=true`` of one partition: everything a commit does but the write;
* ``patch``: ``PATCH`` of one partition: a SQLite transaction with its fsync, in a write thread.

Reported per kind: loop CPU per request (mean) and latency p50 / p99; ``patch − dry`` is what the
write costs the loop. Writes ``benchmarks/results/app-cpu-<utc>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.request_cpu import KINDS, parse_kinds
from benchmarks.support import command_line, machine, median, percentile, write_results

Asgi = Any


async def _call(app: Asgi, method: str, path: str, query: bytes = b"", body: bytes = b"") -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8081"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8081),
        "state": {},
    }
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect while the request runs
        raise AssertionError("unreachable")

    status: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    return status[0]


def _body(position: int) -> bytes:
    return json.dumps({"offsets": [{"partition": {"file": "/data/in.txt"}, "offset": {"position": position}}]}).encode()


async def _phase(app: Asgi, kind: str, n: int, warmup: int, start: int) -> dict[str, Any]:
    path = "/connectors/bench-app/offsets"
    cpus: list[float] = []
    walls: list[float] = []
    for i in range(warmup + n):
        if kind == "healthz":
            request: tuple[str, str, bytes, bytes] = ("GET", "/healthz", b"", b"")
        elif kind == "get":
            request = ("GET", path, b"", b"")
        else:
            request = ("PATCH", path, b"dry_run=true" if kind == "dry" else b"", _body(start + i))
        cpu0, t0 = time.thread_time(), time.perf_counter()
        status = await _call(app, *request)
        wall, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
        if status != 200:
            raise RuntimeError(f"{kind}: HTTP {status}")
        if i >= warmup:
            cpus.append(cpu)
            walls.append(wall)
    return {
        "kind": kind,
        "n": n,
        "loop_cpu_ms": round(sum(cpus) / n * 1000, 4),
        "p50_ms": round(percentile(walls, 50) * 1000, 4),
        "p99_ms": round(percentile(walls, 99) * 1000, 4),
    }


async def _run(args: argparse.Namespace, data_dir: Path) -> list[dict[str, Any]]:
    from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog
    from emulator.model.connectors import NoConnectCluster
    from emulator.server.observability import Observability
    from emulator.server.wiring import assemble_runtime, make_app, start_reading
    from emulator.view.offset_view import OffsetView

    log = EmbeddedOffsetLog(data_dir, partitions=25)
    log.open()
    try:
        runtime = assemble_runtime(log, OffsetView(), NoConnectCluster())
        start_reading(runtime)
        app = make_app(runtime, observability=Observability(access_log=False), reading_started=True)
        async with app.router.lifespan_context(app):
            while not log.progress().caught_up:
                await asyncio.sleep(0.01)
            if await _call(app, "PATCH", "/connectors/bench-app/offsets", b"create=true", _body(0)) != 200:
                raise RuntimeError("could not create the benchmark's connector")
            phases: list[dict[str, Any]] = []
            position = 1
            for _ in range(args.rounds):
                for kind in args.kinds:
                    phase = await _phase(app, kind, args.n, args.warmup, position)
                    position += args.n + args.warmup
                    print(
                        f"  {kind:8s} loop CPU {phase['loop_cpu_ms']:.3f} ms/request  "
                        f"p50 {phase['p50_ms']:.3f} ms  p99 {phase['p99_ms']:.3f} ms",
                        flush=True,
                    )
                    phases.append(phase)
            return phases
    finally:
        log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3000, help="measured requests per kind and round")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    args = ap.parse_args()
    args.kinds = parse_kinds(ap, args.kinds)
    import uvloop

    print(f"the app's loop CPU per request, in-process (no HTTP server): {args.n} per kind, {args.rounds} rounds")
    with tempfile.TemporaryDirectory(prefix="bench-app-cpu-") as data_dir:
        phases = uvloop.run(_run(args, Path(data_dir)))
    summary = {kind: median([p["loop_cpu_ms"] for p in phases if p["kind"] == kind]) for kind in args.kinds}
    if "patch" in summary and "dry" in summary:
        summary["write_on_the_loop"] = round(summary["patch"] - summary["dry"], 4)
    print(f"medians of the loop CPU per request (ms): {summary}")
    path = write_results(
        "app-cpu",
        {"command": command_line(), "machine": machine(), "params": vars(args), "phases": phases, "summary": summary},
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
