"""Overhead of committing ``connect-file`` progress through the daemon, at one batch per second.

The same query twice over, alternating: ``connect-file`` with ``maxLinesPerTrigger`` lines per
batch, ``Trigger.ProcessingTime("1 second")``, into the ``noop`` sink, on a file that already holds
every batch's lines (so each trigger has a full batch):

* ``commits``: ``commitOffsets=true`` (when batch N is planned the source hands batch N-1's end to
  its background committer: GET + PATCH, monotonic) **and** an ``OffsetCommitListener`` publishing each completed
  batch from the checkpoint, i.e. everything a user turns on;
* ``no-commits``: ``commitOffsets=false`` and no listener.

The daemon runs on Kafka (a Tansu broker started here) by default, ``--embedded`` for the SQLite log.
Per batch, Spark's own ``durationMs.triggerExecution`` is recorded; one short run of each variant
is not counted, and the first ``--warmup`` batches of every run are dropped. Overhead = (median
commits - median no-commits) / 1000 ms, the share of the one-second batch interval the commits cost
(target <= 5%), also shown relative to the no-commit trigger time. Separately, ``--samples`` direct
commits (the same GET + PATCH) time one commit.
Writes ``benchmarks/results/spark_commit_overhead-<utc>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.spark_support import (
    command_line,
    daemon,
    machine,
    spark_session,
    tansu_broker,
    workdir,
    write_lines,
    write_results,
)


def run(
    spark: Any, url: str, file: Path, checkpoint: Path, commits: bool, lines: int, batches: int
) -> tuple[list[float], str]:
    from emulator.spark import OffsetCommitListener

    connector = f"bench-{uuid.uuid4().hex[:8]}"
    listener = OffsetCommitListener(spark, url=url) if commits else None
    if listener is not None:
        spark.streams.addListener(listener)
    try:
        query = (
            spark.readStream.format("connect-file")
            .option("url", url)
            .option("connector", connector)
            .option("file", str(file))
            .option("maxLinesPerTrigger", str(lines))
            .option("commitOffsets", str(commits).lower())
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="1 second")
            .start()
        )
        deadline = time.monotonic() + batches * 10 + 60
        while time.monotonic() < deadline:
            progress = query.lastProgress
            if progress is not None and int(progress["batchId"]) >= batches - 1:
                break
            if query.exception() is not None:
                raise RuntimeError(f"query failed: {query.exception()}")
            time.sleep(0.2)
        else:
            raise RuntimeError(f"{batches} batches did not complete in time")
        recent = list(query.recentProgress)
        query.stop()
        if listener is not None and not listener.wait_for_termination(query, 60):
            raise RuntimeError("the listener did not see the termination")
    finally:
        if listener is not None:
            spark.streams.removeListener(listener)
    by_batch = {int(p["batchId"]): float(p["durationMs"]["triggerExecution"]) for p in recent}
    return [by_batch[b] for b in sorted(by_batch) if b < batches], connector


def direct_commit_ms(url: str, samples: int) -> list[float]:
    from emulator.spark.committer import DaemonOffsets

    out: list[float] = []
    connector = f"bench-direct-{uuid.uuid4().hex[:8]}"
    with DaemonOffsets(url) as offsets:
        for i in range(samples + 3):
            t0 = time.perf_counter()
            offsets.commit(connector, [({"filename": "/bench/in.txt"}, {"position": 1000 * (i + 1)})])
            if i >= 3:
                out.append((time.perf_counter() - t0) * 1000)
    return out


@contextlib.contextmanager
def backend(work: Path, embedded: bool) -> Iterator[tuple[str, str]]:
    if embedded:
        with daemon(work) as url:
            yield url, "embedded (SQLite)"
        return
    with tansu_broker(work) as bootstrap, daemon(work, bootstrap) as url:
        yield url, f"kafka (Tansu at {bootstrap})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines-per-batch", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=12, help="batches per run, warm-up included")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant, alternating")
    parser.add_argument("--samples", type=int, default=200, help="direct commits timed")
    parser.add_argument("--embedded", action="store_true", help="daemon on the embedded log instead of Kafka")
    args = parser.parse_args(argv)
    facts = machine()  # before the run: its load average is the one that matters

    work = workdir("spark-commit")
    file = work / "in.txt"
    write_lines(file, args.lines_per_batch * args.batches)
    spark = spark_session("bench-commit-overhead")
    samples: dict[str, list[float]] = {"commits": [], "no-commits": []}
    with backend(work, args.embedded) as (url, where):
        runs = 0
        for variant in samples:  # one uncounted run each: JIT, Python workers, first-query planning
            runs += 1
            run(spark, url, file, work / f"cp-{runs}", variant == "commits", args.lines_per_batch, 3)
        for _ in range(args.rounds):
            for variant in samples:
                runs += 1
                times, connector = run(
                    spark, url, file, work / f"cp-{runs}", variant == "commits", args.lines_per_batch, args.batches
                )
                kept = times[args.warmup :]
                samples[variant].extend(kept)
                print(
                    f"{variant:>10}: median trigger {statistics.median(kept):7.1f} ms over {len(kept)} batches",
                    file=sys.stderr,
                )
                if variant == "commits":
                    _check_committed(url, connector, file, args.lines_per_batch * args.batches)
        direct = direct_commit_ms(url, args.samples)
    spark.stop()

    medians = {v: statistics.median(s) for v, s in samples.items()}
    delta = medians["commits"] - medians["no-commits"]
    payload = {
        "benchmark": "spark_commit_overhead",
        "command": command_line(),
        "machine": facts,
        "daemon": where,
        "lines_per_batch": args.lines_per_batch,
        "trigger": "ProcessingTime 1 second",
        "trigger_execution_ms": samples,
        "median_trigger_execution_ms": medians,
        "p90_trigger_execution_ms": {v: _p90(s) for v, s in samples.items()},
        "overhead_ms_per_batch": delta,
        "overhead_share_of_1s_interval": delta / 1000,
        "overhead_relative_to_no_commit_trigger": delta / medians["no-commits"],
        "direct_commit_ms": {"median": statistics.median(direct), "p90": _p90(direct), "samples": len(direct)},
        "target": "<= 5% of the 1 s interval",
        "loadavg_at_end": os.getloadavg(),
    }
    path = write_results("spark_commit_overhead", payload)
    print(
        f"median trigger: commits {medians['commits']:.1f} ms, no-commits {medians['no-commits']:.1f} ms; "
        f"overhead {delta:+.1f} ms = {100 * delta / 1000:+.2f}% of the 1 s interval "
        f"({100 * delta / medians['no-commits']:+.1f}% of the trigger); one direct commit "
        f"{statistics.median(direct):.1f} ms median ({where}); {path}"
    )
    return 0


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def _check_committed(url: str, connector: str, file: Path, lines: int) -> None:
    """The commits variant must really have published: the listener commits the last batch's end."""
    from emulator.client.http import OffsetsClient

    with OffsetsClient(url) as client:
        rows = client.offsets(connector)
    position = next(r["offset"]["position"] for r in rows if r["partition"] == {"filename": str(file)})
    if position <= 0 or position > file.stat().st_size or position % (file.stat().st_size // lines):
        raise RuntimeError(f"unexpected committed position {position} for {connector}")


if __name__ == "__main__":
    raise SystemExit(main())
