"""``connect-file`` throughput against Spark's built-in ``text`` streaming source, same file.

One file of ``--lines`` ASCII lines (``--width`` bytes each) in its own directory. Each run is a fresh
streaming query with ``Trigger.AvailableNow`` into the ``noop`` sink (raw source speed) or, with
``--sink parquet``, into Parquet files (a pipeline's speed), timed from ``start()`` to termination;
it must report exactly ``--lines`` input rows:

* ``text``: ``spark.readStream.format("text").load(<dir>)`` (Spark's file source, JVM line reader);
* ``connect-file``: ``spark.readStream.format("connect-file")`` on the same file (Python data source:
  the driver scans for complete lines and Connect positions, executors read byte ranges and hand
  Arrow batches to the JVM), starting from a connector without offsets in an embedded daemon;
  committing is on, as a user would run it;
* ``python-ceiling``: a Python source yielding the same number of prebuilt lines with no I/O, as
  many partitions as connect-file plans: what Spark's Python data source path alone costs.

One warm-up run of each is not counted; then ``--rounds`` rounds of one run each, alternating.
Reported: median seconds and lines/s per source, and the ratios connect-file/text (target >= 0.5)
and python-ceiling/text. Writes ``benchmarks/results/spark_file_throughput-<utc>.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.spark_support import (
    command_line,
    daemon,
    machine,
    register_python_ceiling,
    spark_session,
    workdir,
    write_lines,
    write_results,
)


def run_once(
    spark: Any, source: str, folder: Path, file: Path, url: str, checkpoint: Path, lines: int, sink: str
) -> tuple[float, int]:
    if source == "text":
        reader = spark.readStream.format("text").load(str(folder))
    elif source == "python-ceiling":
        pieces = max(1, -(-file.stat().st_size // (32 << 20)))  # as connect-file's default partitionBytes
        reader = (
            spark.readStream.format("python-ceiling")
            .option("lines", str(lines))
            .option("partitions", str(pieces))
            .load()
        )
    else:
        reader = (
            spark.readStream.format("connect-file")
            .option("url", url)
            .option("connector", f"bench-{uuid.uuid4().hex[:8]}")
            .option("file", str(file))
            .load()
        )
    writer = reader.writeStream.format(sink).option("checkpointLocation", str(checkpoint))
    if sink != "noop":
        writer = writer.option("path", str(checkpoint) + "-out")
    t0 = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(f"{source} query failed: {query.exception()}")
    rows = sum(int(p["numInputRows"]) for p in query.recentProgress)
    return elapsed, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--width", type=int, default=60, help="bytes per line including the newline")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sink", choices=("noop", "parquet"), default="noop")
    args = parser.parse_args(argv)
    facts = machine()  # before the run: its load average is the one that matters

    work = workdir("spark-throughput")
    folder = work / "in"
    folder.mkdir()
    file = folder / "data.txt"
    size = write_lines(file, args.lines, args.width)
    spark = spark_session("bench-file-throughput")
    register_python_ceiling(spark)
    samples: dict[str, list[float]] = {"text": [], "connect-file": [], "python-ceiling": []}
    with daemon(work) as url:
        runs = 0

        def timed(source: str) -> float:
            nonlocal runs
            runs += 1
            elapsed, rows = run_once(spark, source, folder, file, url, work / f"cp-{runs}", args.lines, args.sink)
            if rows != args.lines:
                raise RuntimeError(f"{source} read {rows} rows, expected {args.lines}")
            print(f"{source:>12}: {elapsed:6.2f} s  {args.lines / elapsed:12,.0f} lines/s", file=sys.stderr)
            return elapsed

        for source in samples:  # warm-up: JIT, Python workers, first-query planning
            timed(source)
        for _ in range(args.rounds):
            for source in samples:
                samples[source].append(timed(source))
    spark.stop()

    medians = {s: statistics.median(v) for s, v in samples.items()}
    throughput = {s: args.lines / m for s, m in medians.items()}
    ratio = throughput["connect-file"] / throughput["text"]
    ceiling = throughput["python-ceiling"] / throughput["text"]
    payload = {
        "benchmark": "spark_file_throughput",
        "command": command_line(),
        "machine": facts,
        "file": {"lines": args.lines, "bytes": size},
        "sink": args.sink,
        "seconds": samples,
        "median_seconds": medians,
        "median_lines_per_s": throughput,
        "ratio_connect_file_over_text": ratio,
        "ratio_python_ceiling_over_text": ceiling,
        "loadavg_at_end": os.getloadavg(),
        "target": ">= 0.5",
    }
    path = write_results("spark_file_throughput", payload)
    print(
        f"[{args.sink}] text {throughput['text']:,.0f} lines/s, "
        f"connect-file {throughput['connect-file']:,.0f} lines/s, "
        f"ratio {ratio:.2f} (target >= 0.5); python-ceiling {throughput['python-ceiling']:,.0f} lines/s, "
        f"ratio {ceiling:.2f}; {path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
