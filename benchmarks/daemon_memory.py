"""Memory per live key of the whole ``connect-offsets serve`` process (embedded log, history on).

The issue's memory target is about the daemon an operator runs, not one data structure: this
benchmark fills an embedded offsets log with ``--keys`` distinct Connect-shaped keys (one record
each, ``benchmarks.support.bench_key``/``bench_value``, 20 connectors), then starts ``serve`` on it
with the defaults (history archive on, in the data directory) and reads the process's resident set
once ``/readyz`` answers 200 and the replay is archived, and again after a GET of every connector's
offsets (which fills the response cache). A daemon on an empty log of the same shape is measured
in the same run: ``per_key_total`` divides the whole RSS by the keys, ``per_key_above_empty``
divides what the keys added.

Writes ``benchmarks/results/daemon-memory-<utc>.json``.
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from benchmarks.support import (
    Daemon,
    bench_key,
    bench_records,
    bench_value,
    command_line,
    load_embedded_log,
    machine,
    process_cpu_s,
    rss_kib,
    workdir,
    write_results,
)

TOPIC = "connect-offsets"
PARTITIONS = 25


def fill(data_dir: Path, keys: int, writes_per_key: int = 1) -> float:
    """One record per key (value ``{"position":k}``) in a fresh embedded log; with
    ``writes_per_key`` above 1, every key written that many times, interleaved as
    ``benchmarks.restore_growth`` lays its topic out (``bench_records``)."""
    if writes_per_key == 1:
        entries: Iterable[tuple[bytes, bytes]] = ((bench_key(k), bench_value(k)) for k in range(keys))
    else:
        entries = ((key, value) for key, value, _ in bench_records(keys * writes_per_key, keys, PARTITIONS))
    return load_embedded_log(data_dir, TOPIC, PARTITIONS, entries)


def wait_archived(daemon: Daemon, records: int, deadline_s: float) -> dict[str, Any]:
    """Poll ``/status`` until the replay is read and archived (history's writes settle memory too)."""
    deadline = time.monotonic() + deadline_s
    with httpx.Client(timeout=10) as http:
        while True:
            status: dict[str, Any] = http.get(daemon.url + "/status").json()
            history = status["history"]
            archived = history["records_archived"] + history["records_skipped_replay"]
            if status["records_read"] == records and archived >= records and history["queued_records"] == 0:
                return status
            if time.monotonic() > deadline:
                raise RuntimeError(f"replay not archived in {deadline_s} s: {status}")
            time.sleep(0.5)


def measure(keys: int, work: Path, ready_timeout_s: float, writes_per_key: int = 1) -> dict[str, Any]:
    data_dir = work / f"data-{keys}"
    fill_s = fill(data_dir, keys, writes_per_key) if keys else 0.0
    if not keys:
        data_dir.mkdir(parents=True, exist_ok=True)
    args = ["--data-dir", str(data_dir), "--offsets-partitions", str(PARTITIONS)]
    t0 = time.monotonic()
    with Daemon(args, work / f"serve-{keys}.log", ready_timeout_s=ready_timeout_s) as daemon:
        ready_s = time.monotonic() - t0
        status = wait_archived(daemon, keys * writes_per_key, ready_timeout_s)
        time.sleep(1.0)
        after_restore = rss_kib(daemon.pid)
        cpu_s = process_cpu_s(daemon.pid)
        with httpx.Client(timeout=120) as http:
            names = http.get(daemon.url + "/connectors").json()
            listed = sum(len(http.get(f"{daemon.url}/connectors/{n}/offsets").json()["offsets"]) for n in names)
        time.sleep(1.0)
        after_reads = rss_kib(daemon.pid)
    shutil.rmtree(data_dir, ignore_errors=True)
    if listed != keys or status.get("live_keys") != keys:
        raise RuntimeError(f"daemon lists {listed} partitions and holds {status.get('live_keys')} keys, not {keys}")
    return {
        "keys": keys,
        "fill_s": round(fill_s, 2),
        "ready_s": round(ready_s, 2),
        "cpu_s_at_archived": round(cpu_s, 2),
        "rss_after_restore_kib": after_restore.get("VmRSS"),
        "rss_after_reads_kib": after_reads.get("VmRSS"),
        "peak_rss_kib": after_reads.get("VmHWM"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument(
        "--writes-per-key",
        type=int,
        default=1,
        help="records per key, interleaved (10 = restore_growth's shape: the replay's speed, not only its memory)",
    )
    ap.add_argument("--ready-timeout-s", type=float, default=600.0)
    args = ap.parse_args()
    work = workdir("daemon-memory")
    try:
        empty = measure(0, work, args.ready_timeout_s)
        print(f"empty daemon: {empty['rss_after_restore_kib']} KiB", flush=True)
        full = measure(args.keys, work, args.ready_timeout_s, args.writes_per_key)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary: dict[str, Any] = {}
    for phase in ("rss_after_restore_kib", "rss_after_reads_kib"):
        total = full[phase] * 1024
        summary[phase.removesuffix("_kib")] = {
            "per_key_total": round(total / args.keys, 1),
            "per_key_above_empty": round((total - empty[phase] * 1024) / args.keys, 1),
        }
    summary["peak_per_key_total"] = round(full["peak_rss_kib"] * 1024 / args.keys, 1)
    payload = {
        "benchmark": "daemon_memory",
        "command": command_line(),
        "machine": machine(),
        "params": vars(args),
        "empty": empty,
        "full": full,
        "summary": summary,
    }
    path = write_results("daemon-memory", payload)
    print(f"ready {full['ready_s']} s, CPU until archived {full['cpu_s_at_archived']} s\n{summary}\nwrote {path}")


if __name__ == "__main__":
    main()
