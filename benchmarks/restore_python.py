"""Child process of ``benchmarks.restore``: one timed restore by the daemon's own log and view, in-process.

A fresh interpreter per measurement, like the JVM side's fresh JVM: nothing is cached between rounds
and the 1,000,000-record view of one round does not inflate the next one's memory. Imports are done
before the clock starts (the Java side likewise excludes JVM startup); everything the daemon does to
restore is inside it: constructing the log, ``open()`` (create-or-verify the topic), the consumer's
assignment and end-offset lookup, the fetches, and applying every record to the ``OffsetView``.

Prints one JSON object on stdout. ``--history DIR`` attaches the history archive to the view the way
``connect-offsets serve`` does by default. ``--profile PATH`` also writes a cProfile of the reader
thread (and of the archiver thread with ``--history``) in ``pstats`` format, with a text summary at
``PATH.txt``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.support import bench_key, rss_kib
from emulator.logs.base import OffsetLog
from emulator.model.records import LogRecord
from emulator.view.offset_view import OffsetView


class TimedSink:
    """Wraps ``view.apply`` to split the restore into "applying to the view" and "everything else"."""

    def __init__(self, apply: Callable[[Sequence[LogRecord]], None]) -> None:
        self._apply = apply
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, records: Sequence[LogRecord]) -> None:
        t0 = time.perf_counter()
        self._apply(records)
        self.seconds += time.perf_counter() - t0
        self.calls += 1


def _profile_thread(cls: type[Any], method: str, holder: dict[str, cProfile.Profile], name: str) -> None:
    """cProfile only profiles the thread that enables it, so enable it inside the thread's own target."""
    original = getattr(cls, method)

    def profiled(self: Any, *args: Any) -> Any:
        profile = cProfile.Profile()
        holder[name] = profile
        profile.enable()
        try:
            return original(self, *args)
        finally:
            profile.disable()

    setattr(cls, method, profiled)


def build(args: argparse.Namespace, holder: dict[str, cProfile.Profile]) -> Callable[[], OffsetLog]:
    if args.backend == "kafka":
        from emulator.logs.kafka.offsets_log import KafkaOffsetLog
        from emulator.logs.kafka.reader import TopicReader

        if args.profile:
            _profile_thread(TopicReader, "_run", holder, "reader")
        config = dict(pair.split("=", 1) for pair in args.kafka_config)
        return lambda: KafkaOffsetLog(
            args.bootstrap, topic=args.topic, partitions=args.partitions, client_config=config
        )
    from emulator.logs.embedded.offsets_log import EmbeddedOffsetLog

    if args.profile:
        _profile_thread(EmbeddedOffsetLog, "_read_forever", holder, "reader")
    return lambda: EmbeddedOffsetLog(args.data_dir, partitions=args.partitions, name=args.topic)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=("kafka", "embedded"), required=True)
    ap.add_argument("--bootstrap")
    ap.add_argument("--data-dir", type=Path)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=25)
    ap.add_argument("--expect-records", type=int, required=True)
    ap.add_argument("--expect-keys", type=int, required=True)
    ap.add_argument("--timeout-s", type=float, default=300)
    ap.add_argument("--profile", type=Path)
    ap.add_argument("--kafka-config", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--history", type=Path, help="attach the history archive here, as `serve` does by default")
    args = ap.parse_args()

    holder: dict[str, cProfile.Profile] = {}
    make = build(args, holder)
    rss_before = rss_kib()

    cpu0 = time.process_time()  # every thread of the process: Python, librdkafka, SQLite
    t0 = time.perf_counter()
    offset_log = make()
    offset_log.open()
    view = OffsetView()
    archive = None
    if args.history:
        # As emulator.server.wiring.build_history wires it: a view listener fed on the reader thread.
        from emulator.history.archive import HistoryArchive
        from emulator.history.archiver import Archiver
        from emulator.history.origins import OriginRegistry

        if args.profile:
            _profile_thread(Archiver, "run", holder, "archiver")
        archive = HistoryArchive(
            args.history, offset_log.description, origins=OriginRegistry(), progress=offset_log.progress
        )
        archive.open()
        view.add_listener(archive.listener)
    sink = TimedSink(view.apply)
    offset_log.start_reading(sink)
    t_reading = time.perf_counter()
    deadline = t0 + args.timeout_s
    while not offset_log.progress().caught_up:
        if time.perf_counter() > deadline:
            offset_log.close()
            raise SystemExit(f"not caught up after {args.timeout_s} s: {offset_log.progress()}")
        time.sleep(0.002)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    progress = offset_log.progress()
    rss_after = rss_kib()

    # What was restored must be all of it, or the timing is of a partial read.
    sample = bench_key(args.expect_keys - 1)
    entry = view.get_raw(sample)
    checks = {
        "records_read": progress.records_read,
        "end_offsets_sum": sum(progress.end_offsets.values()),
        "live_keys": view.live_keys(),
        "connectors": len(view.connectors()),
        "last_key_value": entry.value.decode() if entry else None,
    }
    last_position = args.expect_records // args.expect_keys - 1
    ok = (
        progress.records_read == args.expect_records
        and view.live_keys() == args.expect_keys
        and entry is not None
        and entry.value == f'{{"position":{last_position}}}'.encode()
    )
    offset_log.close()
    archive_lag = None
    if archive is not None:  # what the archiver still had queued at "ready": drained after the timing
        t_close = time.perf_counter()
        archive.close()
        archive_lag = round(time.perf_counter() - t_close, 3)
    if args.profile:
        for _ in range(50):  # each thread disables its profiler on its way out of close()
            if not any(
                t.name.startswith(("offsets-reader", "embedded-log-reader", "history-archiver"))
                for t in threading.enumerate()
            ):
                break
            time.sleep(0.1)
        text = io.StringIO()
        for name, profile in holder.items():
            path = args.profile.with_name(f"{args.profile.stem}-{name}.prof")
            profile.dump_stats(str(path))
            text.write(f"===== {name} thread =====\n")
            stats = pstats.Stats(profile, stream=text)
            stats.sort_stats("tottime").print_stats(25)
            stats.sort_stats("cumulative").print_stats(25)
        args.profile.with_suffix(".txt").write_text(text.getvalue())
    print(
        json.dumps(
            {
                "backend": args.backend,
                "restore_s": round(elapsed, 4),
                "cpu_s": round(cpu, 4),
                "open_s": round(t_reading - t0, 4),
                "view_apply_s": round(sink.seconds, 4),
                "sink_calls": sink.calls,
                "records_per_s": round(progress.records_read / elapsed),
                "rss_kib_before": rss_before.get("VmRSS"),
                "rss_kib_after": rss_after.get("VmRSS"),
                "peak_rss_kib": rss_after.get("VmHWM"),
                "complete": ok,
                "checks": checks,
                "profiled": bool(args.profile),
                "history": bool(args.history),
                "history_drain_after_ready_s": archive_lag,
            }
        )
    )
    sys.stdout.flush()
    if not ok:
        raise SystemExit(f"incomplete restore: {checks}")


if __name__ == "__main__":
    main()
