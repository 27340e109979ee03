"""How long the history archive takes to read back from the log what it let go while its disk was full.

The daemon with its defaults (history on, its queue of 100,000 records) on ``--backend`` (the
embedded log, or a topic on a fresh Tansu broker), its history directory on a tmpfs of ``--disk``
mounted for the run (root only: mounting needs it). One PATCH is archived, the tmpfs is filled to
its last byte, ``--patches`` PATCHes of ``--partitions`` partitions each are sent (more records than
the queue holds, so it lets them go), and the filler is removed. Reported: the PATCHes' statuses and
time, the archive's counters while the disk is full, when the archiver writes again (its retry
interval reaches 15 s) and when it has read everything back, and the final counters: every record
archived, none counted as not archived. Writes ``benchmarks/results/history-read-back-<utc>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.support import Daemon, Tansu, command_line, machine, workdir, write_results
from tests.fixtures.disk_faults import fill, mounted_tmpfs

COUNTERS = (
    "mode",
    "queued_records",
    "records_archived",
    "records_not_archived",
    "records_let_go",
    "records_read_back",
    "offsets_to_read_back",
)


def _run(args: argparse.Namespace, work: Path, disk: Path, bootstrap: str | None) -> dict[str, Any]:
    serve = ["--data-dir", str(work / "data"), "--history-dir", str(disk / "history")]
    if bootstrap is not None:
        serve += ["--bootstrap-servers", bootstrap, "--offsets-topic", f"read-back-{time.monotonic_ns()}"]
        serve += ["--tail-fetch-wait", "10ms"]  # Tansu holds a fetch for its whole wait
    with (
        Daemon(serve, work / "daemon.log", ready_timeout_s=120) as daemon,
        httpx.Client(base_url=daemon.url, timeout=120) as client,
    ):

        def counters() -> dict[str, Any]:
            status = client.get("/history/status").json()
            return {name: status[name] for name in COUNTERS}

        first = {"offsets": [{"partition": {"f": "first"}, "offset": {"p": 0}}]}
        client.patch("/connectors/bench/offsets?create=true", json=first).raise_for_status()
        time.sleep(1.5)  # archived and flushed before the disk fills
        filler = fill(disk)
        statuses: dict[int, int] = {}
        started = time.monotonic()
        for i in range(args.patches):
            body = {"offsets": [{"partition": {"f": f"{i}-{j}"}, "offset": {"p": j}} for j in range(args.partitions)]}
            status = client.patch("/connectors/bench/offsets", json=body).status_code
            statuses[status] = statuses.get(status, 0) + 1
        patches_s = time.monotonic() - started
        time.sleep(3)
        while_full = counters()
        print(f"{args.patches} PATCHes while full: {statuses} in {patches_s:.1f} s; archive: {while_full}", flush=True)
        filler.unlink()
        freed = time.monotonic()
        modes: dict[str, float] = {}
        while True:
            now = counters()
            modes.setdefault(now["mode"], round(time.monotonic() - freed, 2))
            if now["mode"] == "writing" and not now["offsets_to_read_back"] and not now["queued_records"]:
                break
            if time.monotonic() - freed > args.timeout:
                raise RuntimeError(f"not read back within {args.timeout} s: {now}")
            time.sleep(0.1)
        done_s = time.monotonic() - freed
        print(f"modes after the disk was freed (s): {modes}; read back {done_s:.1f} s after; archive: {now}")
        return {
            "patch_statuses": statuses,
            "patches_s": round(patches_s, 2),
            "while_full": while_full,
            "modes_after_freeing_s": modes,
            "read_back_done_after_freeing_s": round(done_s, 2),
            "final": now,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("embedded", "kafka"), default="embedded")
    ap.add_argument("--patches", type=int, default=13)
    ap.add_argument("--partitions", type=int, default=10_000, help="partitions per PATCH")
    ap.add_argument("--disk", default="20m", help="the history tmpfs's size")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the read back")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("history_read_back mounts a tmpfs for the history directory: run it as root")
    work = workdir("history-read-back")
    with mounted_tmpfs(work / "disk", args.disk) as disk, contextlib.ExitStack() as stack:
        bootstrap = None
        if args.backend == "kafka":
            bootstrap = stack.enter_context(Tansu(work / "tansu.log")).bootstrap
        result = _run(args, work, disk, bootstrap)
    path = write_results(
        "history-read-back", {"command": command_line(), "machine": machine(), "params": vars(args), **result}
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
