"""Restore growth: how the daemon's restore time and memory grow with the offsets topic, beside Java's.

One fresh Tansu broker and one topic, grown in steps (default 0.5M, 1M, 2M, 5M records, a tenth as
many keys: every key is written ten times). After each step, on the same topic and each in its own
fresh process, as ``benchmarks.restore`` measures them:

* ``connect-offsets serve`` (history on, fresh data directory) from spawn until ``/readyz`` is 200;
* Java's ``KafkaOffsetBackingStore.start()`` (cold, timed inside the JVM);
* a bare librdkafka consumer reading the topic to its end.

Growing one topic instead of loading four keeps the run within an hour (Tansu takes one record per
batch, ~2,500 records/s here). Step ``n`` adds the keys ``[keys(n-1), keys(n))``, each written ten
times interleaved, so at every size the topic holds exactly ``records`` records over ``records/10``
keys, as ``bench_records`` lays them out, only grouped by step.

Writes ``benchmarks/results/restore-growth-<utc>.json`` and, with matplotlib (the ``bench`` extra),
``benchmarks/restore-growth.png``: time and peak RSS per size, daemon vs Java vs bare consumer.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.restore import bare_consumer, daemon_serve, java_store
from benchmarks.support import (
    Tansu,
    bench_key,
    bench_value,
    command_line,
    load_topic,
    machine,
    workdir,
    write_results,
)
from emulator.codec.murmur2 import partition_for

UPDATES_PER_KEY = 10
CHART = Path(__file__).resolve().parent / "restore-growth.png"


def step_records(first_key: int, end_key: int, partitions: int) -> Iterator[tuple[bytes, bytes, int]]:
    """Keys ``first_key..end_key-1``, each written ``UPDATES_PER_KEY`` times, interleaved like ``bench_records``."""
    keys = [bench_key(k) for k in range(first_key, end_key)]
    placement = [partition_for(key, partitions) for key in keys]
    for update in range(UPDATES_PER_KEY):
        for key, partition in zip(keys, placement, strict=True):
            yield key, bench_value(update), partition


def cpu_of(runs: dict[str, dict[str, Any]]) -> dict[str, float]:
    return {
        "serve_cpu_s": runs["serve"]["cpu_s"],
        "java_cpu_s": runs["java"]["cold_cpu_s"],
        "bare_cpu_s": runs["bare"]["cpu_s"],
    }


def measure(args: argparse.Namespace, bootstrap: str, topic: str, work: Path, records: int) -> dict[str, Any]:
    sized = argparse.Namespace(**vars(args) | {"records": records, "keys": records // UPDATES_PER_KEY})
    serve = daemon_serve(sized, bootstrap, topic, work)
    java = java_store(sized, bootstrap, topic, work)
    bare = bare_consumer(sized, bootstrap, topic, work)
    row: dict[str, Any] = {
        "runs": {"serve": serve, "java": java, "bare": bare},
        "records": records,
        "keys": sized.keys,
        "serve_s": serve["ready_s"],
        "serve_peak_rss_mib": round(serve["peak_rss_kib"] / 1024, 1),
        "java_s": java["cold_start_s"],
        "java_process_s": java["process_until_cold_done_s"],
        "java_rss_mib": round(java["cold_rss_kib"] / 1024, 1) if java.get("cold_rss_kib") else None,
        "bare_s": bare["restore_s"],
        "bare_peak_rss_mib": round(bare["peak_rss_kib"] / 1024, 1) if bare.get("peak_rss_kib") else None,
    }
    row |= cpu_of(row["runs"])
    row["serve_over_java"] = round(row["serve_s"] / row["java_s"], 3)
    row["serve_over_bare"] = round(row["serve_s"] / row["bare_s"], 3)
    return row


# The chart's three panels: title, y axis, and per line its label, result field and style.
PANELS: tuple[tuple[str, str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "Time",
        "wall time to restored (s)",
        (
            ("connect-offsets serve (history on)", "serve_s", "o-"),
            ("Java KafkaOffsetBackingStore.start()", "java_s", "s--"),
            ("bare librdkafka consumer", "bare_s", "^:"),
        ),
    ),
    (
        "CPU",
        "CPU time (s)",
        (
            ("connect-offsets serve (whole process)", "serve_cpu_s", "o-"),
            ("Java JVM process during start()", "java_cpu_s", "s--"),
            ("bare consumer (whole process)", "bare_cpu_s", "^:"),
        ),
    ),
    (
        "Memory",
        "RSS (MiB)",
        (
            ("connect-offsets serve (peak)", "serve_peak_rss_mib", "o-"),
            ("Java JVM process (after start)", "java_rss_mib", "s--"),
            ("bare consumer (peak)", "bare_peak_rss_mib", "^:"),
        ),
    ),
)


def draw(rows: list[dict[str, Any]], path: Path, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no chart drawn", flush=True)
        return False
    sizes = [r["records"] / 1e6 for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.4))
    for ax, (title_, ylabel, lines) in zip(axes, PANELS, strict=True):
        for label, field, style in lines:
            points = [(s, r[field]) for s, r in zip(sizes, rows, strict=True) if r.get(field) is not None]
            ax.plot([p[0] for p in points], [p[1] for p in points], style, label=label)
        ax.set(xlabel="records in the offsets topic (millions)", ylabel=ylabel, title=title_)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def keep(payload: dict[str, Any], path: Path | None) -> Path:
    if path is None:
        return write_results("restore-growth", payload)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def redraw(files: list[Path], chart: Path) -> None:
    steps: dict[int, dict[str, Any]] = {}
    for file in files:
        try:
            for step in json.loads(file.read_text())["steps"]:
                steps[step["records"]] = step | cpu_of(step["runs"]) | {"file": file.name}
        except (OSError, ValueError, KeyError) as exc:
            raise SystemExit(f"{file}: not a restore_growth results file ({exc})") from None
    rows = [steps[size] for size in sorted(steps)]
    if not rows:
        raise SystemExit("no measured steps in " + ", ".join(map(str, files)))
    names = ", ".join(sorted({r["file"] for r in rows}))
    if draw(rows, chart, f"Restore growth, one Tansu topic per run, 10 updates per key ({names})"):
        print(f"chart: {chart} ({len(rows)} sizes from {names})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--sizes",
        default="500000,1000000,2000000,5000000",
        help="records at each step, increasing, each a multiple of 10 (default 0.5M,1M,2M,5M)",
    )
    ap.add_argument("--partitions", type=int, default=25)
    ap.add_argument("--timeout-s", type=float, default=900.0, help="per restore")
    ap.add_argument("--fetch-bytes", type=int, default=16 * 1024 * 1024, help="as in benchmarks.restore")
    ap.add_argument("--chart", type=Path, default=CHART, help=f"where the PNG goes (default {CHART.name})")
    ap.add_argument(
        "--chart-from",
        type=Path,
        nargs="+",
        metavar="RESULTS_JSON",
        help="measure nothing: draw the chart from these results files' steps (e.g. a run cut short and a "
        "run of the remaining size on a fresh broker), sorted by size",
    )
    args = ap.parse_args()
    if args.chart_from:
        redraw(args.chart_from, args.chart)
        return
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes: expected comma-separated integers, got {args.sizes!r}")
    if sizes != sorted(set(sizes)) or any(s <= 0 or s % UPDATES_PER_KEY for s in sizes):
        ap.error("--sizes must increase and each be a positive multiple of 10")
    # What benchmarks.restore's helpers read from their arguments, set as that benchmark's defaults.
    args.java_warm = False
    args.serve_arg = []
    args.daemon_kafka_config = []

    work = workdir("restore-growth")
    topic = "connect-offsets-growth"
    payload: dict[str, Any] = {
        "benchmark": "restore_growth",
        "command": command_line(),
        "machine": machine(),
        "params": {k: str(v) for k, v in vars(args).items()} | {"topic": topic},
        "workdir": str(work),
        "steps": [],
    }
    print(f"restore growth: sizes {sizes}, {args.partitions} partitions; logs in {work}", flush=True)
    started = time.monotonic()
    loaded = 0
    path: Path | None = None
    with Tansu(work / "tansu.log") as broker:
        broker.create_topic(topic, args.partitions, {"cleanup.policy": "compact"})
        for size in sizes:
            first, end = loaded // UPDATES_PER_KEY, size // UPDATES_PER_KEY
            records = step_records(first, end, args.partitions)
            load = load_topic(broker, topic, records, size, args.partitions, already=loaded)
            loaded = size
            print(f"{size:,} records loaded (this step {load['load_s']} s); measuring", flush=True)
            row = measure(args, broker.bootstrap, topic, work, size)
            row["load"] = load
            payload["steps"].append(row)
            print(
                f"  {size:,}: serve {row['serve_s']:.2f} s (peak {row['serve_peak_rss_mib']} MiB), "
                f"Java {row['java_s']:.2f} s, bare {row['bare_s']:.2f} s -> serve/Java "
                f"{row['serve_over_java']}, serve/bare {row['serve_over_bare']}",
                flush=True,
            )
            # Kept after every step, in one file: a long run may be cut short.
            path = keep(payload, path)
    payload["total_s"] = round(time.monotonic() - started, 1)
    path = keep(payload, path)
    title = f"Restore growth, one Tansu topic, {args.partitions} partitions, 10 updates per key ({path.name})"
    if draw(payload["steps"], args.chart, title):
        print(f"chart: {args.chart}", flush=True)
    print(f"results: {path}", flush=True)


if __name__ == "__main__":
    main()
