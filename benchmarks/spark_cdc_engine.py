"""The baseline of ``spark_cdc``: the same Debezium connector in Debezium's embedded engine alone.

Run by ``benchmarks.spark_cdc`` as ``python -m benchmarks.spark_cdc_engine PROPS.json COUNT`` (JPype
starts the JVM in this process). The consumer does what a Connect worker does with a record before
producing it: converts key and value with Connect's ``JsonConverter`` and marks it processed;
offsets go to a ``MemoryOffsetBackingStore`` (a worker commits them every 60 s by default, off the
record path). Prints ``{"ready": true}`` once the connector polls, then, when ``COUNT`` changes
arrived, ``{"count": N, "first": t, "last": t}`` (``time.time()`` of the first and last change).
"""

# mypy: disable-error-code="untyped-decorator"
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any


def main() -> None:
    props, count = json.loads(Path(sys.argv[1]).read_text()), int(sys.argv[2])
    import jpype

    from emulator.spark.debezium_process import LOG4J_CONFIG, engine_classpath

    jpype.startJVM(
        jpype.getDefaultJVMPath(),
        f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        classpath=engine_classpath(),
        convertStrings=True,
    )
    J = jpype.JClass
    java_props = J("java.util.Properties")()
    for key, value in {**props, "offset.storage": "org.apache.kafka.connect.storage.MemoryOffsetBackingStore"}.items():
        java_props.setProperty(key, str(value))
    converter = J("org.apache.kafka.connect.json.JsonConverter")()
    config = J("java.util.HashMap")()
    config.put("schemas.enable", "false")
    converter.configure(config, False)
    seen, times = [0], [0.0, 0.0]
    started, done = threading.Event(), threading.Event()

    @jpype.JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer")
    class Consumer:
        @jpype.JOverride
        def handleBatch(self, records: Any, committer: Any) -> None:
            for event in records:
                record = event.record()
                topic = record.topic()
                converter.fromConnectData(topic, record.keySchema(), record.key())
                converter.fromConnectData(topic, record.valueSchema(), record.value())
                committer.markProcessed(event)
            committer.markBatchFinished()
            if seen[0] == 0:
                times[0] = time.time()
            seen[0] += len(records)
            if seen[0] >= count:
                times[1] = time.time()
                done.set()

        @jpype.JOverride
        def supportsTombstoneEvents(self) -> bool:
            return True

    @jpype.JImplements("io.debezium.engine.DebeziumEngine$ConnectorCallback")
    class Lifecycle:
        @jpype.JOverride
        def pollingStarted(self) -> None:
            started.set()

    engine = (
        J("io.debezium.engine.DebeziumEngine")
        .create(J("io.debezium.embedded.Connect"))
        .using(java_props)
        .using(Lifecycle())
        .notifying(Consumer())
        .build()
    )
    threading.Thread(target=engine.run, name="engine", daemon=True).start()
    if not started.wait(120):
        print(json.dumps({"error": "the connector did not start polling in 120 s"}), flush=True)
        os._exit(1)
    print(json.dumps({"ready": True}), flush=True)
    done.wait(600)
    print(json.dumps({"count": seen[0], "first": times[0], "last": times[1]}), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
