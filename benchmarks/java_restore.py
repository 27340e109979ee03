"""Child process of ``benchmarks.restore``: Apache Kafka's ``KafkaOffsetBackingStore.start()``, timed in Java.

The store is built the way ``ConnectDistributed`` builds it (``DistributedConfig`` → ``SharedTopicAdmin``
→ ``KafkaOffsetBackingStore(admin, clientIdBase, keyConverter)`` → ``configure``), on the jars and JVM the
oracle uses (``tests.oracle.classpath``), with the JVM options ``connect-distributed.sh`` /
``kafka-run-class.sh`` pass to a worker (G1, ``-Xmx2G``). ``start()`` creates-or-verifies the topic and
reads it to its end offsets before returning (``KafkaBasedLog.start`` → ``readToEnd``), which is the
worker's restore. The clock is ``System.nanoTime()`` read in the JVM right before and after the call;
JVM startup is outside it, class loading of the Kafka clients is inside it (as on a real worker start).

Two starts per JVM: ``cold`` (the first Kafka client in this JVM, what a restarted worker pays) and
``warm`` (a second store on the same topic in the same JVM, classes loaded and partly JIT-compiled),
so the comparison can be read either way.

``KafkaBasedLog.stop()`` has been seen to hang against Tansu (docs/testing.md, "The test broker:
Tansu"): every stop runs on a daemon thread with a deadline, and the process ends with ``os._exit``
so no stuck Java thread can keep it alive. One JSON object per line on stdout; stderr carries the
JVM's log.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

# Stdout is the result channel: point fd 1 at stderr before the JVM starts so nothing the JVM prints
# (System.out, log4j console appenders) can corrupt it.
_RESULTS = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

from tests.fixtures.processes import rss_kib  # noqa: E402
from tests.oracle.classpath import LOG4J_CONFIG, jvm_path, oracle_classpath  # noqa: E402

# What kafka-run-class.sh (KAFKA_JVM_PERFORMANCE_OPTS) and connect-distributed.sh (KAFKA_HEAP_OPTS) use.
WORKER_JVM_OPTS = [
    "-Xms256M",
    "-Xmx2G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
    f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
]


def emit(msg: dict[str, Any]) -> None:
    _RESULTS.write(json.dumps(msg) + "\n")
    _RESULTS.flush()


def bounded(fn: Any, timeout_s: float, what: str) -> bool:
    """Run ``fn`` on a daemon thread; False (and a note on stderr) if it overran ``timeout_s``."""
    box: dict[str, BaseException] = {}

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name=what)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        print(f"[java_restore] {what} did not return within {timeout_s} s (known Tansu hazard)", file=sys.stderr)
        return False
    if "error" in box:
        print(f"[java_restore] {what} failed: {box['error']!r}", file=sys.stderr)
    return True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=25)
    ap.add_argument("--expect-keys", type=int, required=True)
    ap.add_argument("--connectors", type=int, default=20)
    ap.add_argument("--starts", type=int, default=2, help="1 = cold only, 2 = cold then warm")
    ap.add_argument("--timeout-s", type=float, default=300)
    ap.add_argument(
        "--worker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra worker property; top-level worker properties reach the store's consumer",
    )
    args = ap.parse_args()

    import jpype

    jpype.startJVM(
        jvm_path(None), *WORKER_JVM_OPTS, classpath=oracle_classpath(), convertStrings=False, ignoreUnrecognized=True
    )
    J = jpype.JClass
    System = J("java.lang.System")
    HashMap = J("java.util.HashMap")
    emit(
        {
            "jvm_ready_epoch": time.time(),
            "java_version": str(System.getProperty("java.version")),
            "vm": str(System.getProperty("java.vm.name")),
        }
    )

    props = HashMap()
    for k, v in {
        "bootstrap.servers": args.bootstrap,
        "group.id": "bench-connect-cluster",
        "offset.storage.topic": args.topic,
        "offset.storage.partitions": str(args.partitions),
        "offset.storage.replication.factor": "1",
        "config.storage.topic": "bench-connect-configs",
        "status.storage.topic": "bench-connect-status",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        **dict(pair.split("=", 1) for pair in args.worker_config),
    }.items():
        props.put(k, v)

    def make_store() -> tuple[Any, Any]:
        config = J("org.apache.kafka.connect.runtime.distributed.DistributedConfig")(props)
        client_id_base = J("org.apache.kafka.connect.util.ConnectUtils").clientIdBase(config)
        admin_props = HashMap(config.originals())
        admin_props.put("client.id", client_id_base + "shared-admin")
        admin = J("org.apache.kafka.connect.util.SharedTopicAdmin")(admin_props)

        @jpype.JImplements("java.util.function.Supplier")
        class ClientIdBase:
            @jpype.JOverride  # type: ignore[untyped-decorator]
            def get(self) -> Any:
                return client_id_base

        converter = J("org.apache.kafka.connect.json.JsonConverter")()
        conv_props = HashMap()
        conv_props.put("schemas.enable", "false")
        converter.configure(conv_props, True)
        store = J("org.apache.kafka.connect.storage.KafkaOffsetBackingStore")(admin, ClientIdBase(), converter)
        store.configure(config)
        return store, admin

    for label in ["cold", "warm"][: args.starts]:
        store, admin = make_store()
        timing: dict[str, Any] = {}

        def start(store: Any = store, timing: dict[str, Any] = timing) -> None:
            t0 = System.nanoTime()
            store.start()
            timing["ns"] = int(System.nanoTime() - t0)

        cpu0 = time.process_time()  # the JVM runs inside this process: all its threads (JIT, GC, clients)
        if not bounded(start, args.timeout_s, f"{label} KafkaOffsetBackingStore.start()") or "ns" not in timing:
            emit({"error": f"{label} start() failed or timed out"})
            os._exit(2)
        done_epoch = time.time()
        cpu = time.process_time() - cpu0
        # Completeness: every connector's partitions as the store indexed them, like GET /offsets would.
        partitions = sum(int(store.connectorPartitions(f"bench-conn-{c}").size()) for c in range(args.connectors))
        emit(
            {
                "start": label,
                "start_s": timing["ns"] / 1e9,
                "cpu_s": cpu,
                "done_epoch": done_epoch,
                "connector_partitions": partitions,
                "complete": partitions == args.expect_keys,
                **rss_kib(),
            }
        )
        bounded(store.stop, 15, f"{label} KafkaOffsetBackingStore.stop()")
        bounded(admin.close, 5, "SharedTopicAdmin.close()")
    _RESULTS.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
