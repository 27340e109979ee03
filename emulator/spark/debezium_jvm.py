"""The JVM side of ``connect-debezium``: one Debezium embedded engine in a process of its own.

Run by ``emulator.spark.debezium_process.EngineProcess`` as ``python -m emulator.spark.debezium_jvm``;
JPype starts the JVM inside *this* process. Why a process of its own: a JVM can never be restarted
inside the process that loaded it, and a hung ``close()`` or a JVM crash must not take Spark's
driver-side Python worker down. It speaks JSON lines: one request per stdin line, one answer per
line on the *original* stdout (everything else written to fd 1 — ``System.out``, log4j consoles —
goes to stderr). When stdin closes (Spark killed the worker that owns us) the engine is closed
gracefully, which releases the replication slot; when that hangs, the process exits anyway.

How offsets flow (docs/spark-cdc.md, "Design"):

- The engine's offset store is Connect's own ``FileOffsetBackingStore`` on a private file, written
  before the engine starts from the daemon's raw records (``seed``: exact key and value bytes), so
  the connector resumes exactly where the daemon's offsets say, as a Connect worker would.
- Records are handed to the reader (``poll``) but *not* marked processed. Only ``ack(n)``, sent once
  the daemon holds the offsets of the first ``n`` delivered records, marks them and lets the engine
  commit: its ``OffsetStorageWriter`` flushes to the file and ``SourceTask.commit()`` runs, which for
  Postgres confirms the LSN to the replication slot. So the database never forgets a change the
  daemon's offsets do not cover yet: whoever resumes from the daemon (Connect or Spark) finds it.
- The engine commits only when ``ack`` asks (an ``OffsetCommitPolicy`` that answers yes on the ack
  thread only) and once more when it closes, with what was acked.
"""

# mypy: disable-error-code="untyped-decorator"
# (JPype ships no type hints: its @JImplements/@JOverride decorators are untyped by necessity.)
from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import json
import os
import sys
import threading
import time
import traceback
from typing import Any

PROTO: Any = None
CLOSE_TIMEOUT_S = 60.0


def _claim_stdout() -> Any:
    """Keep the original stdout for the protocol; everything else written to fd 1 goes to stderr."""
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(proto_fd, "w", encoding="utf-8", buffering=1)


_send_lock = threading.Lock()


def _send(msg: dict[str, Any]) -> None:
    with _send_lock:
        PROTO.write(json.dumps(msg, ensure_ascii=False, allow_nan=False) + "\n")
        PROTO.flush()


