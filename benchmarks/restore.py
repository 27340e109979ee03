"""Restore benchmark: the daemon's read-to-end of a 1,000,000-record offsets topic vs Apache Kafka's own.

One run, one fresh Tansu broker, one topic (25 partitions, 1,000,000 Connect-shaped records over 100,000
keys, loaded one record per batch and checked: watermarks must add up to 1,000,000). Then, in
alternating rounds on that same topic, each measured in its own fresh process:

* ``daemon_inproc``: ``KafkaOffsetLog`` + ``OffsetView`` (``open()``, ``start_reading(view.apply)``,
  until ``progress().caught_up``), timed inside the process (``benchmarks.restore_python``);
* ``daemon_serve``: the whole ``connect-offsets serve`` process, from spawn until ``/readyz`` answers 200;
* ``java``: ``KafkaOffsetBackingStore.start()`` configured like a distributed worker, timed with
  ``System.nanoTime()`` inside the JVM (``benchmarks.java_restore``), cold (first start in the JVM) and
  warm (second start in the same JVM, ``--java-warm``); plus the JVM process from spawn until the cold
  start returned.

Medians over the rounds; ratio daemon/Java (target <= 1.0). ``--profile`` adds a cProfile of one more
in-process restore with the history archive attached as ``serve`` attaches it (reader and archiver
threads); ``--compare-history`` times the archive's cost each round. The embedded backend restoring
the same 1,000,000 records from its SQLite file is timed too (``--no-embedded`` skips it).
Writes ``benchmarks/results/restore-<utc>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.support import (
    RESULTS_DIR,
    ROOT,
    TANSU_TAIL,
    Tansu,
    bench_records,
    child_json,
    command_line,
    load_embedded_log,
    load_topic,
    machine,
    median,
    process_cpu_s,
    rss_kib,
    stop_process,
    workdir,
    write_results,
)
from tests.fixtures.processes import die_with_parent, free_port


def client_settings(args: argparse.Namespace) -> list[str]:
    """Consumer settings given identically to both sides (daemon: librdkafka; Java: worker properties)."""
    return [f"max.partition.fetch.bytes={args.fetch_bytes}"] if args.fetch_bytes else []


def daemon_inproc(
    args: argparse.Namespace,
    bootstrap: str,
    topic: str,
    work: Path,
    profile: Path | None = None,
    history: bool = False,
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.restore_python",
        "--backend",
        "kafka",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--partitions",
        str(args.partitions),
        "--expect-records",
        str(args.records),
        "--expect-keys",
        str(args.keys),
        "--timeout-s",
        str(args.timeout_s),
    ]
    if profile is not None:
        cmd += ["--profile", str(profile)]
    history_dir = workdir("inproc-history") if history else None
    if history_dir is not None:
        cmd += ["--history", str(history_dir)]
    for pair in [*client_settings(args), *args.daemon_kafka_config]:
        cmd += ["--kafka-config", pair]
    try:
        return child_json(cmd, args.timeout_s + 60, work / "daemon_inproc.log")
    finally:
        if history_dir is not None:
            shutil.rmtree(history_dir, ignore_errors=True)


def embedded_inproc(args: argparse.Namespace, data_dir: Path, topic: str, work: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.restore_python",
        "--backend",
        "embedded",
        "--data-dir",
        str(data_dir),
        "--topic",
        topic,
        "--partitions",
        str(args.partitions),
        "--expect-records",
        str(args.records),
        "--expect-keys",
        str(args.keys),
        "--timeout-s",
        str(args.timeout_s),
    ]
    return child_json(cmd, args.timeout_s + 60, work / "embedded_inproc.log")


def daemon_serve(
    args: argparse.Namespace, bootstrap: str, topic: str, work: Path, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Spawn ``connect-offsets serve`` and poll ``/readyz`` every 10 ms until 200 (resolution ±10 ms)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # A fresh data dir per round: the history archive (on by default) lives there, and a second round
    # must not find the first one's archive and skip re-archiving the replay.
    data_dir = workdir("serve-data")
    cmd = [
        sys.executable,
        "-m",
        "emulator.cli",
        "serve",
        "--bootstrap-servers",
        bootstrap,
        "--offsets-topic",
        topic,
        "--data-dir",
        str(data_dir),
        *TANSU_TAIL,
        *args.serve_arg,
        *extra,
        "--offsets-partitions",
        str(args.partitions),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "INFO",
        *(f"--kafka-config={pair}" for pair in [*client_settings(args), *args.daemon_kafka_config]),
    ]
    with (work / "daemon_serve.log").open("ab") as log_file:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            preexec_fn=die_with_parent,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        first_answer = None
        with httpx.Client(timeout=2.0) as http:
            while True:
                elapsed = time.perf_counter() - t0
                if elapsed > args.timeout_s:
                    raise RuntimeError(f"daemon not ready after {args.timeout_s} s; log {work / 'daemon_serve.log'}")
                if proc.poll() is not None:
                    raise RuntimeError(f"daemon exited {proc.returncode}; log {work / 'daemon_serve.log'}")
                try:
                    response = http.get(url + "/readyz")
                    if first_answer is None:
                        first_answer = time.perf_counter() - t0
                    if response.status_code == 200:
                        ready = time.perf_counter() - t0
                        cpu = process_cpu_s(proc.pid)
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.01)
            status = http.get(url + "/status").json()
        memory = rss_kib(proc.pid)
    finally:
        stop_process(proc)
        shutil.rmtree(data_dir, ignore_errors=True)
    complete = status["records_read"] == args.records and status["live_keys"] == args.keys
    if not complete:
        raise RuntimeError(
            f"serve restored a partial log: {status['records_read']} records, {status['live_keys']} keys"
        )
    return {
        "ready_s": round(ready, 4),
        "cpu_s": round(cpu, 4),
        "first_http_answer_s": round(first_answer or 0.0, 4),
        "records_read": status["records_read"],
        "live_keys": status["live_keys"],
        "complete": complete,
        "rss_kib": memory.get("VmRSS"),
        "peak_rss_kib": memory.get("VmHWM"),
    }


def bare_consumer(args: argparse.Namespace, bootstrap: str, topic: str, work: Path) -> dict[str, Any]:
    """The floor: a bare confluent-kafka consumer reading the topic to its end (``benchmarks.bare_consumer``)."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.bare_consumer",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--partitions",
        str(args.partitions),
        "--expect-records",
        str(args.records),
        "--timeout-s",
        str(args.timeout_s),
    ]
    for pair in client_settings(args):
        cmd += ["--kafka-config", pair]
    return child_json(cmd, args.timeout_s + 60, work / "bare_consumer.log")


