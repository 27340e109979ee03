"""``JavaOracle``: ask Apache Kafka's own classes, running in a JVM subprocess, what they do.

Compatibility is proven against Java, never against our own encoder, so every compat test funnels
through here. The JVM lives in ``jvm_server.py`` (one long-lived subprocess per oracle, JSON lines
over stdin/stdout); this side owns its lifecycle: every request has a deadline, a crash or hang
becomes an ``OracleError`` quoting the tail of the JVM's log, and a JVM that reported a stuck Java
thread (``"recycle"``) or was killed is replaced transparently on the next request.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from tests.oracle.classpath import LOG4J_CONFIG, jvm_path, oracle_classpath
from tests.oracle.errors import JavaError, JavaException, OracleError, OracleTimeout

SERVER = Path(__file__).with_name("jvm_server.py")
_EOF = object()
_MIN_RECURSION_LIMIT = 20000  # Jackson accepts 1000 nesting levels; their typed JSON is ~2000 deep to parse
if sys.getrecursionlimit() < _MIN_RECURSION_LIMIT:
    sys.setrecursionlimit(_MIN_RECURSION_LIMIT)


class JavaOracle:
    """One JVM subprocess hosting Kafka 4.3.0's JsonConverter, murmur2, offset stores and Connect."""

    java_version: str

    def __init__(
        self,
        java_home: str | None = None,
        *,
        start_timeout_s: float = 60.0,
        jvm_opts: list[str] | None = None,
        full_classpath: bool = False,
    ) -> None:
        self.java_home = java_home
        self.jvm_path = jvm_path(java_home)
        self.classpath = oracle_classpath(full_classpath)
        self.jvm_opts = [
            "-Xmx1g",
            "-XX:+UseSerialGC",
            "--enable-native-access=ALL-UNNAMED",
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            *(jvm_opts or []),
        ]
        self.start_timeout_s = start_timeout_s
        self.starts: list[float] = []  # seconds from spawn to "ready", one per JVM started
        self.timings: list[tuple[str, float]] = []  # (op, seconds) round trips, for reports
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._responses: queue.Queue[Any] = queue.Queue()
        # One log for the oracle's life (all JVMs it starts): JVM stderr, log4j, thread dumps.
        fd, self.log_path = tempfile.mkstemp(prefix="java-oracle-", suffix=".log")
        self._log_file: IO[bytes] | None = os.fdopen(fd, "wb")
        self._next_id = 0
        self._closed = False
        self._start()

    # --- lifecycle --------------------------------------------------------------------------------

    def _start(self) -> None:
        assert self._log_file is not None
        self._log_file.write(f"=== starting JVM {self.jvm_path} ===\n".encode())
        self._log_file.flush()
        cmd = [sys.executable, str(SERVER), "--jvm", self.jvm_path, "--classpath", os.pathsep.join(self.classpath)]
        for opt in self.jvm_opts:
            cmd.append(f"--jvm-opt={opt}")
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_file)
        self._proc = proc
        self._responses = queue.Queue()
        threading.Thread(
            target=self._pump, args=(proc, self._responses), daemon=True, name=f"java-oracle-stdout-{proc.pid}"
        ).start()
        ready = self._await(self._responses, self.start_timeout_s, "JVM start")
        if not ready.get("ready"):
            self._kill()
            raise OracleError(f"JVM sent {ready!r} instead of its ready line\n{self._stderr_tail()}")
        self.java_version = ready["java_version"]
        self.java_home_actual = ready["java_home"]
        self.starts.append(time.monotonic() - t0)

    @staticmethod
    def _pump(proc: subprocess.Popen[bytes], out: queue.Queue[Any]) -> None:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                try:
                    out.put(json.loads(line))
                except (ValueError, RecursionError) as e:
                    out.put({"protocol_error": f"{e!r}: {line[:500].decode('utf-8', 'replace')}"})
        finally:
            out.put(_EOF)  # whatever happens here, the waiting request learns of it instead of hanging

    def _await(self, responses: queue.Queue[Any], timeout_s: float, what: str) -> dict[str, Any]:
        try:
            msg = responses.get(timeout=timeout_s)
        except queue.Empty:
            self._kill()
            raise OracleTimeout(
                f"{what}: no answer from the JVM within {timeout_s}s; killed it (next request starts a new one)"
                f"\n{self._stderr_tail()}"
            ) from None
        if msg is _EOF:
            rc = self._proc.wait(timeout=10) if self._proc else None
            self._proc = None
            raise OracleError(f"{what}: the JVM subprocess exited (rc={rc}) without answering\n{self._stderr_tail()}")
        if "protocol_error" in msg:
            self._kill()
            raise OracleError(f"{what}: non-protocol output on the JVM's stdout: {msg['protocol_error']!r}")
        assert isinstance(msg, dict)
        return msg

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def _stderr_tail(self, max_bytes: int = 6000) -> str:
        if not self.log_path:
            return "(no JVM log)"
        if self._log_file is not None:
            self._log_file.flush()
        try:
            data = Path(self.log_path).read_bytes()
        except OSError as e:
            return f"(JVM log {self.log_path} unreadable: {e})"
        tail = data[-max_bytes:].decode("utf-8", "replace")
        return f"--- last {len(tail)} chars of JVM log {self.log_path} ---\n{tail}"

    def close(self) -> None:
        with self._lock:
            self._closed = True
            proc = self._proc
            if proc is not None and proc.poll() is None and proc.stdin is not None:
                with contextlib.suppress(OSError, ValueError):
                    proc.stdin.write(b'{"id": -1, "op": "close"}\n')
                    proc.stdin.flush()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
            self._kill()
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
            # Failures already quoted the log's tail; keep it only when asked to.
            if self.log_path and os.environ.get("JAVA_ORACLE_KEEP_LOG") != "1":
                with contextlib.suppress(OSError):
                    os.unlink(self.log_path)

    def __enter__(self) -> JavaOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- request/response ---------------------------------------------------------------------

    def request(self, op: str, args: dict[str, Any], timeout_s: float = 60.0) -> Any:
        """Raw access to a server operation (e.g. ``debug_sleep``/``debug_exit`` for the self-check)."""
        return self._call(op, args, timeout_s)

    def _call(self, op: str, args: dict[str, Any], timeout_s: float = 60.0) -> Any:
        with self._lock:
            if self._closed:
                raise OracleError("JavaOracle is closed")
            if self._proc is None or self._proc.poll() is not None:
                self._kill()
                self._start()
            proc = self._proc
            assert proc is not None and proc.stdin is not None
            self._next_id += 1
            rid = self._next_id
            t0 = time.monotonic()
            try:
                proc.stdin.write((json.dumps({"id": rid, "op": op, "args": args}) + "\n").encode("utf-8"))
                proc.stdin.flush()
            except OSError as e:
                self._kill()
                raise OracleError(f"{op}: could not write to the JVM subprocess ({e})\n{self._stderr_tail()}") from e
            while True:
                resp = self._await(self._responses, timeout_s, op)
                if resp.get("id") == rid:
                    break
            self.timings.append((op, time.monotonic() - t0))
            if resp.get("recycle"):
                # The server exits after answering; reap it so the next request starts a clean JVM.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
                self._kill()
            if not resp["ok"]:
                where = f" (JVM replaced; its log incl. thread dump: {self.log_path})" if resp.get("recycle") else ""
                raise JavaException(JavaError.from_wire(resp["error"]), f"{op} failed in the JVM{where}")
            return resp["result"]

    # --- JsonConverter ------------------------------------------------------------------------

    def json_encode_each(self, values: list[Any]) -> list[bytes | JavaError | None]:
        """``JsonConverter(schemas.enable=false).fromConnectData`` per typed value; failures as data."""
        out: list[bytes | JavaError | None] = []
        for r in self._call("json_encode", {"values": values}):
            if r is None:
                out.append(None)
            elif "error" in r:
                out.append(JavaError.from_wire(r["error"]))
            else:
                out.append(base64.b64decode(r["b64"]))
        return out

    def json_encode(self, values: list[Any]) -> list[bytes | None]:
        """The bytes Connect writes for each typed value (``None`` for a null value: a tombstone)."""
        out: list[bytes | None] = []
        for i, r in enumerate(self.json_encode_each(values)):
            if isinstance(r, JavaError):
                raise JavaException(r, f"JsonConverter.fromConnectData rejected value #{i} {values[i]!r}")
            out.append(r)
        return out

    def json_decode(self, raws: list[bytes | None]) -> list[Any | JavaError]:
        """``JsonConverter.toConnectData`` per input: the typed value, or the Java exception as data."""
        wire = [None if r is None else base64.b64encode(r).decode("ascii") for r in raws]
        return [
            JavaError.from_wire(r["error"]) if "error" in r else r["value"]
            for r in self._call("json_decode", {"raws": wire})
        ]

    def json_reencode(self, raws: list[bytes]) -> list[bytes | JavaError]:
        """``fromConnectData(toConnectData(raw))`` per input, in the JVM: what Connect writes back for
        what it read (the key bytes its GET looks up); failures as data."""
        wire = [base64.b64encode(r).decode("ascii") for r in raws]
        return [
            JavaError.from_wire(r["error"]) if "error" in r else base64.b64decode(r["b64"])
            for r in self._call("json_reencode", {"raws": wire})
        ]

    def offset_check(self, raws: Sequence[bytes | None]) -> list[dict[str, Any]]:
        """Per value, what ``OffsetStorageReaderImpl`` makes of it (``JsonConverter`` then
        ``OffsetUtils.validateFormat``): ``{"readable": True, "entries": [[key, value], …]}`` with each
        key and value digested (``class``, ``length`` for strings in UTF-16 units, ``sha256`` of its
        text), or ``{"readable": False, "stage": "converter"|"validateFormat", "error": JavaError}``."""
        wire = [None if r is None else base64.b64encode(r).decode("ascii") for r in raws]
        answers = list(self._call("offset_check", {"raws": wire}, timeout_s=120.0))
        for answer in answers:
            if "error" in answer:
                answer["error"] = JavaError.from_wire(answer["error"])
        return answers

    # --- partitioning ---------------------------------------------------------------------------

    def murmur2(self, keys: list[bytes]) -> list[int]:
        """``org.apache.kafka.common.utils.Utils.murmur2`` (signed 32-bit)."""
        return list(self._call("murmur2", {"keys": [base64.b64encode(k).decode("ascii") for k in keys]}))

    def partition(self, keys: list[bytes], num_partitions: int) -> list[int]:
        """``BuiltInPartitioner.partitionForKey``: the partition Java's producer picks for a keyed record."""
        args = {"keys": [base64.b64encode(k).decode("ascii") for k in keys], "num_partitions": num_partitions}
        return list(self._call("partition", args))

    # --- KafkaOffsetBackingStore (distributed worker) ------------------------------------------------

    def offsets_write(
        self,
        bootstrap: str,
        topic: str,
        connector: str,
        entries: list[tuple[Any, Any]],
        partitions: int = 25,
        *,
        extra_config: dict[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        """Write typed (partition, offset-or-None) entries through OffsetStorageWriter in one flush.

        Note Java's own semantics: the writer keys pending offsets by ``Map.equals``, so two entries whose
        partitions are equal maps in different orders collapse into the first one's key bytes.
        """
        args = {
            "bootstrap": bootstrap,
            "topic": topic,
            "connector": connector,
            "entries": [[p, o] for p, o in entries],
            "num_partitions": partitions,
            "extra_config": extra_config or {},
            "timeout_s": timeout_s,
        }
        self._call("offsets_write", args, timeout_s=2 * timeout_s + 45)

    def offsets_read(
        self,
        bootstrap: str,
        topic: str,
        connector: str,
        partitions: list[Any],
        *,
        num_partitions: int = 25,
        extra_config: dict[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> tuple[list[Any | None], list[Any]]:
        """A fresh store reads to the end; returns (offsets in request order, connectorPartitions)."""
        args = {
            "bootstrap": bootstrap,
            "topic": topic,
            "connector": connector,
            "partitions": partitions,
            "num_partitions": num_partitions,
            "extra_config": extra_config or {},
            "timeout_s": timeout_s,
        }
        r = self._call("offsets_read", args, timeout_s=2 * timeout_s + 45)
        return list(r["offsets"]), list(r["connector_partitions"])

    def connect_listing(
        self, bootstrap: str, topic: str, connectors: list[str], *, num_partitions: int = 25, timeout_s: float = 60.0
    ) -> dict[str, dict[str, Any]]:
        """What Connect's GET ``/connectors/{c}/offsets`` lists for each connector, read by a fresh
        ``KafkaOffsetBackingStore``: per connector ``partitions`` (``connectorPartitions``, JSON text,
        sorted) and ``offsets`` (``[partition, offset]`` text pairs Connect's reader answers, sorted)."""
        args = {
            "bootstrap": bootstrap,
            "topic": topic,
            "connectors": connectors,
            "num_partitions": num_partitions,
            "timeout_s": timeout_s,
        }
        listing: dict[str, dict[str, Any]] = self._call("connect_listing", args, timeout_s=2 * timeout_s + 45)
        return listing

    # --- ConnectorOffsetBackingStore: a connector's own offsets topic (KIP-618) -----------------------

    @staticmethod
    def _connector_store_args(
        bootstrap: str, worker_topic: str, connector: str, options: dict[str, Any]
    ) -> dict[str, Any]:
        known = {
            "connector_topic",
            "exactly_once",
            "group_id",
            "num_partitions",
            "connector_config",
            "worker_config",
            "timeout_s",
        }
        unknown = set(options) - known
        if unknown:
            raise TypeError(f"unknown connector store options {sorted(unknown)}")
        return {
            "bootstrap": bootstrap,
            "worker_topic": worker_topic,
            "connector": connector,
            "connector_topic": options.get("connector_topic"),
            "exactly_once": bool(options.get("exactly_once", False)),
            "group_id": options.get("group_id", "connect-oracle"),
            "num_partitions": options.get("num_partitions", 25),
            "connector_config": options.get("connector_config") or {},
            "extra_config": options.get("worker_config") or {},
            "timeout_s": options.get("timeout_s", 60.0),
        }

    def connector_store_read(
        self, bootstrap: str, worker_topic: str, connector: str, *, partitions: list[Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Connect's view of a source connector's offsets through a fresh ``ConnectorOffsetBackingStore``,
        built as ``Worker`` builds it for ``connector`` on a worker whose offsets topic is ``worker_topic``.

        Options: ``connector_topic`` (its ``offsets.storage.topic``), ``exactly_once``
        (``exactly.once.source.support=enabled``), ``group_id``, ``num_partitions`` (the worker's
        ``offset.storage.partitions``), ``connector_config`` (more connector settings, e.g. Connect's
        ``producer.override.*``), ``worker_config`` (more worker settings), ``timeout_s``.

        Returns ``offsets`` (Connect's GET: ``[[partition, offset], ...]``), ``stores`` (the same listing of
        the ``worker`` and ``connector`` store alone, None for a store it does not have), ``lookups`` (per
        given partition, what the combined ``get()`` answers: ``{"contains", "value"}``) and ``clients``
        (Connect's own settings: the worker and connector consumers' ``isolation.level``, the producer's
        ``transactional.id``, the connector store's topic, which stores it has).
        """
        args = self._connector_store_args(bootstrap, worker_topic, connector, options)
        args["partitions"] = partitions or []
        return dict(self._call("connector_store_read", args, timeout_s=3 * args["timeout_s"] + 45))

    def connector_store_write(
        self, bootstrap: str, worker_topic: str, connector: str, entries: list[tuple[Any, Any]], **options: Any
    ) -> dict[str, Any]:
        """Write typed (partition, offset-or-None) entries as Connect's REST alter/reset does
        (``Worker.modifySourceConnectorOffsets``): through the combined store, in task 0's transaction
        with ``exactly_once``. Options as for ``connector_store_read``."""
        args = self._connector_store_args(bootstrap, worker_topic, connector, options)
        args["entries"] = [[p, o] for p, o in entries]
        return dict(self._call("connector_store_write", args, timeout_s=3 * args["timeout_s"] + 45))

    def task_offsets_transaction(
        self,
        bootstrap: str,
        worker_topic: str,
        connector: str,
        entries: list[tuple[Any, Any]],
        *,
        outcome: str,
        task: int = 0,
        **options: Any,
    ) -> dict[str, Any]:
        """An exactly-once task's offset commit: its transactional producer writes the entries to the
        connector's offsets topic, flushes them to the broker, then ``outcome``: ``commit``, ``abort``, or
        ``hold`` (open; returns ``{"handle", "transactional_id"}`` for ``task_transaction_finish``).
        Options as for ``connector_store_read``; ``connector_config`` reaches the task's clients as
        Connect's overrides do (``producer.override.*``)."""
        args = self._connector_store_args(bootstrap, worker_topic, connector, {**options, "exactly_once": True})
        args |= {"entries": [[p, o] for p, o in entries], "outcome": outcome, "task": task}
        result = dict(self._call("task_offsets_transaction", args, timeout_s=3 * args["timeout_s"] + 45))
        if result.get("error") is not None:
            result["error"] = JavaError.from_wire(result["error"])
        return result

    def task_transaction_finish(self, handle: int, outcome: str, timeout_s: float = 30.0) -> JavaError | None:
        """Commit or abort a held task transaction: None when the broker accepted, else Java's exception
        (e.g. ``ProducerFencedException`` once a newer producer with the same transactional id started)."""
        result = self._call(
            "task_transaction_finish",
            {"handle": handle, "outcome": outcome, "timeout_s": timeout_s},
            timeout_s=2 * timeout_s + 30,
        )
        return None if result["error"] is None else JavaError.from_wire(result["error"])

    # --- FileOffsetBackingStore (standalone worker) ---------------------------------------------------

    def file_offsets_write(self, path: str, connector: str, entries: list[tuple[Any, Any]]) -> None:
        """Write through a real FileOffsetBackingStore (the whole file is rewritten, as standalone does)."""
        self._call(
            "file_offsets_write", {"path": path, "connector": connector, "entries": [[p, o] for p, o in entries]}
        )

    def file_offsets_read(self, path: str, connector: str, partitions: list[Any]) -> tuple[list[Any | None], list[Any]]:
        """Load a standalone offsets file with FileOffsetBackingStore; same result shape as offsets_read."""
        r = self._call("file_offsets_read", {"path": path, "connector": connector, "partitions": partitions})
        return list(r["offsets"]), list(r["connector_partitions"])

    # --- a real connector --------------------------------------------------------------------------

    def filestream_run(
        self,
        bootstrap: str,
        offsets_topic: str,
        connector: str,
        file: str,
        *,
        partitions: int = 25,
        expect_lines: int,
        timeout_s: float = 60,
        extra_config: dict[str, str] | None = None,
    ) -> list[str]:
        """Run FileStreamSourceConnector in Debezium's embedded engine until ``expect_lines`` lines came out.

        The engine is then closed gracefully, which commits the task's final offsets through
        KafkaOffsetBackingStore before this returns. Fewer lines before ``timeout_s`` raises, listing
        what was emitted.
        """
        args = {
            "bootstrap": bootstrap,
            "offsets_topic": offsets_topic,
            "connector": connector,
            "file": file,
            "num_partitions": partitions,
            "expect_lines": expect_lines,
            "timeout_s": timeout_s,
            "extra_config": extra_config or {},
        }
        r = self._call("filestream_run", args, timeout_s=timeout_s + 90)
        return list(r["lines"])

    # --- Connect's config and status topics (KafkaConfigBackingStore / KafkaStatusBackingStore) ----------

    def connect_cluster_write(
        self,
        bootstrap: str,
        config_topic: str,
        steps: list[dict[str, Any]],
        *,
        status_topic: str | None = None,
        extra_config: dict[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> dict[str, Any]:
        """Write config/status records with Apache Kafka's own stores, step by step (see the server op).

        The stores create missing topics as a worker does (config: 1 partition, compacted). Returns
        Java's view afterwards per named connector: ``contains``, ``target_state``, ``task_count``,
        ``config`` and ``status`` (``{"state","trace","worker_id","generation"}`` or None).
        """
        args = {
            "bootstrap": bootstrap,
            "config_topic": config_topic,
            "status_topic": status_topic,
            "steps": steps,
            "extra_config": extra_config or {},
            "timeout_s": timeout_s,
        }
        return dict(self._call("connect_cluster_write", args, timeout_s=3 * timeout_s + 45))

    def connect_cluster_read(
        self,
        bootstrap: str,
        config_topic: str,
        connectors: list[str],
        *,
        status_topic: str | None = None,
        extra_config: dict[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> dict[str, Any]:
        """Fresh stores read the topics to their end; Java's view of ``connectors`` (shape as above)."""
        args = {
            "bootstrap": bootstrap,
            "config_topic": config_topic,
            "status_topic": status_topic,
            "connectors": connectors,
            "extra_config": extra_config or {},
            "timeout_s": timeout_s,
        }
        return dict(self._call("connect_cluster_read", args, timeout_s=3 * timeout_s + 45))

    # --- sink connectors -------------------------------------------------------------------------------

    def sink_parse_offsets(self, bodies: list[str]) -> list[list[list[Any]] | JavaError]:
        """Each PATCH body parsed as Connect does (Jackson, ``toMap``, ``SinkUtils.parseSinkConnectorOffsets``):
        sorted ``[topic, partition, offset-or-None]`` rows, or the exception as data."""
        return [
            JavaError.from_wire(r["error"]) if "error" in r else list(r["parsed"])
            for r in self._call("sink_parse_offsets", {"bodies": bodies})
        ]

    def properties_load(self, files: list[bytes]) -> list[dict[str, str] | JavaError]:
        """Each file's bytes read by ``java.util.Properties.load(InputStream)`` (Connect's
        credentials file): its entries, or the exception as data."""
        answers = self._call("properties_load", {"files": [base64.b64encode(f).decode("ascii") for f in files]})
        return [JavaError.from_wire(r["error"]) if "error" in r else dict(map(tuple, r["entries"])) for r in answers]

    def sink_offsets_shape(self, offsets: list[tuple[str, int, int]]) -> str:
        """The JSON Connect's GET answers for these committed group offsets (Jackson over ``ConnectorOffsets``)."""
        return str(self._call("sink_offsets_shape", {"offsets": [list(o) for o in offsets]}))

    def admin_group_offsets(self, bootstrap: str, group: str, action: str, **args: Any) -> dict[str, Any]:
        """Java's ``Admin`` on a consumer group (``list``, ``alter``, ``delete_offsets``, ``delete_group``);
        a failure is returned as ``{"error": JavaError}``, not raised: it is Java's answer."""
        r = dict(self._call("admin_group_offsets", {"bootstrap": bootstrap, "group": group, "action": action, **args}))
        if "error" in r:
            r["error"] = JavaError.from_wire(r["error"])
        return r
