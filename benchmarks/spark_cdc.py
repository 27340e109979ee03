"""``connect-debezium``: changes per second through Spark vs the same connector in the engine alone,
and what committing each micro-batch costs.

A PostgreSQL server is started here (Debian's package, as for the tests), with a daemon (embedded log
by default, ``--kafka`` for a Tansu broker). Every run uses a fresh table, slot and connector name,
Debezium's Postgres connector (``pgoutput``, ``snapshot.mode=no_data``, Debezium's default batch and
queue sizes), and one ``INSERT … SELECT generate_series`` of ``--changes`` rows once the connector
streams (one transaction: the database decodes it once, both consumers see the same WAL):

* **throughput**, rounds alternating: ``engine`` = ``benchmarks/spark_cdc_engine.py`` (the embedded
  engine in its own JVM process, records converted to JSON as a Connect worker does) and ``spark``
  = ``connect-debezium`` into the ``noop`` sink (default trigger, commits on, listener on). Time from
  the INSERT's commit to the last change consumed (Spark: the end of the batch that reached the
  count, from its progress event); changes per second = count / time.
* **commit overhead per micro-batch**: ``--per-batch`` changes per batch (``maxRecordsPerTrigger``),
  ``ProcessingTime("1 second")``, noop sink, variants alternating: ``commits`` (``commitOffsets=true``
  and an ``OffsetCommitListener``) vs ``no-commits`` (both off); Spark's ``triggerExecution`` per
  batch, after ``--warmup`` full batches that run while the engine still streams the transaction.
  And, outside Spark, ``--samples`` times the commit path itself (GET + PATCH with Debezium's order,
  then the engine's acknowledgement: its offset flush and the slot's confirmed LSN), which the source
  runs in a background thread. ``--cpu`` also samples CPU seconds per process in the throughput runs.

Writes ``benchmarks/results/spark_cdc-<utc>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.spark_support import (
    ROOT,
    command_line,
    daemon,
    machine,
    spark_session,
    tansu_broker,
    workdir,
    write_results,
)
from benchmarks.support import process_cpu_s
from tests.cdc.helpers import Capture
from tests.cdc.postgres import INSTALL_HINT, PostgresServer, server_bin

_CLASSES = (
    ("engine process", ("emulator.spark.debezium_jvm", "benchmarks.spark_cdc_engine")),
    ("spark python workers", ("pyspark.daemon", "pyspark.worker", "python_streaming_source_runner")),
    ("spark JVM", ("org.apache.spark", "pyspark/jars")),
    ("daemon", ("emulator.cli serve",)),
    ("postgres", ("postgres:",)),
)


def _cpu_by_process() -> dict[int, tuple[str, float]]:
    """(class, CPU seconds) of every process this benchmark cares about, from /proc."""
    found: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            kind = "benchmark process" if pid == os.getpid() else None
            for name, marks in _CLASSES:
                if kind is None and any(mark in command for mark in marks):
                    kind = name
            if kind is not None:
                found[pid] = (kind, process_cpu_s(pid))
        except OSError:  # the process ended while being looked at
            continue
    return found


@contextlib.contextmanager
def cpu_sampled(into: dict[str, float], enabled: bool) -> Iterator[None]:
    """CPU seconds per kind of process over the block, sampled every 0.3 s (processes that end
    inside the block, such as the engine, keep their last sample)."""
    if not enabled:
        yield
        return
    before = _cpu_by_process()
    seen: dict[int, tuple[str, float]] = dict(before)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.update(_cpu_by_process())
            time.sleep(0.3)

    sampler = threading.Thread(target=sample, name="cpu-sampler", daemon=True)
    sampler.start()
    try:
        yield
    finally:
        stop.set()
        sampler.join()
        for pid, (kind, cpu) in seen.items():
            into[kind] = into.get(kind, 0.0) + cpu - (before[pid][1] if pid in before else 0.0)


def connector_props(capture: Capture, pg: PostgresServer) -> dict[str, str]:
    return {"name": capture.connector, **capture.props(pg), "snapshot.mode": "no_data"}


def wait_streaming(pg: PostgresServer, capture: Capture, check: Any = None, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not pg.slot_active(capture.slot):
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"the connector did not stream from {capture.slot} within {timeout_s:.0f} s")
        time.sleep(0.1)


def insert(pg: PostgresServer, capture: Capture, count: int) -> float:
    pg.sql(f"INSERT INTO public.{capture.table} SELECT i, 'row ' || i FROM generate_series(1, {count}) i")
    return time.time()


def engine_alone(pg: PostgresServer, work: Path, count: int) -> dict[str, float]:
    capture = Capture.unique()
    capture.create(pg)
    props = work / f"{capture.connector}.json"
    props.write_text(json.dumps(connector_props(capture, pg)))
    with (work / "engine-alone.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.spark_cdc_engine", str(props), str(count)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=ROOT,
        )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline() or "{}")
        if not ready.get("ready"):
            raise RuntimeError(f"engine alone: {ready}; see {work / 'engine-alone.log'}")
        wait_streaming(pg, capture)
        committed = insert(pg, capture, count)
        result = json.loads(proc.stdout.readline() or "{}")
        if result.get("count", 0) < count:
            raise RuntimeError(f"engine alone: {result}")
        return {"seconds": result["last"] - committed, "first_after_s": result["first"] - committed}
    finally:
        proc.kill()
        proc.wait(10)


def _progress_end(progress: dict[str, Any]) -> float:
    start = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return start + float(progress["durationMs"]["triggerExecution"]) / 1000


@contextlib.contextmanager
def query(spark: Any, url: str, capture: Capture, pg: PostgresServer, work: Path, **options: str) -> Iterator[Any]:
    from emulator.spark import OffsetCommitListener

    commits = options.pop("commits", "true") == "true"
    trigger = options.pop("trigger", None)
    listener = OffsetCommitListener(spark, url=url) if commits else None
    if listener is not None:
        spark.streams.addListener(listener)
    reader = spark.readStream.format("connect-debezium").option("url", url).option("connector", capture.connector)
    for key, value in capture.props(pg).items():
        reader = reader.option(f"debezium.{key}", value)
    reader = reader.option("debezium.snapshot.mode", "no_data").option("commitOffsets", str(commits).lower())
    for key, value in options.items():
        reader = reader.option(key, value)
    writer = reader.load().writeStream.format("noop").option("checkpointLocation", str(work / f"cp-{capture.slot}"))
    if trigger:
        writer = writer.trigger(processingTime=trigger)
    running = writer.start()
    try:
        yield running
    finally:
        running.stop()
        if listener is not None:
            listener.wait_for_termination(running, 60)
            spark.streams.removeListener(listener)
        pg.wait_slot_released(capture.slot, 90)


def _check(running: Any) -> None:
    if running.exception() is not None:
        raise RuntimeError(f"query failed: {running.exception()}")


def spark_throughput(spark: Any, url: str, pg: PostgresServer, work: Path, count: int) -> dict[str, float]:
    capture = Capture.unique()
    capture.create(pg)
    with query(spark, url, capture, pg, work) as running:
        wait_streaming(pg, capture, lambda: _check(running))
        committed = insert(pg, capture, count)
        deadline = time.monotonic() + 600
        while True:
            _check(running)
            progress = [p for p in running.recentProgress if p["numInputRows"]]
            total = sum(int(p["numInputRows"]) for p in progress)
            if total >= count:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"spark: {total} of {count} changes in 600 s")
            time.sleep(0.05)
        batches = len(progress)
        end = _progress_end(progress[-1])
        first = _progress_end(progress[0]) - float(progress[0]["durationMs"]["triggerExecution"]) / 1000
    return {"seconds": end - committed, "first_after_s": first - committed, "batches": batches}


def overhead_run(
    spark: Any, url: str, pg: PostgresServer, work: Path, commits: bool, per_batch: int, batches: int, warmup: int
) -> list[float]:
    """Trigger times of ``batches`` full batches after ``warmup`` full ones. The warm-up batches run
    while the engine is still streaming the transaction (the machine's 2 cores are shared with it)."""
    capture = Capture.unique()
    capture.create(pg)
    options = {"commits": str(commits).lower(), "trigger": "1 second", "maxRecordsPerTrigger": str(per_batch)}
    total = per_batch * (warmup + batches + 3)  # the first batches may be partial while the engine catches up
    with query(spark, url, capture, pg, work, **options) as running:
        wait_streaming(pg, capture, lambda: _check(running))
        insert(pg, capture, total)
        deadline = time.monotonic() + batches * 10 + 120
        while sum(int(p["numInputRows"]) for p in running.recentProgress) < total:
            _check(running)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{total} changes were not consumed in time")
            time.sleep(0.2)
        full = [p for p in running.recentProgress if int(p["numInputRows"]) == per_batch]
    if len(full) < warmup + batches:
        raise RuntimeError(f"only {len(full)} of {warmup + batches} batches were full ({per_batch} changes)")
    return [float(p["durationMs"]["triggerExecution"]) for p in full[warmup : warmup + batches]]


def commit_path_ms(url: str, pg: PostgresServer, work: Path, samples: int) -> dict[str, list[float]]:
    """The source's background commit, step by step, outside Spark: GET + PATCH, then the ack."""
    from emulator.spark.committer import DaemonOffsets
    from emulator.spark.debezium_offsets import DebeziumOffset, debezium_backwards_reason
    from emulator.spark.debezium_stream import ChangeStream, EngineSettings

    capture = Capture.unique()
    capture.create(pg)
    props = connector_props(capture, pg)
    stream = ChangeStream(EngineSettings(capture.connector, props, engine_dir=str(work / "commit-path")))
    stream.start(DebeziumOffset.of(capture.connector, 0, []))
    out: dict[str, list[float]] = {"daemon_commit": [], "engine_ack": []}
    try:
        wait_streaming(pg, capture)
        for i in range(1, samples + 4):
            pg.sql(f"INSERT INTO public.{capture.table} VALUES ({i}, 'row {i}')")
            stream.wait_for(i, 60)
            position = stream.at(i)
            with DaemonOffsets(url) as offsets:
                t0 = time.perf_counter()
                offsets.commit(capture.connector, position.connect_entries(), order=debezium_backwards_reason)
                t1 = time.perf_counter()
            stream.ack(i, stream.generation)
            t2 = time.perf_counter()
            if i > 3:
                out["daemon_commit"].append((t1 - t0) * 1000)
                out["engine_ack"].append((t2 - t1) * 1000)
    finally:
        stream.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=50_000, help="changes per throughput run")
    parser.add_argument("--rounds", type=int, default=3, help="throughput runs of each variant, alternating")
    parser.add_argument("--per-batch", type=int, default=1000, help="changes per micro-batch (overhead runs)")
    parser.add_argument("--batches", type=int, default=10, help="batches timed per overhead run")
    parser.add_argument("--warmup", type=int, default=5, help="full batches dropped first in each overhead run")
    parser.add_argument("--overhead-rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=30, help="commit paths timed outside Spark")
    parser.add_argument("--kafka", action="store_true", help="daemon on a Tansu broker instead of the embedded log")
    parser.add_argument("--url", help="use this running daemon instead of starting one")
    parser.add_argument("--cpu", action="store_true", help="also sample CPU seconds per process in the throughput runs")
    args = parser.parse_args(argv)
    facts = machine()
    bin_dir = server_bin()
    if bin_dir is None:
        print(f"no PostgreSQL: {INSTALL_HINT}", file=sys.stderr)
        return 2
    work = workdir("spark-cdc")
    print(f"work directory {work}", file=sys.stderr)
    pg = PostgresServer(bin_dir)
    pg.start()
    spark = spark_session("bench-spark-cdc")
    throughput: dict[str, list[dict[str, Any]]] = {"engine": [], "spark": []}
    overhead: dict[str, list[float]] = {"commits": [], "no-commits": []}
    round_medians: dict[str, list[float]] = {"commits": [], "no-commits": []}
    try:
        with contextlib.ExitStack() as stack:
            if args.url:
                url, where = args.url, f"the daemon at {args.url}"
            elif args.kafka:
                bootstrap = stack.enter_context(tansu_broker(work))
                url, where = stack.enter_context(daemon(work, bootstrap)), f"kafka (Tansu at {bootstrap})"
            else:
                url, where = stack.enter_context(daemon(work)), "embedded (SQLite)"
            spark_throughput(spark, url, pg, work, 2000)  # uncounted: Python workers, JIT, first planning
            for _ in range(args.rounds):
                for variant in throughput:
                    cpu: dict[str, float] = {}
                    with cpu_sampled(cpu, args.cpu):
                        if variant == "engine":
                            result: dict[str, Any] = engine_alone(pg, work, args.changes)
                        else:
                            result = spark_throughput(spark, url, pg, work, args.changes)
                    result["per_second"] = args.changes / result["seconds"]
                    if cpu:
                        result["cpu_seconds"] = {k: round(v, 2) for k, v in sorted(cpu.items(), key=lambda i: -i[1])}
                    throughput[variant].append(result)
                    print(f"{variant:>7}: {result['per_second']:8.0f} changes/s ({result})", file=sys.stderr)
            for _ in range(args.overhead_rounds):
                for variant in overhead:
                    commits = variant == "commits"
                    times = overhead_run(spark, url, pg, work, commits, args.per_batch, args.batches, args.warmup)
                    overhead[variant].extend(times)
                    round_medians[variant].append(statistics.median(times))
                    print(f"{variant:>10}: median trigger {statistics.median(times):7.1f} ms", file=sys.stderr)
            path_ms = commit_path_ms(url, pg, work, args.samples)
    finally:
        spark.stop()
        pg.stop()
    rates = {v: statistics.median(r["per_second"] for r in runs) for v, runs in throughput.items()}
    # each round runs both variants back to back: their ratio is less exposed to the machine's load
    paired = [s["per_second"] / e["per_second"] for e, s in zip(throughput["engine"], throughput["spark"], strict=True)]
    medians = {v: statistics.median(s) for v, s in overhead.items()}
    # each round runs both variants back to back; the median of the rounds' differences is less
    # exposed to the run-to-run spread than the difference of pooled medians
    deltas = [c - n for c, n in zip(round_medians["commits"], round_medians["no-commits"], strict=True)]
    delta = statistics.median(deltas)
    payload = {
        "benchmark": "spark_cdc",
        "command": command_line(),
        "machine": facts,
        "daemon": where,
        "changes": args.changes,
        "throughput": throughput,
        "median_changes_per_second": rates,
        "spark_over_engine": rates["spark"] / rates["engine"],
        "spark_over_engine_per_round": paired,
        "median_of_round_ratios": statistics.median(paired),
        "per_batch": args.per_batch,
        "trigger_execution_ms": overhead,
        "median_trigger_execution_ms": medians,
        "round_median_trigger_execution_ms": round_medians,
        "overhead_ms_per_batch_per_round": deltas,
        "overhead_ms_per_batch": delta,
        "overhead_share_of_1s_interval": delta / 1000,
        "commit_path_ms": {k: {"median": statistics.median(v), "p90": _p90(v)} for k, v in path_ms.items()},
        "loadavg_at_end": os.getloadavg(),
    }
    path = write_results("spark_cdc", payload)
    print(
        f"changes/s: engine alone {rates['engine']:.0f}, connect-debezium {rates['spark']:.0f} "
        f"(ratio of medians {rates['spark'] / rates['engine']:.2f}, median of round ratios "
        f"{statistics.median(paired):.2f}); trigger median commits {medians['commits']:.1f} ms vs "
        f"{medians['no-commits']:.1f} ms; per round {', '.join(f'{d:+.1f}' for d in deltas)} ms, median "
        f"{delta:+.1f} ms per batch ({100 * delta / 1000:+.2f}% of 1 s); commit path "
        f"off the trigger: daemon {statistics.median(path_ms['daemon_commit']):.1f} ms + engine ack "
        f"{statistics.median(path_ms['engine_ack']):.1f} ms median ({where}); {path}"
    )
    return 0


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


if __name__ == "__main__":
    raise SystemExit(main())