def java_store(args: argparse.Namespace, bootstrap: str, topic: str, work: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.java_restore",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--partitions",
        str(args.partitions),
        "--expect-keys",
        str(args.keys),
        "--timeout-s",
        str(args.timeout_s),
        "--starts",
        "2" if args.java_warm else "1",
        *(f"--worker-config={pair}" for pair in client_settings(args)),
    ]
    lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
    with (work / "java_restore.log").open("ab") as log_file:
        spawn_epoch = time.time()
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=log_file,
            cwd=ROOT,
            preexec_fn=die_with_parent,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                lines.put(json.loads(raw))
            except ValueError:
                lines.put({"error": f"non-JSON line: {raw[:200]!r}"})
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    result: dict[str, Any] = {}
    deadline = time.monotonic() + args.timeout_s * 2 + 60
    try:
        while True:
            try:
                msg = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                raise RuntimeError(f"JVM gave no answer in time; log {work / 'java_restore.log'}") from None
            if msg is None:
                break
            if "error" in msg:
                raise RuntimeError(f"JVM: {msg['error']}; log {work / 'java_restore.log'}")
            if "jvm_ready_epoch" in msg:
                result["jvm_startup_s"] = round(msg["jvm_ready_epoch"] - spawn_epoch, 4)
                result["java_version"] = msg["java_version"]
            elif "start" in msg:
                if not msg["complete"]:
                    raise RuntimeError(f"Java restored {msg['connector_partitions']} partitions, not {args.keys}")
                label = msg["start"]
                result[f"{label}_start_s"] = round(msg["start_s"], 4)
                result[f"{label}_cpu_s"] = round(msg["cpu_s"], 4)
                result[f"{label}_rss_kib"] = msg.get("VmRSS")
                if label == "cold":
                    result["process_until_cold_done_s"] = round(msg["done_epoch"] - spawn_epoch, 4)
        proc.wait(timeout=30)
    finally:
        stop_process(proc)
    if "cold_start_s" not in result:
        raise RuntimeError(f"JVM ended without a timing; log {work / 'java_restore.log'}")
    return result