def _log(msg: str) -> None:
    sys.stderr.write(f"[connect-debezium engine {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def _java_error(error: Any) -> str:
    """A Java or Python exception as one line per cause (the message users need is often a cause's)."""
    parts: list[str] = []
    seen = 0
    current = error
    while current is not None and seen < 8:
        getter = getattr(current, "getMessage", None)
        name = current.getClass().getName() if hasattr(current, "getClass") else type(current).__name__
        message = getter() if getter is not None else str(current)
        parts.append(f"{name}: {message}")
        nxt = current.getCause() if hasattr(current, "getCause") else current.__cause__
        if nxt is current:
            break
        current, seen = nxt, seen + 1
    return " / caused by ".join(str(p) for p in parts)


class Engine:
    """One Debezium engine run: seeded offsets, a bounded hand-off queue, acks on request."""

    def __init__(self, jpype: Any, request: dict[str, Any]) -> None:
        self.jp = jpype
        J = jpype.JClass
        self.offsets_file = request["offsets_file"]
        self.props: dict[str, str] = {
            **{str(k): str(v) for k, v in request["props"].items()},
            "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
            "offset.storage.file.filename": self.offsets_file,
            # key and value are converted by the engine's own JsonConverter, on its processing threads
            "converter.schemas.enable": "true" if request.get("schemas") else "false",
        }
        self.queue_limit = max(1, int(request.get("queue_limit", 10000)))
        # Connect's offset converter: schemaless JsonConverter, as every worker and engine configures it
        self.offset_conv = J("org.apache.kafka.connect.json.JsonConverter")()
        config = J("java.util.HashMap")()
        config.put("schemas.enable", "false")
        self.offset_conv.configure(config, False)
        self.lock = threading.Condition()
        self.queue: collections.deque[tuple[Any, list[Any]]] = collections.deque()
        self.delivered: collections.deque[tuple[int, str, Any]] = collections.deque()
        self.delivered_count = 0
        self.acked = 0
        self.committer: Any = None
        self.ack_thread: int | None = None
        self.closing = False
        self.started = threading.Event()
        self.completed = threading.Event()
        self.outcome: dict[str, Any] = {}
        self.engine: Any = None
        self.thread: threading.Thread | None = None

    # -- start ----------------------------------------------------------------------------------
    def write_seed(self, seed: list[list[str | None]]) -> None:
        """The daemon's raw records as ``FileOffsetBackingStore`` keeps them: one Java-serialized
        ``HashMap<byte[], byte[]>`` (written by Java's own ObjectOutputStream, as the store's
        ``save()`` does)."""
        jp, J = self.jp, self.jp.JClass
        data = J("java.util.HashMap")()
        for key_b64, value_b64 in seed:
            assert key_b64 is not None
            key = jp.JArray(jp.JByte)(base64.b64decode(key_b64))
            value = None if value_b64 is None else jp.JArray(jp.JByte)(base64.b64decode(value_b64))
            data.put(key, value)
        out = J("java.io.ObjectOutputStream")(J("java.io.FileOutputStream")(self.offsets_file))
        try:
            out.writeObject(data)
        finally:
            out.close()

    def start(self, timeout_s: float) -> dict[str, Any]:
        jp, J = self.jp, self.jp.JClass
        engine_self = self
        props = J("java.util.Properties")()
        for key, value in self.props.items():
            props.setProperty(key, value)

        @jp.JImplements("io.debezium.engine.spi.OffsetCommitPolicy")
        class AckOnly:
            @jp.JOverride
            def performCommit(self, records: Any, since: Any) -> bool:
                return engine_self.ack_thread == threading.get_ident()

        @jp.JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer")
        class Handoff:
            @jp.JOverride
            def handleBatch(self, records: Any, committer: Any) -> None:
                try:
                    engine_self.take(records, committer)
                except Exception as exc:
                    _log(f"handing records over failed: {exc!r}\n{traceback.format_exc()}")
                    raise

            @jp.JOverride
            def supportsTombstoneEvents(self) -> bool:
                return True

        @jp.JImplements("io.debezium.engine.DebeziumEngine$ConnectorCallback")
        class Lifecycle:
            @jp.JOverride
            def pollingStarted(self) -> None:
                engine_self.started.set()

        @jp.JImplements("io.debezium.engine.DebeziumEngine$CompletionCallback")
        class Completion:
            @jp.JOverride
            def handle(self, success: Any, message: Any, error: Any) -> None:
                engine_self.outcome.update(
                    success=bool(success),
                    message=str(message) if message is not None else None,
                    error=_java_error(error) if error is not None else None,
                )
                engine_self.completed.set()
                engine_self.started.set()
                with engine_self.lock:
                    engine_self.lock.notify_all()

        self.engine = (
            J("io.debezium.engine.DebeziumEngine")
            .create(J("io.debezium.engine.format.Json"))
            .using(props)
            .using(AckOnly())
            .using(Lifecycle())
            .using(Completion())
            .notifying(Handoff())
            .build()
        )
        self.thread = threading.Thread(target=self.engine.run, name="debezium-engine", daemon=True)
        self.thread.start()
        if not self.started.wait(timeout_s):
            return {"started": False, "error": f"the engine's tasks did not start polling within {timeout_s:.0f} s"}
        if self.completed.is_set():
            return {"started": False, **self.outcome}
        return {"started": True}

    # -- records (engine thread) -----------------------------------------------------------------
    def take(self, records: Any, committer: Any) -> None:
        """Convert and queue the batch; wait while the queue is full (back-pressure reaches the
        database: the connector stops reading the slot). Nothing is marked processed here."""
        self.committer = committer
        conv_offset = self.offset_conv
        taken: list[tuple[Any, list[Any]]] = []
        for event in records:
            record = event.sourceRecord()
            topic = record.topic()
            partition = bytes(conv_offset.fromConnectData(topic, None, record.sourcePartition())).decode("utf-8")
            offset_map = record.sourceOffset()
            offset = None if offset_map is None else bytes(conv_offset.fromConnectData(topic, None, offset_map))
            row = [
                event.key(),
                event.value(),
                str(topic),
                partition,
                None if offset is None else offset.decode("utf-8"),
            ]
            taken.append((event, row))
        with self.lock:  # the queue may exceed its limit by one batch (at most max.batch.size)
            while len(self.queue) >= self.queue_limit and not self.closing:
                self.lock.wait(0.5)
            if self.closing:
                return  # not marked processed: these records are delivered again after a restart
            self.queue.extend(taken)
            self.lock.notify_all()

    # -- requests (protocol thread) --------------------------------------------------------------
    def poll(self, max_records: int, wait_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + wait_s
        rows: list[list[Any]] = []
        with self.lock:
            while not self.queue and not self.completed.is_set() and time.monotonic() < deadline:
                self.lock.wait(max(0.0, deadline - time.monotonic()))
            while self.queue and len(rows) < max_records:
                event, row = self.queue.popleft()
                self.delivered_count += 1
                self.delivered.append((self.delivered_count, row[3], event))
                rows.append(row)
            self.lock.notify_all()
        return {"records": rows, "delivered": self.delivered_count, "state": self.state()}

    def state(self) -> dict[str, Any]:
        return {"running": not self.completed.is_set(), **self.outcome}

    def ack(self, upto: int) -> dict[str, Any]:
        """Mark delivered records ``1..upto`` processed and commit (file store, then ``task.commit()``).

        Only the last record of each source partition is marked: the writer keeps one offset per
        partition and the task commits the last offset it was told about, so marking the ones before
        it would change nothing."""
        if upto <= self.acked:
            return {"acked": self.acked, "committed": False}
        if upto > self.delivered_count:
            raise ValueError(f"cannot ack record {upto}: only {self.delivered_count} were delivered")
        last: dict[str, tuple[int, Any]] = {}
        with self.lock:
            while self.delivered and self.delivered[0][0] <= upto:
                index, partition, event = self.delivered.popleft()
                last[partition] = (index, event)
        if self.committer is None or self.completed.is_set():
            return {"acked": self.acked, "committed": False, "state": self.state()}
        for _, event in sorted(last.values(), key=lambda item: item[0]):
            self.committer.markProcessed(event)
        self.ack_thread = threading.get_ident()
        started = time.monotonic()
        try:
            self.committer.markBatchFinished()
        finally:
            self.ack_thread = None
        elapsed = time.monotonic() - started
        if elapsed > 0.5:
            _log(f"committing record {upto} took {elapsed:.2f} s")
        self.acked = upto
        return {"acked": upto, "committed": True, "seconds": elapsed}

    def forget(self, upto: int) -> dict[str, Any]:
        """Drop delivered records ``1..upto`` without committing them (``commitOffsets=false``)."""
        with self.lock:
            while self.delivered and self.delivered[0][0] <= upto:
                self.delivered.popleft()
        return {"forgotten": upto}

    def close(self) -> dict[str, Any]:
        """Graceful close: commits what was acked, stops the task (slot released), then the store."""
        with self.lock:
            self.closing = True
            self.lock.notify_all()
        if self.engine is None or self.completed.is_set():
            return {"closed": True, **self.outcome}
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        while True:
            try:
                self.engine.close()
                break
            except Exception as exc:  # "tasks are starting": retry until they have started
                if "starting" in str(exc) and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                if "already" in str(exc):
                    break
                raise
        if not self.completed.wait(max(1.0, deadline - time.monotonic())):
            return {"closed": False, "error": f"the engine did not stop within {CLOSE_TIMEOUT_S:.0f} s"}
        return {"closed": True, **self.outcome}


def _watch_parent() -> None:
    """Exit if the worker that started us is gone and the graceful path (stdin EOF) is stuck."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        time.sleep(CLOSE_TIMEOUT_S + 5)  # give the EOF path its chance to close the engine first
        _log("the owning process is gone; exiting")
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


class OwnerGone(Exception):
    """The process that owns this engine closed its end of the protocol."""


def _answer(message: dict[str, Any]) -> None:
    try:
        _send(message)
    except OSError as exc:  # the owner died mid-request (Spark killed its worker)
        raise OwnerGone(str(exc)) from exc


def _serve(jpype: Any, holder: dict[str, Engine]) -> None:
    """Answer requests until ``stop``, the end of stdin, or an owner that stopped listening."""
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        request = json.loads(line)
        op, rid, body = request.get("op"), request.get("id"), request.get("args", {})
        engine = holder.get("engine")
        try:
            if op == "start":
                if engine is not None:
                    raise ValueError("an engine is already running in this process")
                engine = holder["engine"] = Engine(jpype, body)
                engine.write_seed(body.get("seed", []))
                result = engine.start(float(body.get("start_timeout_s", 120)))
            elif engine is None:
                raise ValueError(f"no engine started (op {op!r})")
            elif op == "poll":
                result = engine.poll(int(body.get("max", 1000)), float(body.get("wait_s", 0)))
            elif op == "ack":
                result = engine.ack(int(body["upto"]))
            elif op == "forget":
                result = engine.forget(int(body["upto"]))
            elif op == "stop":
                _answer({"id": rid, "ok": True, "result": engine.close()})
                return
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as exc:  # every failure becomes an answer; the loop survives
            _log(f"{op} failed: {_java_error(exc)}\n{traceback.format_exc()}")
            _answer({"id": rid, "ok": False, "error": _java_error(exc)})
        else:
            _answer({"id": rid, "ok": True, "result": result})


def main() -> None:
    global PROTO
    parser = argparse.ArgumentParser(description="the JVM side of connect-debezium (not for direct use)")
    parser.add_argument("--jvm", default=None, help="path of libjvm.so (default: JPype's default JVM)")
    parser.add_argument("--classpath", required=True, help="os.pathsep-separated jars")
    parser.add_argument("--jvm-opt", action="append", default=[])
    args = parser.parse_args()
    PROTO = _claim_stdout()
    _watch_parent()
    holder: dict[str, Engine] = {}
    try:
        import jpype

        t0 = time.monotonic()
        jpype.startJVM(
            args.jvm or jpype.getDefaultJVMPath(),
            *args.jvm_opt,
            classpath=args.classpath.split(os.pathsep),
            convertStrings=True,
            ignoreUnrecognized=True,
        )
        version = str(jpype.JClass("java.lang.System").getProperty("java.version"))
        _answer({"ready": True, "java_version": version, "start_s": time.monotonic() - t0})
        _serve(jpype, holder)
    except OwnerGone as exc:
        _log(f"the owner stopped listening ({exc})")
    except BaseException as exc:
        _log(f"stopping after an unexpected error: {_java_error(exc)}\n{traceback.format_exc()}")
    finally:
        # Whatever ended the loop, a running engine is closed gracefully: it commits only what was
        # acked and releases the replication slot. Then exit without waiting for Java's threads.
        engine = holder.get("engine")
        if engine is not None and not engine.completed.is_set():
            try:
                _log(f"closed: {engine.close()}")
            except BaseException as exc:
                _log(f"close failed: {_java_error(exc)}")
        with contextlib.suppress(Exception):
            PROTO.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
