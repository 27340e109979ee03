"""Commit latency: one single-partition PATCH through a running daemon vs a raw acknowledged produce.

On one fresh Tansu broker:

* ``daemon_patch``: ``PATCH /connectors/bench-conn-0/offsets`` with one partition, through a running
  ``connect-offsets serve`` process on the broker. The daemon answers only after the broker acknowledged
  the record (``acks=all``) *and* its own reader applied it to the view (read-your-writes), so a 200 means
  "durable and visible". Timed by the client on one keep-alive connection, each request encoded before
  its clock starts (``--client lean``, the default; ``--client httpx`` times httpx's own encoding too).
* ``raw_produce``: confluent-kafka ``produce()`` of the same key and value bytes to the same partition
  number of a second topic on the same broker (``acks=all``, idempotent like the daemon's producer),
  then ``flush()``: the cheapest "durable" write a client can make, with nothing read back. A separate
  topic so the baseline's records do not make the daemon's reader work during the daemon's samples.

The two alternate one request at a time (PATCH, produce, PATCH, ...), N of each after a warm-up that
is not counted. Ratios: p50 daemon/raw, (p50 daemon - p50 ``/healthz``)/raw (issue 12: <= 1.5x) and
p99 (<= 3x). After the PATCH loop, N ``GET /healthz`` on the same connection give the floor any
request to the daemon pays (HTTP, ASGI, client), and N ``PATCH ?dry_run=true`` the cost of everything
but the write (parsing, validation, planning the records, the response). Then the same PATCH loop on
an embedded-backend daemon (``--data-dir``, SQLite with fsync per commit), alternating with its
floor: a raw SQLite WAL commit of one row with the daemon's settings (WAL, ``synchronous=FULL``, one
fsync per commit); then its ``/healthz`` and dry-run loops.

``--diagnose`` (default on) also measures, in-process with the daemon's own ``KafkaOffsetLog`` +
``OffsetView``, the two broker-side parts: time until the broker acknowledged ``append()``, and time from
that acknowledgement until the log's *reader* delivered the record to the view. A PATCH does not wait
for the latter (the service applies its own acknowledged records to the view, write-through), but every
other reader of the topic (another daemon, Connect) does: it is the topic's visibility latency.
``--variant KEY=VALUE`` runs one more Kafka daemon with that librdkafka setting (e.g.
``fetch.wait.max.ms=1``) to show what a setting is worth.
Writes ``benchmarks/results/commit_latency-<utc>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer

from benchmarks.http_load import BlockingConnection, request_bytes
from benchmarks.support import (
    TANSU_TAIL,
    Daemon,
    Tansu,
    command_line,
    machine,
    percentile,
    workdir,
    write_results,
)
from emulator.codec.keys import encode_key
from emulator.codec.murmur2 import partition_for
from emulator.codec.values import encode_offset
from emulator.logs.embedded.storage import RECORDS_TABLE

CONNECTOR = "bench-conn-0"
PARTITION = {"filename": "/data/file-0.txt", "line": 0}


def patch_body(position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": PARTITION, "offset": {"position": position}}]}


class DaemonRequests:
    """The requests this benchmark times, through one keep-alive connection of ``client``.

    ``lean`` (the default, ``benchmarks/http_load.py``): each request encoded before the clock starts,
    as the raw baselines encode their bytes first, so the figures are the daemon's and the socket's.
    ``httpx``: the JSON body encoded by httpx inside the timing, what a Python application sees
    (and what rounds 1 to 12 measured; RESULTS.md, round 13).
    """

    def __init__(self, daemon: Daemon, client: str) -> None:
        self._lean = BlockingConnection("127.0.0.1", daemon.port) if client == "lean" else None
        self._httpx = httpx.Client(base_url=daemon.url, timeout=60) if client == "httpx" else None

    def timed(self, method: str, target: str, body: Any = None) -> tuple[float, int, bytes]:
        """``(seconds, status, body)`` of one request; ``body`` is JSON-encoded, before the clock for lean."""
        if self._httpx is not None:
            t0 = time.perf_counter()
            response = self._httpx.request(method, target, json=body)
            return time.perf_counter() - t0, response.status_code, response.content
        assert self._lean is not None
        request = request_bytes(method, target, body)
        t0 = time.perf_counter()
        status, content = self._lean.send(request)
        return time.perf_counter() - t0, status, content

    def patch(self, position: int, create: bool = False, dry_run: bool = False) -> float:
        query = "&".join(q for q, on in (("create=true", create), ("dry_run=true", dry_run)) if on)
        target = f"/connectors/{CONNECTOR}/offsets" + (f"?{query}" if query else "")
        elapsed, status, body = self.timed("PATCH", target, patch_body(position))
        if status != 200:
            raise RuntimeError(f"PATCH answered {status}: {body[:300]!r}")
        return elapsed

    def healthz(self) -> float:
        """``GET /healthz``: what any request to the daemon costs (HTTP, ASGI, the client)."""
        elapsed, status, _ = self.timed("GET", "/healthz")
        if status != 200:
            raise RuntimeError(f"/healthz answered {status}")
        return elapsed

    def offsets(self) -> Any:
        _, status, body = self.timed("GET", f"/connectors/{CONNECTOR}/offsets")
        if status != 200:
            raise RuntimeError(f"GET offsets answered {status}: {body[:300]!r}")
        return json.loads(body)["offsets"]

    def close(self) -> None:
        if self._lean is not None:
            self._lean.close()
        if self._httpx is not None:
            self._httpx.close()


def http_floor(http: DaemonRequests, n: int) -> list[float]:
    """``GET /healthz`` round trips on the same connection: what any request to the daemon costs."""
    return [http.healthz() for _ in range(n)]


def check_visible(http: DaemonRequests, position: int) -> None:
    """The last PATCH must be what GET returns: the latency measured was of a write that took effect."""
    offsets = http.offsets()
    if offsets != [{"partition": PARTITION, "offset": {"position": position}}]:
        raise RuntimeError(f"GET after the last PATCH shows {offsets}, expected position {position}")


class RawProducer:
    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.key = encode_key(CONNECTOR, PARTITION)
        self.partition = partition_for(self.key, partitions)
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0}
        )
        self.errors: list[str] = []

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def timed_send(self, position: int) -> float:
        value = encode_offset({"position": position})
        t0 = time.perf_counter()
        self.producer.produce(
            self.topic, key=self.key, value=value, partition=self.partition, on_delivery=self._delivered
        )
        left = self.producer.flush(30)
        elapsed = time.perf_counter() - t0
        if left or self.errors:
            raise RuntimeError(f"raw produce failed: {left} undelivered, {self.errors[:3]}")
        return elapsed


class RawSqlite:
    """The embedded backend's floor: one SQLite WAL commit of one row, nothing else.

    Same settings as the daemon's embedded log (``emulator/logs/embedded/storage.py``): WAL journal,
    ``synchronous=FULL`` (the daemon's default, so each commit fsyncs the WAL), autocommit connection
    with an explicit ``BEGIN IMMEDIATE`` ... ``COMMIT``, the log's ``records`` table itself
    (``RECORDS_TABLE``: a rowid table with the (partition, offset) primary key); on the same
    filesystem as the daemon's data directory. The same key and value bytes as the PATCH writes.
    """

    def __init__(self, path: Path, partitions: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.key = encode_key(CONNECTOR, PARTITION)
        self.partition = partition_for(self.key, partitions)
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute(RECORDS_TABLE.format(name="IF NOT EXISTS records"))
        self.offset = 0

    def timed_commit(self, position: int) -> float:
        value = encode_offset({"position": position})
        t0 = time.perf_counter()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(
            "INSERT INTO records (partition, offset, key, value, timestamp_ms) VALUES (?, ?, ?, ?, ?)",
            (self.partition, self.offset, self.key, value, time.time_ns() // 1_000_000),
        )
        self.conn.execute("COMMIT")
        elapsed = time.perf_counter() - t0
        self.offset += 1
        return elapsed

    def close(self) -> None:
        self.conn.close()


def ratios(result: dict[str, Any], raw: str) -> None:
    """Issue 12's targets: the PATCH's cost above the HTTP floor any request pays, against the raw
    write's p50 (<= 1.5x), and the PATCH's p99 against the raw p99 (<= 3x)."""
    patch, floor, base = result["daemon_patch"], result["http_floor"], result[raw]
    result["ratio_p50"] = round(patch["p50_ms"] / base["p50_ms"], 2)
    result["ratio_p99"] = round(patch["p99_ms"] / base["p99_ms"], 2)
    result["ratio_p50_above_floor"] = round((patch["p50_ms"] - floor["p50_ms"]) / base["p50_ms"], 2)


def stats(samples: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p90_ms": round(percentile(ms, 90), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "min_ms": round(min(ms), 3),
        "max_ms": round(max(ms), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
    }


def alternate(
    args: argparse.Namespace,
    http: DaemonRequests,
    raw_commit: Callable[[int], float],
    patch: list[float],
    raw: list[float],
) -> tuple[list[float], list[float]]:
    """Warm up, then time ``args.n`` PATCHes alternating with as many raw commits of the same position,
    who goes first flipping each time so neither always follows the other's I/O; check the last PATCH
    is visible. Returns the ``/healthz`` floor and the dry-run PATCH samples taken after."""
    http.patch(0, create=True)
    for i in range(1, args.warmup + 1):
        http.patch(i)
        raw_commit(i)
    base = args.warmup + 1
    for i in range(base, base + args.n):
        if i % 2:
            patch.append(http.patch(i))
            raw.append(raw_commit(i))
        else:
            raw.append(raw_commit(i))
            patch.append(http.patch(i))
    check_visible(http, base + args.n - 1)
    floor = http_floor(http, args.n)
    dry = [http.patch(base + args.n, dry_run=True) for _ in range(args.n)]
    return floor, dry


def kafka_vs_raw(args: argparse.Namespace, broker: Tansu, work: Path, extra: list[str], label: str) -> dict[str, Any]:
    topic = f"bench-commit-{label}-{os.getpid()}"
    raw_topic = f"bench-commit-raw-{label}-{os.getpid()}"
    broker.create_topic(raw_topic, args.partitions, {"cleanup.policy": "compact"})
    daemon_args = [
        "--bootstrap-servers",
        broker.bootstrap,
        "--offsets-topic",
        topic,
        "--data-dir",
        str(work / label),
        "--offsets-partitions",
        str(args.partitions),
        *TANSU_TAIL,
        *extra,
    ]
    patch: list[float] = []
    raw: list[float] = []
    with (
        Daemon(daemon_args, work / f"daemon-{label}.log") as daemon,
        contextlib.closing(DaemonRequests(daemon, args.client)) as http,
    ):
        producer = RawProducer(broker.bootstrap, raw_topic, args.partitions)
        floor, dry = alternate(args, http, producer.timed_send, patch, raw)
    result: dict[str, Any] = {
        "daemon_patch": stats(patch),
        "raw_produce": stats(raw),
        "http_floor": stats(floor),
        "dry_run_patch": stats(dry),
        "daemon_args": extra,
    }
    ratios(result, "raw_produce")
    return result


def embedded_patch(args: argparse.Namespace, work: Path, extra: list[str], label: str) -> dict[str, Any]:
    """The embedded daemon's PATCH alternating with ``RawSqlite``'s commit, as the Kafka run
    alternates with the raw produce."""
    samples: list[float] = []
    raw: list[float] = []
    sqlite_floor = RawSqlite(work / f"raw-sqlite-{label}" / "raw.db", args.partitions)
    try:
        with (
            Daemon(
                ["--data-dir", str(work / label), "--offsets-partitions", str(args.partitions), *extra],
                work / f"daemon-{label}.log",
            ) as daemon,
            contextlib.closing(DaemonRequests(daemon, args.client)) as http,
        ):
            floor, dry = alternate(args, http, sqlite_floor.timed_commit, samples, raw)
    finally:
        sqlite_floor.close()
    result: dict[str, Any] = {
        "daemon_patch": stats(samples),
        "raw_sqlite_commit": stats(raw),
        "http_floor": stats(floor),
        "dry_run_patch": stats(dry),
        "daemon_args": extra,
    }
    ratios(result, "raw_sqlite_commit")
    return result


def diagnose(args: argparse.Namespace, broker: Tansu, extra_config: dict[str, str]) -> dict[str, Any]:
    """Broker ack of ``append()``, then how long until the log's reader delivers that record."""
    from emulator.logs.kafka.offsets_log import KafkaOffsetLog
    from emulator.view.offset_view import OffsetView

    topic = f"bench-commit-diag-{os.getpid()}-{len(extra_config)}"
    log = KafkaOffsetLog(
        broker.bootstrap,
        topic=topic,
        partitions=args.partitions,
        client_config=extra_config,
        tail_fetch_wait_ms=TANSU_TAIL[1].removesuffix("ms"),
    )
    log.open()
    view = OffsetView()
    log.start_reading(view.apply)
    key = encode_key(CONNECTOR, PARTITION)
    acks: list[float] = []
    visible: list[float] = []

    async def run() -> None:
        for i in range(args.diagnose_n + args.warmup):
            t0 = time.perf_counter()
            positions = log.append([(key, encode_offset({"position": i}))], 30)
            t1 = time.perf_counter()
            while not all(log.progress().positions.get(p.partition, 0) > p.offset for p in positions):
                await asyncio.sleep(0.0005)  # positions advance once the view applied the batch
            t2 = time.perf_counter()
            if i >= args.warmup:
                acks.append(t1 - t0)
                visible.append(t2 - t1)

    try:
        deadline = time.monotonic() + 60
        while not log.progress().caught_up:
            if time.monotonic() > deadline:
                raise RuntimeError("diagnostic log never caught up")
            time.sleep(0.01)
        asyncio.run(run())
    finally:
        log.close()
    return {"client_config": extra_config, "append_ack": stats(acks), "ack_to_applied": stats(visible)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="measured requests of each kind")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=25)
    ap.add_argument("--diagnose-n", type=int, default=200)
    ap.add_argument("--no-diagnose", dest="diagnose", action="store_false")
    ap.add_argument("--no-embedded", dest="embedded", action="store_false")
    ap.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="HTTP client timing the daemon: requests encoded before the clock (lean, default) or httpx",
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="also run a Kafka daemon with --kafka-config KEY=VALUE (repeatable, one run each)",
    )
    ap.add_argument(
        "--embedded-variant",
        action="append",
        default=[],
        metavar="ARGS",
        help="also run an embedded daemon with these serve options, e.g. '--no-history' (repeatable)",
    )
    args = ap.parse_args()

    work = workdir("commit")
    payload: dict[str, Any] = {
        "benchmark": "commit_latency",
        "command": command_line(),
        "machine": machine(),
        "params": vars(args),
        "workdir": str(work),
    }
    print(
        f"commit latency benchmark: N={args.n} each, warm-up {args.warmup}, {args.client} client; logs in {work}",
        flush=True,
    )
    started = time.monotonic()
    with Tansu(work / "tansu.log") as broker:
        payload["kafka"] = r = kafka_vs_raw(args, broker, work, [], "default")
        print(f"  Kafka daemon PATCH  : {r['daemon_patch']}", flush=True)
        print(f"  raw produce + flush : {r['raw_produce']}", flush=True)
        print(
            f"  ratio p50 {r['ratio_p50']}x (above the HTTP floor {r['ratio_p50_above_floor']}x), "
            f"p99 {r['ratio_p99']}x",
            flush=True,
        )
        print(f"  HTTP floor (GET /healthz, same daemon): {r['http_floor']}", flush=True)
        print(f"  PATCH ?dry_run=true (everything but the write): {r['dry_run_patch']}", flush=True)
        payload["variants"] = []
        for variant in args.variant:
            v = kafka_vs_raw(args, broker, work, ["--kafka-config", variant], f"v{len(payload['variants'])}")
            payload["variants"].append(v)
            print(
                f"  variant {variant}: PATCH {v['daemon_patch']} / raw {v['raw_produce']}; ratio p50 {v['ratio_p50']}x",
                flush=True,
            )
        if args.diagnose:
            payload["diagnosis"] = [diagnose(args, broker, {})]
            for variant in args.variant:
                key, _, value = variant.partition("=")
                payload["diagnosis"].append(diagnose(args, broker, {key: value}))
            for d in payload["diagnosis"]:
                print(
                    f"  in-process split {d['client_config'] or '(defaults)'}: append ack {d['append_ack']}; "
                    f"ack -> delivered by the reader {d['ack_to_applied']}",
                    flush=True,
                )
    if args.embedded:
        payload["embedded"] = e = embedded_patch(args, work, [], "embedded")
        print(f"  embedded daemon PATCH: {e['daemon_patch']}", flush=True)
        print(f"  raw SQLite WAL commit (synchronous=FULL): {e['raw_sqlite_commit']}", flush=True)
        print(f"  embedded HTTP floor (GET /healthz): {e['http_floor']}", flush=True)
        print(f"  embedded PATCH ?dry_run=true: {e['dry_run_patch']}", flush=True)
        print(
            f"  embedded ratio p50 {e['ratio_p50']}x (above the HTTP floor {e['ratio_p50_above_floor']}x), "
            f"p99 {e['ratio_p99']}x",
            flush=True,
        )
        payload["embedded_variants"] = []
        for variant in args.embedded_variant:
            extra = shlex.split(variant)
            v = embedded_patch(args, work, extra, f"embedded-v{len(payload['embedded_variants'])}")
            payload["embedded_variants"].append(v)
            print(
                f"  embedded variant {variant}: PATCH {v['daemon_patch']} / raw {v['raw_sqlite_commit']}; "
                f"ratio p50 above the floor {v['ratio_p50_above_floor']}x, p99 {v['ratio_p99']}x",
                flush=True,
            )
    payload["total_s"] = round(time.monotonic() - started, 1)
    path = write_results("commit_latency", payload)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