def load_embedded(args: argparse.Namespace, data_dir: Path, topic: str) -> float:
    """The same records, in the same order, appended to an embedded log."""
    records = ((key, value) for key, value, _ in bench_records(args.records, args.keys, args.partitions))
    return load_embedded_log(data_dir, topic, args.partitions, records)


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    def med(kind: str, field: str) -> float | None:
        values = [r[field] for r in runs.get(kind, []) if field in r]
        return round(median(values), 4) if values else None

    s: dict[str, Any] = {
        "daemon_inproc_restore_s": med("daemon_inproc", "restore_s"),
        "daemon_inproc_view_apply_s": med("daemon_inproc", "view_apply_s"),
        "daemon_inproc_cpu_s": med("daemon_inproc", "cpu_s"),
        "daemon_serve_cpu_s": med("daemon_serve", "cpu_s"),
        "java_cold_cpu_s": med("java", "cold_cpu_s"),
        "java_warm_cpu_s": med("java", "warm_cpu_s"),
        "embedded_inproc_cpu_s": med("embedded_inproc", "cpu_s"),
        "daemon_serve_ready_s": med("daemon_serve", "ready_s"),
        "java_cold_start_s": med("java", "cold_start_s"),
        "java_warm_start_s": med("java", "warm_start_s"),
        "java_process_until_cold_done_s": med("java", "process_until_cold_done_s"),
        "java_jvm_startup_s": med("java", "jvm_startup_s"),
        "embedded_inproc_restore_s": med("embedded_inproc", "restore_s"),
        "daemon_inproc_history_restore_s": med("daemon_inproc_history", "restore_s"),
        "daemon_inproc_history_cpu_s": med("daemon_inproc_history", "cpu_s"),
        "daemon_serve_nohistory_ready_s": med("daemon_serve_nohistory", "ready_s"),
        "daemon_serve_nohistory_cpu_s": med("daemon_serve_nohistory", "cpu_s"),
        "daemon_serve_peak_rss_kib": med("daemon_serve", "peak_rss_kib"),
        "bare_consumer_s": med("bare", "restore_s"),
        "bare_consumer_cpu_s": med("bare", "cpu_s"),
    }

    def ratio(a: str, b: str) -> float | None:
        return round(s[a] / s[b], 3) if s.get(a) and s.get(b) else None

    s["ratio_daemon_inproc_vs_java_cold"] = ratio("daemon_inproc_restore_s", "java_cold_start_s")
    s["ratio_daemon_inproc_vs_java_warm"] = ratio("daemon_inproc_restore_s", "java_warm_start_s")
    s["ratio_daemon_serve_vs_java_process"] = ratio("daemon_serve_ready_s", "java_process_until_cold_done_s")
    s["cpu_ratio_daemon_inproc_vs_java_cold"] = ratio("daemon_inproc_cpu_s", "java_cold_cpu_s")
    s["cpu_ratio_daemon_inproc_vs_java_warm"] = ratio("daemon_inproc_cpu_s", "java_warm_cpu_s")
    s["ratio_embedded_vs_java_cold"] = ratio("embedded_inproc_restore_s", "java_cold_start_s")
    # Issue 12's targets: the whole daemon (spawn to /readyz, history on) vs Java's start() and vs the floor.
    s["ratio_daemon_serve_vs_java_cold_start"] = ratio("daemon_serve_ready_s", "java_cold_start_s")
    s["ratio_daemon_serve_vs_bare_consumer"] = ratio("daemon_serve_ready_s", "bare_consumer_s")
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout-s", type=float, default=400.0, help="per restore")
    ap.add_argument(
        "--fetch-bytes",
        type=int,
        default=16 * 1024 * 1024,
        help="max.partition.fetch.bytes for BOTH sides (default 16 MiB; 0 = each client's default "
        "of 1 MiB). Tansu's fetch cost grows with partition length, so fewer, larger fetches "
        "keep the run within minutes; see README",
    )
    ap.add_argument(
        "--java-warm",
        action="store_true",
        help="also time a second start() in the same JVM (classes loaded, JIT warm); one more full read",
    )
    ap.add_argument(
        "--daemon-kafka-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="librdkafka setting for the daemon's clients (in-process and serve), repeatable",
    )
    ap.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for connect-offsets serve, e.g. --serve-arg=--no-history (repeatable)",
    )
    ap.add_argument(
        "--compare-history",
        action="store_true",
        help="also time, each round, the in-process restore with the history archive attached and "
        "`serve --no-history` (what the archive, on by default, costs the restore)",
    )
    ap.add_argument("--profile", action="store_true", help="also cProfile one more in-process daemon restore")
    ap.add_argument("--no-embedded", dest="embedded", action="store_false", help="skip the embedded backend")
    ap.add_argument("--no-serve", dest="serve", action="store_false", help="skip the connect-offsets serve process")
    ap.add_argument("--no-inproc", dest="inproc", action="store_false", help="skip the in-process daemon restore")
    ap.add_argument("--no-bare", dest="bare", action="store_false", help="skip the bare librdkafka consumer")
    args = ap.parse_args()
    if args.records % args.keys:
        ap.error("--records must be a multiple of --keys (every key gets the same number of updates)")

    work = workdir("restore")
    topic = "connect-offsets-bench"
    payload: dict[str, Any] = {
        "benchmark": "restore",
        "command": command_line(),
        "machine": machine(),
        "params": vars(args) | {"topic": topic},
        "workdir": str(work),
    }
    print(
        f"restore benchmark: {args.records:,} records / {args.keys:,} keys / {args.partitions} partitions; "
        f"logs in {work}",
        flush=True,
    )
    runs: dict[str, list[dict[str, Any]]] = {
        "daemon_inproc": [],
        "daemon_serve": [],
        "java": [],
        "embedded_inproc": [],
        "daemon_inproc_history": [],
        "daemon_serve_nohistory": [],
        "bare": [],
    }
    started = time.monotonic()
    with Tansu(work / "tansu.log") as broker:
        broker.create_topic(topic, args.partitions, {"cleanup.policy": "compact"})
        payload["load"] = load_topic(
            broker, topic, bench_records(args.records, args.keys, args.partitions), args.records, args.partitions
        )
        print(f"loaded: {payload['load']}", flush=True)

        kinds = (["daemon_inproc"] if args.inproc else []) + ["java"] + (["daemon_serve"] if args.serve else [])
        kinds += ["bare"] if args.bare else []
        if args.compare_history:
            kinds += ["daemon_inproc_history", "daemon_serve_nohistory"]
        for round_no in range(args.rounds):
            order = kinds[round_no % len(kinds) :] + kinds[: round_no % len(kinds)]  # rotate who goes first
            for kind in order:
                if kind == "daemon_inproc":
                    r = daemon_inproc(args, broker.bootstrap, topic, work)
                    print(
                        f"  round {round_no + 1} daemon in-process: {r['restore_s']:.3f} s "
                        f"(CPU {r['cpu_s']:.2f} s, view.apply {r['view_apply_s']:.3f} s, "
                        f"peak RSS {r['peak_rss_kib'] / 1024:.0f} MiB)",
                        flush=True,
                    )
                elif kind == "daemon_inproc_history":
                    r = daemon_inproc(args, broker.bootstrap, topic, work, history=True)
                    print(
                        f"  round {round_no + 1} daemon in-process + history archive: {r['restore_s']:.3f} s "
                        f"(CPU {r['cpu_s']:.2f} s, archive drained {r['history_drain_after_ready_s']} s "
                        "after ready)",
                        flush=True,
                    )
                elif kind == "bare":
                    r = bare_consumer(args, broker.bootstrap, topic, work)
                    print(
                        f"  round {round_no + 1} bare librdkafka consumer: {r['restore_s']:.3f} s "
                        f"(CPU {r['cpu_s']:.2f} s)",
                        flush=True,
                    )
                elif kind.startswith("daemon_serve"):
                    extra = ("--no-history",) if kind == "daemon_serve_nohistory" else ()
                    r = daemon_serve(args, broker.bootstrap, topic, work, extra)
                    print(
                        f"  round {round_no + 1} connect-offsets serve {' '.join(extra)} until /readyz 200: "
                        f"{r['ready_s']:.3f} s (CPU {r['cpu_s']:.2f} s)",
                        flush=True,
                    )
                else:
                    r = java_store(args, broker.bootstrap, topic, work)
                    print(
                        f"  round {round_no + 1} Java KafkaOffsetBackingStore.start(): "
                        f"cold {r['cold_start_s']:.3f} s "
                        f"(CPU {r['cold_cpu_s']:.2f} s), "
                        f"warm {r.get('warm_start_s', float('nan')):.3f} s "
                        f"(CPU {r.get('warm_cpu_s', float('nan')):.2f} s) (JVM process until cold done "
                        f"{r['process_until_cold_done_s']:.3f} s)",
                        flush=True,
                    )
                r["round"] = round_no + 1
                runs[kind].append(r)

        if args.profile:
            RESULTS_DIR.mkdir(parents=True, exist_ok=True)
            prof = RESULTS_DIR / f"restore-profile-{os.getpid()}.prof"
            r = daemon_inproc(args, broker.bootstrap, topic, work, profile=prof, history=True)
            payload["profile"] = {"run": r, "pstats": str(prof), "summary": str(prof.with_suffix(".txt"))}
            print(
                f"  profiled daemon in-process restore with history archive: {r['restore_s']:.3f} s "
                "(cProfile overhead included); "
                f"see {prof.with_suffix('.txt')}",
                flush=True,
            )

    if args.embedded:
        data_dir = work / "embedded"
        load_s = load_embedded(args, data_dir, topic)
        payload["embedded_load_s"] = round(load_s, 1)
        print(f"embedded log loaded with the same records in {load_s:.1f} s", flush=True)
        for round_no in range(args.rounds):
            r = embedded_inproc(args, data_dir, topic, work)
            r["round"] = round_no + 1
            runs["embedded_inproc"].append(r)
            print(
                f"  round {round_no + 1} embedded in-process restore: {r['restore_s']:.3f} s "
                f"(view.apply {r['view_apply_s']:.3f} s)",
                flush=True,
            )

    payload["runs"] = runs
    payload["summary"] = summary = summarize(runs)
    payload["total_s"] = round(time.monotonic() - started, 1)
    payload["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    path = write_results("restore", payload)
    print("\nsummary (medians of", args.rounds, "rounds):")
    for k, v in summary.items():
        print(f"  {k:40s} {v}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
