"""Child process of ``benchmarks.restore``: the floor of a restore, a bare librdkafka consumer reading the topic.

What any Python program reading the offsets topic to its end must at least pay: a confluent-kafka
``Consumer`` assigned to every partition from the beginning, the end offsets looked up once (as the
daemon and ``KafkaBasedLog`` do), and ``consume()`` in batches until every partition's position
reaches its end offset. It does nothing with a record (no decoding, no view, no history): it only
counts them, so ``daemon / bare`` is what the daemon's own work costs on top of the fetching.

Same consumer settings as the daemon's replay (``fetch.wait.max.ms=500``, the given
``--kafka-config`` pairs, e.g. ``max.partition.fetch.bytes``). Timed from before the consumer is
created to the moment the last position reached its end; imports are done before the clock, as in
``benchmarks.restore_python``. Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from benchmarks.support import rss_kib


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=25)
    ap.add_argument("--expect-records", type=int, required=True)
    ap.add_argument("--timeout-s", type=float, default=600)
    ap.add_argument("--kafka-config", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()

    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": "bench-bare-consumer",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "isolation.level": "read_uncommitted",
        "fetch.wait.max.ms": "500",
        **dict(pair.split("=", 1) for pair in args.kafka_config),
    }
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    consumer = Consumer(config)
    ends = {}
    for p in range(args.partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30)
        ends[p] = high
    assigned = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in range(args.partitions)])
    records = 0
    deadline = t0 + args.timeout_s
    positions = dict.fromkeys(ends, 0)
    while any(positions[p] < end for p, end in ends.items()):
        if time.perf_counter() > deadline:
            raise SystemExit(f"bare consumer not at the end after {args.timeout_s} s: {positions} of {ends}")
        # Positions once per batch (as the daemon's reader does), not per record: the floor.
        records += len(consumer.consume(10_000, timeout=0.2))
        positions = {tp.partition: tp.offset for tp in consumer.position(assigned)}
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    memory = rss_kib()
    consumer.close()
    print(
        json.dumps(
            {
                "restore_s": round(elapsed, 4),
                "cpu_s": round(cpu, 4),
                "records": records,
                "end_offsets_sum": sum(ends.values()),
                "complete": records == args.expect_records,
                "rss_kib": memory.get("VmRSS"),
                "peak_rss_kib": memory.get("VmHWM"),
            }
        )
    )
    sys.stdout.flush()
    if records != args.expect_records:
        raise SystemExit(f"bare consumer read {records} records, expected {args.expect_records}")


if __name__ == "__main__":
    main()
