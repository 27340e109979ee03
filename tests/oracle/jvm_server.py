"""The JVM side of the oracle: a subprocess that runs Apache Kafka's own classes through JPype.

Run by ``tests.oracle.client.JavaOracle`` as ``python jvm_server.py --jvm <libjvm.so> --classpath <cp>``.
It speaks JSON lines: one request per stdin line, one response per line on the *original* stdout.
Everything else that would print to fd 1 (``System.out``, ``-verbose`` output, log4j console appenders)
is re-pointed at stderr before the JVM starts, so nothing the JVM does can corrupt the protocol.

Why a subprocess at all: JPype loads the JVM into the calling process and a JVM can never be
restarted there, so the test process must never host it (a hung ``KafkaBasedLog.stop()`` or a JVM
crash would take pytest down with it).

Why the Connect-store operations do not get their own short-lived process: a JVM here starts in about
0.3 s, but the first Kafka client costs ~2 s of class loading, paid once in a long-lived process. The
one known hazard, ``KafkaBasedLog.stop()`` hanging against Tansu, is contained instead: every stop
and every broker-facing step runs on its own thread with a deadline; when one is overrun, the Java
thread stacks go to stderr and the response carries ``"recycle": true``, and the client kills this
process and starts a clean one before the next request.

Self-contained on purpose (no imports from the test package): it runs under its own interpreter.
"""

# mypy: disable-error-code="untyped-decorator"
# (JPype ships no type hints: its @JImplements/@JOverride decorators are untyped by necessity.)
from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import math
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

# --- protocol plumbing ---------------------------------------------------------------------------

PROTO: Any = None  # text stream on the original stdout
STATE = {"recycle": False}  # set once a Java thread is stuck: answer, then exit so the client restarts us


def _claim_stdout() -> Any:
    """Keep the original stdout for the protocol, and send everything else written to fd 1 to stderr."""
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(proto_fd, "w", encoding="utf-8", buffering=1)


def _send(msg: dict[str, Any]) -> None:
    PROTO.write(json.dumps(msg, ensure_ascii=True, allow_nan=False) + "\n")
    PROTO.flush()


def _log(msg: str) -> None:
    sys.stderr.write(f"[jvm_server {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


class Recycle(Exception):
    """A bounded Java call overran its deadline; this JVM holds a stuck thread and must be replaced."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        STATE["recycle"] = True


class RequestError(Exception):
    """The request itself is malformed (bad typed value, unknown op)."""


def run_bounded(fn: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Run ``fn`` on its own thread; past ``timeout_s`` dump Java stacks and mark this JVM for recycling."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=target, name=f"bounded:{what}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        _log(f"TIMEOUT: {what} did not finish within {timeout_s}s; Java thread dump follows")
        _dump_java_threads()
        raise Recycle(f"{what} did not finish within {timeout_s}s (JVM marked for recycling)")
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _dump_java_threads() -> None:
    try:
        import jpype

        Thread = jpype.JClass("java.lang.Thread")
        for th, stack in Thread.getAllStackTraces().entrySet():
            sys.stderr.write(f'"{th.getName()}" state={th.getState()}\n')
            for frame in stack:
                sys.stderr.write(f"    at {frame}\n")
        sys.stderr.flush()
    except Exception as e:  # the dump is a diagnostic; never let it mask the timeout
        _log(f"thread dump failed: {e!r}")


# --- Java bridge ---------------------------------------------------------------------------------


class Bridge:
    """Typed JSON <-> Java objects, and the Kafka classes the operations use."""

    def __init__(self) -> None:
        import jpype

        self.jpype = jpype
        J = jpype.JClass
        self.JString = J("java.lang.String")
        self.Integer, self.Long = J("java.lang.Integer"), J("java.lang.Long")
        self.Short, self.Byte = J("java.lang.Short"), J("java.lang.Byte")
        self.Double, self.Float = J("java.lang.Double"), J("java.lang.Float")
        self.Boolean = J("java.lang.Boolean")
        self.ArrayList, self.HashMap = J("java.util.ArrayList"), J("java.util.HashMap")
        self.LinkedHashMap, self.TreeMap = J("java.util.LinkedHashMap"), J("java.util.TreeMap")
        self.Map, self.List = J("java.util.Map"), J("java.util.List")
        self.ByteBuffer = J("java.nio.ByteBuffer")
        self.JsonConverter = J("org.apache.kafka.connect.json.JsonConverter")
        self.Utils = J("org.apache.kafka.common.utils.Utils")
        self.BuiltInPartitioner = J("org.apache.kafka.clients.producer.internals.BuiltInPartitioner")
        self.Throwable = J("java.lang.Throwable")

    # Java -> typed JSON
    def to_typed(self, o: Any) -> Any:
        if o is None:
            return None
        cls = str(o.getClass().getName())
        if cls == "java.lang.String":
            return self.py_str(o)
        if cls == "java.lang.Boolean":
            return bool(o.booleanValue())
        if cls == "java.lang.Integer":
            return {"int": int(o.intValue())}
        if cls == "java.lang.Long":
            return {"long": str(int(o.longValue()))}
        if cls == "java.lang.Short":
            return {"short": int(o.shortValue())}
        if cls == "java.lang.Byte":
            return {"byte": int(o.byteValue())}
        if cls == "java.lang.Double":
            return {"double": _float_text(float(o.doubleValue()))}
        if cls == "java.lang.Float":
            return {"float": _float_text(float(o.doubleValue()))}
        if cls == "[B":
            return {"bytes": base64.b64encode(bytes(o)).decode("ascii")}
        if cls == "java.math.BigDecimal":
            return {"decimal": str(o.toString())}
        if cls == "java.math.BigInteger":
            return {"bigint": str(o.toString())}
        if isinstance(o, self.ByteBuffer):
            dup = o.duplicate()
            arr = self.jpype.JArray(self.jpype.JByte)(int(dup.remaining()))
            dup.get(arr)
            return {"bytebuffer": base64.b64encode(bytes(arr)).decode("ascii")}
        if isinstance(o, self.Map):
            impl = {
                "java.util.HashMap": "hash",
                "java.util.LinkedHashMap": "linked",
                "java.util.TreeMap": "tree",
            }.get(cls, "immutable" if cls.startswith("java.util.ImmutableCollections$Map") else cls)
            return {
                "map": [[self.to_typed(e.getKey()), self.to_typed(e.getValue())] for e in o.entrySet()],
                "impl": impl,
            }
        if isinstance(o, self.List):
            return {"list": [self.to_typed(v) for v in o]}
        return {"java": cls, "str": self.py_str(o.toString())}

    # typed JSON -> Java
    def to_java(self, t: Any) -> Any:
        jp = self.jpype
        if t is None:
            return None
        if isinstance(t, bool):
            return self.Boolean.valueOf(t)
        if isinstance(t, str):
            return self.java_str(t)
        if not isinstance(t, dict):
            raise RequestError(f"not a typed value: {t!r} (numbers, lists and maps must be tagged)")
        if "int" in t:
            return self.Integer.valueOf(jp.JInt(_int_in(t["int"], 32)))
        if "long" in t:
            return self.Long.valueOf(jp.JLong(_int_in(t["long"], 64)))
        if "short" in t:
            return self.Short.valueOf(jp.JShort(_int_in(t["short"], 16)))
        if "byte" in t:
            return self.Byte.valueOf(jp.JByte(_int_in(t["byte"], 8)))
        if "double" in t:
            return self.Double.valueOf(jp.JDouble(_parse_float(t["double"])))
        if "float" in t:
            return self.Float.valueOf(jp.JFloat(_parse_float(t["float"])))
        if "bytes" in t:
            return jp.JArray(jp.JByte)(base64.b64decode(t["bytes"], validate=True))
        if "bytebuffer" in t:
            raw = jp.JArray(jp.JByte)(base64.b64decode(t["bytebuffer"], validate=True))
            return self.ByteBuffer.wrap(raw)
        if "list" in t:
            out = self.ArrayList()
            for v in t["list"]:
                out.add(self.to_java(v))
            return out
        if "map" in t:
            return self._map(t["map"], t.get("impl", "linked"))
        raise RequestError(f"unknown typed value {t!r}")

    def _map(self, entries: list[Any], impl: str) -> Any:
        pairs = [(self.to_java(k), self.to_java(v)) for k, v in entries]
        if impl in ("linked", "hash_copy", "map_of"):
            m = self.LinkedHashMap()
        elif impl == "hash":
            m = self.HashMap()
        elif impl == "tree":
            m = self.TreeMap()
        else:
            raise RequestError(f"unknown map impl {impl!r}")
        for k, v in pairs:
            m.put(k, v)
        if impl == "hash_copy":
            return self.HashMap(m)  # presized copy: the JDK 19 ordering change lives here
        if impl == "map_of":
            return self.Map.copyOf(m)  # ImmutableCollections.MapN: per-JVM-start randomized order
        return m

    def java_str(self, s: str) -> Any:
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: Java can hold them, JPype's UTF-8 path cannot
            units = s.encode("utf-16-le", "surrogatepass")
            codes = [int.from_bytes(units[i : i + 2], "little") for i in range(0, len(units), 2)]
            return self.JString(self.jpype.JArray(self.jpype.JChar)(codes))
        return self.JString(s)

    def py_str(self, j: Any) -> str:
        # Via UTF-16 code units so lone surrogates survive (str(j) fails on them).
        return bytes(memoryview(j.toCharArray())).decode("utf-16-le", "surrogatepass")

    def error(self, e: BaseException) -> dict[str, Any]:
        if isinstance(e, self.Throwable):
            try:
                return self._java_error(e, 0)
            except UnicodeDecodeError:
                # JPype cannot wrap a Throwable whose message holds a lone surrogate (it decodes the
                # JNI string as strict UTF-8), so getCause() fails; read the chain from the printed trace.
                return self._parse_printed_chain(e)
        if isinstance(e, UnicodeDecodeError):
            # The same JPype limit hit the thrown exception itself: Java's answer is lost, say so.
            return {
                "java_class": "python:UnicodeDecodeError",
                "message": f"JPype could not convert the Java exception (lone surrogate in its message?): {e}",
            }
        return {"java_class": f"python:{type(e).__name__}", "message": str(e)}

    def _parse_printed_chain(self, t: Any) -> dict[str, Any]:
        J = self.jpype.JClass
        sw = J("java.io.StringWriter")()
        pw = J("java.io.PrintWriter")(sw)
        t.printStackTrace(pw)
        pw.flush()
        blocks: list[list[str]] = [[]]
        in_frames = False
        for line in self.py_str(sw.toString()).split("\n"):
            if line.startswith("Caused by: "):
                blocks.append([line[len("Caused by: ") :]])
                in_frames = False
            elif line.startswith("\t"):  # "\tat ...", "\t... n more", "\tSuppressed: ..."
                in_frames = True
            elif not in_frames:
                blocks[-1].append(line)  # messages may span lines
        out: dict[str, Any] | None = None
        for block in reversed(blocks):
            text = "\n".join(block).rstrip("\r")
            cls, sep, msg = text.partition(": ")
            node: dict[str, Any] = {"java_class": cls, "message": msg if sep else None}
            if out is not None:
                node["cause"] = out
            out = node
        assert out is not None
        return out

    def _java_error(self, t: Any, depth: int) -> dict[str, Any]:
        msg = t.getMessage()
        out: dict[str, Any] = {
            "java_class": str(t.getClass().getName()),
            "message": None if msg is None else self.py_str(msg),
        }
        cause = t.getCause()
        if cause is not None and depth < 10 and not cause.equals(t):
            out["cause"] = self._java_error(cause, depth + 1)
        return out

    def converter(self, is_key: bool) -> Any:
        """What ``Plugins.newInternalConverter`` builds for Connect's internal topics."""
        c = self.JsonConverter()
        c.configure(self.Map.of("schemas.enable", "false"), is_key)
        return c

    def props(self, d: dict[str, str], cls: str = "java.util.HashMap") -> Any:
        m = self.jpype.JClass(cls)()
        for k, v in d.items():
            if cls == "java.util.Properties":
                m.setProperty(k, v)
            else:
                m.put(k, v)
        return m


def _int_in(v: Any, bits: int) -> int:
    n = int(v) if isinstance(v, str) else v
    if not isinstance(n, int) or isinstance(n, bool) or not -(2 ** (bits - 1)) <= n < 2 ** (bits - 1):
        raise RequestError(f"{v!r} is not a {bits}-bit Java integer")
    return n


def _parse_float(s: Any) -> float:
    if isinstance(s, int | float) and not isinstance(s, bool):
        return float(s)
    if not isinstance(s, str):
        raise RequestError(f"bad floating-point payload {s!r}")
    special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    if s in special:
        return special[s]
    return float.fromhex(s) if "0x" in s.lower() else float(s)


def _float_text(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x.hex()


# --- operations ----------------------------------------------------------------------------------


class Ops:
    def __init__(self, bridge: Bridge) -> None:
        self.b = bridge
        self.jp = bridge.jpype
        self.enc = bridge.JsonConverter()
        self.enc.configure(bridge.Map.of("schemas.enable", "false"), False)
        self.held: dict[int, dict[str, Any]] = {}  # open task transactions (task_offsets_transaction, hold)

    def ping(self, a: dict[str, Any]) -> Any:
        return {}

    def debug_sleep(self, a: dict[str, Any]) -> Any:
        """A Java call that overruns (``Thread.sleep``): how the self-check proves deadlines work."""
        Thread = self.jp.JClass("java.lang.Thread")
        run_bounded(lambda: Thread.sleep(int(float(a["seconds"]) * 1000)), float(a["bound_s"]), "debug_sleep")
        return {}

    def debug_exit(self, a: dict[str, Any]) -> Any:
        """Die without answering, like a JVM crash."""
        _log("debug_exit: exiting without an answer")
        os._exit(int(a.get("code", 3)))

    # JsonConverter(schemas.enable=false, isKey=false), exactly as Connect's internal converters
    def json_encode(self, a: dict[str, Any]) -> Any:
        out: list[Any] = []
        for t in a["values"]:
            value = self.b.to_java(t)
            try:
                raw = self.enc.fromConnectData(a.get("topic", "t"), None, value)
            except (self.jp.JException, UnicodeDecodeError) as e:  # see Bridge.error
                out.append({"error": self.b.error(e)})
                continue
            out.append(None if raw is None else {"b64": base64.b64encode(bytes(raw)).decode("ascii")})
        return out

    def json_reencode(self, a: dict[str, Any]) -> Any:
        """The bytes Connect writes back for what it read: ``fromConnectData(toConnectData(raw))``, the
        key its GET looks up for a partition read from ``raw`` (no Python value in between)."""
        out: list[Any] = []
        for r in a["raws"]:
            topic = a.get("topic", "t")
            try:
                value = self.enc.toConnectData(topic, self.jp.JArray(self.jp.JByte)(base64.b64decode(r))).value()
                raw = self.enc.fromConnectData(topic, None, value)
            except (self.jp.JException, UnicodeDecodeError) as e:  # see Bridge.error
                out.append({"error": self.b.error(e)})
                continue
            out.append({"b64": base64.b64encode(bytes(raw)).decode("ascii")})
        return out

    def json_decode(self, a: dict[str, Any]) -> Any:
        out: list[Any] = []
        for r in a["raws"]:
            raw = None if r is None else self.jp.JArray(self.jp.JByte)(base64.b64decode(r))
            try:
                sv = self.enc.toConnectData(a.get("topic", "t"), raw)
            except (self.jp.JException, UnicodeDecodeError) as e:  # see Bridge.error
                out.append({"error": self.b.error(e)})
                continue
            schema = sv.schema()
            out.append(
                {
                    "value": self.b.to_typed(sv.value()),
                    "schema": None if schema is None else str(schema.type().toString()),
                }
            )
        return out

    def offset_check(self, a: dict[str, Any]) -> Any:
        """What ``OffsetStorageReaderImpl`` does with each value: ``JsonConverter.toConnectData`` then
        ``OffsetUtils.validateFormat``. Answers whether a task would get the offset and, instead of the
        value itself (a 20,000,000-character string or a 1,000-deep array would make the reply huge
        or deeply nested), a digest: per map entry the key's and value's Java class, length (UTF-16
        units for strings) and SHA-256 (of the UTF-8 text; ``toString()`` for other values)."""
        validate = self.jp.JClass("org.apache.kafka.connect.storage.OffsetUtils").validateFormat
        out: list[Any] = []
        for r in a["raws"]:
            raw = None if r is None else self.jp.JArray(self.jp.JByte)(base64.b64decode(r))
            try:
                value = self.enc.toConnectData(a.get("topic", "t"), raw).value()
            except (self.jp.JException, UnicodeDecodeError) as e:  # see Bridge.error
                out.append({"readable": False, "stage": "converter", "error": self.b.error(e)})
                continue
            try:
                validate(self.jp.JObject(value, "java.lang.Object"))
            except self.jp.JException as e:
                out.append({"readable": False, "stage": "validateFormat", "error": self.b.error(e)})
                continue
            entries = None
            if value is not None:
                entries = [[self._digest(e.getKey()), self._digest(e.getValue())] for e in value.entrySet()]
            out.append({"readable": True, "entries": entries})
        return out

    def _digest(self, o: Any) -> Any:
        if o is None:
            return None
        text = self.b.py_str(o.toString())
        return {
            "class": str(o.getClass().getName()),
            "length": int(o.length()) if str(o.getClass().getName()) == "java.lang.String" else None,
            "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        }

    def murmur2(self, a: dict[str, Any]) -> Any:
        return [int(self.b.Utils.murmur2(self._bytes(k))) for k in a["keys"]]

    def partition(self, a: dict[str, Any]) -> Any:
        n = int(a["num_partitions"])
        return [int(self.b.BuiltInPartitioner.partitionForKey(self._bytes(k), n)) for k in a["keys"]]

    def _bytes(self, b64: str) -> Any:
        return self.jp.JArray(self.jp.JByte)(base64.b64decode(b64))

    # --- KafkaOffsetBackingStore, configured the way ConnectDistributed does -----------------
    def _distributed_config(self, a: dict[str, Any]) -> Any:
        """The ``DistributedConfig`` of a worker whose offsets topic is ``a["topic"]``."""
        props = {
            "bootstrap.servers": a["bootstrap"],
            "group.id": a.get("group_id", "connect-oracle"),
            "offset.storage.topic": a["topic"],
            "offset.storage.partitions": str(a.get("num_partitions", 25)),
            "offset.storage.replication.factor": "1",
            "config.storage.topic": "connect-oracle-configs",
            "status.storage.topic": "connect-oracle-status",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            **a.get("extra_config", {}),
        }
        return self.jp.JClass("org.apache.kafka.connect.runtime.distributed.DistributedConfig")(self.b.props(props))

    def _distributed_store(self, a: dict[str, Any]) -> tuple[Any, list[Callable[[], Any]]]:
        J = self.jp.JClass
        config = self._distributed_config(a)
        client_id_base = J("org.apache.kafka.connect.util.ConnectUtils").clientIdBase(config)
        admin_props = self.b.HashMap(config.originals())
        admin_props.put("client.id", client_id_base + "shared-admin")
        admin = J("org.apache.kafka.connect.util.SharedTopicAdmin")(admin_props)

        @self.jp.JImplements("java.util.function.Supplier")
        class ClientIdBase:
            @self.jp.JOverride
            def get(self) -> Any:
                return client_id_base

        store = J("org.apache.kafka.connect.storage.KafkaOffsetBackingStore")(
            admin, ClientIdBase(), self.b.converter(True)
        )
        store.configure(config)
        return store, [store.stop, admin.close]

    def _file_store(self, a: dict[str, Any]) -> tuple[Any, list[Callable[[], Any]]]:
        J = self.jp.JClass
        props = {
            "offset.storage.file.filename": a["path"],
            "bootstrap.servers": "127.0.0.1:1",  # never contacted by FileOffsetBackingStore
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        }
        config = J("org.apache.kafka.connect.runtime.standalone.StandaloneConfig")(self.b.props(props))
        store = J("org.apache.kafka.connect.storage.FileOffsetBackingStore")(self.b.converter(True))
        store.configure(config)
        return store, [store.stop]

    def _with_store(self, a: dict[str, Any], kind: str, body: Callable[[Any], Any]) -> Any:
        deadline = float(a.get("timeout_s", 60))
        factory = self._distributed_store if kind == "kafka" else self._file_store
        # configure() already talks to the broker (WorkerConfig.kafkaClusterId), so it is bounded too.
        store, stoppers = run_bounded(lambda: factory(a), deadline, "offset store configure()")
        t0 = time.monotonic()
        try:
            run_bounded(store.start, deadline, f"{type(store).__name__}.start()")
            _log(f"store start took {time.monotonic() - t0:.2f}s")
            return body(store)
        finally:
            # A hung stop must not turn an answered request into a failure: it only costs this JVM.
            # Once a thread is stuck (e.g. start() never finished) this JVM is discarded anyway.
            for stop in [] if STATE["recycle"] else stoppers:
                try:
                    t1 = time.monotonic()
                    run_bounded(stop, 15, f"{getattr(stop, '__name__', 'stop')}()")
                    _log(f"{getattr(stop, '__name__', 'stop')} took {time.monotonic() - t1:.2f}s")
                except Recycle as e:
                    _log(str(e))
                except Exception as e:
                    _log(f"stop failed: {e!r}")

    def _write(self, a: dict[str, Any], store: Any) -> Any:
        J = self.jp.JClass
        writer = J("org.apache.kafka.connect.storage.OffsetStorageWriter")(
            store, a["connector"], self.b.converter(True), self.b.converter(False)
        )
        for partition, offset in a["entries"]:
            writer.offset(self.b.to_java(partition), self.b.to_java(offset))
        if not writer.beginFlush():
            return {"flushed": False}
        done = threading.Event()
        box: dict[str, Any] = {}

        @self.jp.JImplements("org.apache.kafka.connect.util.Callback")
        class FlushDone:
            @self.jp.JOverride
            def onCompletion(self, error: Any, result: Any) -> None:
                box["error"] = error
                done.set()

        writer.doFlush(FlushDone())
        if not done.wait(float(a.get("timeout_s", 60))):
            raise Recycle("OffsetStorageWriter.doFlush callback did not arrive in time")
        if box["error"] is not None:
            raise box["error"]
        return {"flushed": True}

    def _read(self, a: dict[str, Any], store: Any) -> Any:
        J = self.jp.JClass
        reader = J("org.apache.kafka.connect.storage.OffsetStorageReaderImpl")(
            store, a["connector"], self.b.converter(True), self.b.converter(False)
        )
        # One offset() call per partition, as a task asks: offsets(list) keys its answer by Map.equals,
        # so one request holding the same map in two key orders would collapse both into one answer.
        offsets = []
        for p in a["partitions"]:
            partition = self.b.to_java(p)
            found = run_bounded(
                functools.partial(reader.offset, partition),
                float(a.get("timeout_s", 60)),
                "OffsetStorageReader.offset()",
            )
            offsets.append(self.b.to_typed(found))
        partitions = [self.b.to_typed(p) for p in store.connectorPartitions(a["connector"])]
        reader.close()
        return {"offsets": offsets, "connector_partitions": partitions}

    def offsets_write(self, a: dict[str, Any]) -> Any:
        return self._with_store(a, "kafka", lambda s: self._write(a, s))

    def connect_listing(self, a: dict[str, Any]) -> Any:
        """What Connect's GET ``/connectors/{c}/offsets`` answers for each of ``connectors``, as JSON
        text written by the converter: ``Worker.sourceConnectorOffsets`` asks
        ``OffsetStorageReaderImpl.offsets`` for the store's ``connectorPartitions(c)`` and lists each
        entry it answers. Text, not typed values: a partition may nest 1,000 levels, and its typed
        form twice that, deeper than the test process's ``json`` reads a line back."""
        return self._with_store(a, "kafka", lambda s: self._connect_listing(a, s))

    def _connect_listing(self, a: dict[str, Any], store: Any) -> Any:
        out: dict[str, Any] = {}
        for connector in a["connectors"]:
            partitions, answered = self._answered(store, connector, float(a.get("timeout_s", 60)))
            out[connector] = {
                "partitions": sorted(self._text(p) for p in partitions),
                "offsets": sorted([self._text(e.getKey()), self._text(e.getValue())] for e in answered),
            }
        return out

    def _text(self, value: Any) -> str | None:
        written = self.enc.fromConnectData("listing", None, value)
        return None if written is None else bytes(written).decode("utf-8", "surrogatepass")

    def offsets_read(self, a: dict[str, Any]) -> Any:
        return self._with_store(a, "kafka", lambda s: self._read(a, s))

    def file_offsets_write(self, a: dict[str, Any]) -> Any:
        return self._with_store(a, "file", lambda s: self._write(a, s))

    def file_offsets_read(self, a: dict[str, Any]) -> Any:
        return self._with_store(a, "file", lambda s: self._read(a, s))

    # --- ConnectorOffsetBackingStore: a connector's own offsets topic over the worker's (KIP-618) --------
    # Built exactly as Worker builds them: offsetStoreForRegularSourceConnector when exactly-once source
    # support is off, offsetStoreForExactlyOnceSourceConnector when it is on; the connector store's clients
    # come from Worker's own (package-private) config builders, called by reflection, so that their settings
    # (isolation.level, transactional.id) are Connect's, not ours.
    def _worker_static(self, name: str, *args: Any) -> Any:
        for method in self.jp.JClass("org.apache.kafka.connect.runtime.Worker").class_.getDeclaredMethods():
            if str(method.getName()) == name and len(method.getParameterTypes()) == len(args):
                method.setAccessible(True)
                return method.invoke(None, *args)
        raise RequestError(f"Worker has no static method {name} with {len(args)} parameters")

    def _eos_worker_args(self, a: dict[str, Any]) -> dict[str, Any]:
        """The worker store's arguments (``_distributed_store``) for the worker topic of ``a``."""
        extra = dict(a.get("extra_config", {}))
        if a.get("exactly_once"):
            extra["exactly.once.source.support"] = "enabled"
        return {**a, "topic": a["worker_topic"], "extra_config": extra}

    def _connector_clients(self, a: dict[str, Any], config: Any, task: int = 0) -> tuple[Any, Any]:
        """Connect's consumer and producer configs for the connector's offsets store (Worker's builders)."""
        J = self.jp.JClass
        name = a["connector"]
        props = {"name": name, "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector"}
        if a.get("connector_topic"):
            props["offsets.storage.topic"] = a["connector_topic"]
        props.update(a.get("connector_config", {}))
        source = J("org.apache.kafka.connect.runtime.SourceConnectorConfig")(None, self.b.props(props), False)
        policy = J("org.apache.kafka.connect.connector.policy.AllConnectorClientConfigOverridePolicy")()
        cls = J("org.apache.kafka.connect.file.FileStreamSourceConnector").class_
        if a.get("exactly_once"):
            consumer = self._worker_static(
                "exactlyOnceSourceOffsetsConsumerConfigs",
                name,
                f"connector-consumer-{name}",
                config,
                source,
                cls,
                policy,
                "oracle-cluster",
            )
            task_id = J("org.apache.kafka.connect.util.ConnectorTaskId")(name, self.jp.JInt(task))
            producer = self._worker_static(
                "exactlyOnceSourceTaskProducerConfigs", task_id, config, source, cls, policy, "oracle-cluster"
            )
        else:
            consumer = self._worker_static(
                "regularSourceOffsetsConsumerConfigs",
                name,
                f"connector-consumer-{name}",
                config,
                source,
                cls,
                policy,
                "oracle-cluster",
            )
            producer = self._worker_static(
                "baseProducerConfigs",
                name,
                f"connector-offset-producer-{name}",
                config,
                source,
                cls,
                policy,
                "oracle-cluster",
            )
        return consumer, producer

    def _logging_context(self, name: str) -> Any:
        jp = self.jp
        LoggingContext = jp.JClass("org.apache.kafka.connect.util.LoggingContext")

        @jp.JImplements("java.util.function.Supplier")
        class ForConnector:
            @jp.JOverride
            def get(self) -> Any:
                return LoggingContext.forConnector(name)

        return ForConnector()

    def _connector_offset_store(self, a: dict[str, Any], writable: bool) -> dict[str, Any]:
        """``Worker.offsetStoreFor(Regular|ExactlyOnce)SourceConnector``: the combined store, its parts and
        Connect's client settings. Configured, not started."""
        J = self.jp.JClass
        worker_args = self._eos_worker_args(a)
        worker_store, stoppers = self._distributed_store(worker_args)
        config = self._distributed_config(worker_args)
        consumer_props, producer_props = self._connector_clients(a, config)
        eos = bool(a.get("exactly_once"))
        topic = a.get("connector_topic") or (a["worker_topic"] if eos else None)
        COBS = J("org.apache.kafka.connect.storage.ConnectorOffsetBackingStore")
        context = self._logging_context(a["connector"])
        producer = J("org.apache.kafka.clients.producer.KafkaProducer")(producer_props) if writable else None
        connector_store = None
        if topic is None:
            store = COBS.withOnlyWorkerStore(context, worker_store, a["worker_topic"])
        else:
            consumer = J("org.apache.kafka.clients.consumer.KafkaConsumer")(consumer_props)
            admin = J("org.apache.kafka.connect.util.TopicAdmin")(self.b.props({"bootstrap.servers": a["bootstrap"]}))
            KOBS = J("org.apache.kafka.connect.storage.KafkaOffsetBackingStore")
            connector_store = (
                KOBS.readWriteStore(topic, producer, consumer, admin, self.b.converter(True))
                if writable
                else KOBS.readOnlyStore(topic, consumer, admin, self.b.converter(True))
            )
            if topic == a["worker_topic"]:  # Worker.sameOffsetTopicAsWorker: same name, same bootstrap here
                store = COBS.withOnlyConnectorStore(context, connector_store, topic, admin)
            else:
                store = COBS.withConnectorAndWorkerStores(context, worker_store, connector_store, topic, admin)
        store.configure(config)
        stoppers = [store.stop, *stoppers]
        if producer is not None:
            stoppers.append(producer.close)
        clients = {
            "worker_consumer_isolation": self._log_consumer_setting(worker_store, "isolation.level"),
            "connector_consumer_isolation": None if topic is None else str(consumer_props.get("isolation.level")),
            "producer_transactional_id": None
            if producer_props.get("transactional.id") is None
            else str(producer_props.get("transactional.id")),
            "connector_topic": topic,
            "has_worker_store": bool(store.hasWorkerGlobalStore()),
            "has_connector_store": bool(store.hasConnectorSpecificStore()),
        }
        return {
            "store": store,
            "worker_store": worker_store,
            "connector_store": connector_store,
            "producer": producer,
            "stoppers": stoppers,
            "clients": clients,
            "exactly_once": eos,
        }

    def _log_consumer_setting(self, kafka_store: Any, key: str) -> str | None:
        """A setting of the consumer a configured ``KafkaOffsetBackingStore``'s log will create."""
        store_field = kafka_store.getClass().getDeclaredField("offsetLog")
        store_field.setAccessible(True)
        offset_log = store_field.get(kafka_store)
        log_field = offset_log.getClass().getDeclaredField("consumerConfigs")
        log_field.setAccessible(True)
        value = log_field.get(offset_log).get(key)
        return None if value is None else str(value)

    def _with_connector_store(self, a: dict[str, Any], writable: bool, body: Callable[[dict[str, Any]], Any]) -> Any:
        deadline = float(a.get("timeout_s", 60))
        held = run_bounded(lambda: self._connector_offset_store(a, writable), deadline, "connector store configure()")
        try:
            # The worker store is started by the worker; the combined store starts the connector's own.
            run_bounded(held["worker_store"].start, deadline, "worker KafkaOffsetBackingStore.start()")
            run_bounded(held["store"].start, deadline, "ConnectorOffsetBackingStore.start()")
            return body(held)
        finally:
            for stop in [] if STATE["recycle"] else held["stoppers"]:
                try:
                    run_bounded(stop, 15, f"{getattr(stop, '__name__', 'stop')}()")
                except Recycle as e:
                    _log(str(e))
                except Exception as e:
                    _log(f"stop failed: {e!r}")

    def _answered(self, store: Any, name: str, timeout_s: float) -> tuple[Any, list[Any]]:
        """Connect's GET over ``store`` (``Worker.sourceConnectorOffsets``): ``connectorPartitions``, and
        the entries ``OffsetStorageReaderImpl.offsets`` answers for them."""
        J = self.jp.JClass
        reader = J("org.apache.kafka.connect.storage.OffsetStorageReaderImpl")(
            store, name, self.b.converter(True), self.b.converter(False)
        )
        partitions = store.connectorPartitions(name)
        found = run_bounded(functools.partial(reader.offsets, partitions), timeout_s, "OffsetStorageReader.offsets()")
        return partitions, list(found.entrySet())

    def _listing(self, store: Any, name: str, timeout_s: float) -> list[Any]:
        """``_answered``'s entries as ``[[partition, offset], ...]``, typed."""
        _, answered = self._answered(store, name, timeout_s)
        return [[self.b.to_typed(e.getKey()), self.b.to_typed(e.getValue())] for e in answered]

    def connector_store_read(self, a: dict[str, Any]) -> Any:
        """Connect's GET over the connector's combined store, each store alone, and the raw ``get()`` of
        the combined store for ``partitions`` (one lookup per partition, as a task asks)."""
        timeout_s = float(a.get("timeout_s", 60))

        def body(held: dict[str, Any]) -> Any:
            J = self.jp.JClass
            name = a["connector"]
            stores = {
                label: None if held[key] is None else self._listing(held[key], name, timeout_s)
                for label, key in (("worker", "worker_store"), ("connector", "connector_store"))
            }
            lookups = []
            for p in a.get("partitions", []):
                key = self.b.converter(True).fromConnectData(
                    name, None, J("java.util.Arrays").asList(name, self.b.to_java(p))
                )
                keys = J("java.util.Collections").singletonList(self.b.ByteBuffer.wrap(key))
                got = run_bounded(
                    functools.partial(
                        held["store"].get(keys).get, self.jp.JLong(int(timeout_s * 1000)), self._millis()
                    ),
                    timeout_s + 5,
                    "ConnectorOffsetBackingStore.get()",
                )
                contains = bool(got.containsKey(keys.get(0)))
                raw = got.get(keys.get(0))
                lookups.append({"contains": contains, "value": None if raw is None else self.b.to_typed(raw)})
            return {
                "offsets": self._listing(held["store"], name, timeout_s),
                "stores": stores,
                "lookups": lookups,
                "clients": held["clients"],
            }

        return self._with_connector_store(a, False, body)

    def connector_store_write(self, a: dict[str, Any]) -> Any:
        """``Worker.modifySourceConnectorOffsets``: a fresh combined store with its own producer (task 0's
        transactional one with exactly-once source support), every entry through ``OffsetStorageWriter``,
        inside a transaction when exactly-once."""
        timeout_s = float(a.get("timeout_s", 60))

        def body(held: dict[str, Any]) -> Any:
            J = self.jp.JClass
            writer = J("org.apache.kafka.connect.storage.OffsetStorageWriter")(
                held["store"], a["connector"], self.b.converter(True), self.b.converter(False)
            )
            for partition, offset in a["entries"]:
                writer.offset(self.b.to_java(partition), self.b.to_java(offset))
            writer.beginFlush()
            producer = held["producer"]
            if held["exactly_once"]:
                run_bounded(producer.initTransactions, timeout_s, "initTransactions()")
                producer.beginTransaction()
            done = J("org.apache.kafka.connect.util.FutureCallback")()
            writer.doFlush(done)
            if held["exactly_once"]:
                run_bounded(producer.commitTransaction, timeout_s, "commitTransaction()")
            run_bounded(
                functools.partial(done.get, self.jp.JLong(int(timeout_s * 1000)), self._millis()),
                timeout_s + 5,
                "flush",
            )
            return {"clients": held["clients"]}

        return self._with_connector_store(a, True, body)

    def task_offsets_transaction(self, a: dict[str, Any]) -> Any:
        """An exactly-once task's offset commit (``ExactlyOnceWorkerSourceTask.commitTransaction``): its
        transactional producer (``<group.id>-<connector>-<task>``) writes the offsets through
        ``OffsetStorageWriter`` into the connector's offsets topic, the records are flushed to the broker,
        then the transaction is committed, aborted, or held open (``outcome=hold``: finish it later with
        ``task_transaction_finish``, as a zombie would)."""
        J = self.jp.JClass
        timeout_s = float(a.get("timeout_s", 60))
        eos_args = {**a, "exactly_once": True}
        config = self._distributed_config(self._eos_worker_args(eos_args))
        consumer_props, producer_props = self._connector_clients(eos_args, config, int(a.get("task", 0)))
        topic = a.get("connector_topic") or a["worker_topic"]
        producer = J("org.apache.kafka.clients.producer.KafkaProducer")(producer_props)
        consumer = J("org.apache.kafka.clients.consumer.KafkaConsumer")(consumer_props)
        admin = J("org.apache.kafka.connect.util.TopicAdmin")(self.b.props({"bootstrap.servers": a["bootstrap"]}))
        store = J("org.apache.kafka.connect.storage.KafkaOffsetBackingStore").readWriteStore(
            topic, producer, consumer, admin, self.b.converter(True)
        )
        duration = J("java.time.Duration")

        def close_producer() -> None:
            # Bounded first: a fenced producer's close() (and the store's, which calls it) waits for ever.
            producer.close(duration.ofSeconds(2))

        held = {"producer": producer, "stoppers": [close_producer, store.stop, admin.close]}
        keep = False
        try:
            store.configure(config)
            # As ExactlyOnceWorkerSourceTask starts: initTransactions first (it fences the previous holder
            # of the id, whose open transaction would otherwise hold a read_committed read-to-end back).
            run_bounded(producer.initTransactions, timeout_s, "initTransactions()")
            run_bounded(store.start, timeout_s, "task KafkaOffsetBackingStore.start()")
            writer = J("org.apache.kafka.connect.storage.OffsetStorageWriter")(
                store, a["connector"], self.b.converter(True), self.b.converter(False)
            )
            for partition, offset in a["entries"]:
                writer.offset(self.b.to_java(partition), self.b.to_java(offset))
            writer.beginFlush()
            producer.beginTransaction()
            done = J("org.apache.kafka.connect.util.FutureCallback")()
            writer.doFlush(done)
            run_bounded(
                functools.partial(done.get, self.jp.JLong(int(timeout_s * 1000)), self._millis()),
                timeout_s + 5,
                "offsets flushed to the broker",
            )
            outcome = a.get("outcome", "commit")
            if outcome == "hold":
                handle = len(self.held) + 1
                self.held[handle] = held
                keep = True
                return {"handle": handle, "transactional_id": str(producer_props.get("transactional.id"))}
            return self._finish_transaction(held, outcome, timeout_s)
        finally:
            if not keep:
                self._stop_all(held["stoppers"])

    def task_transaction_finish(self, a: dict[str, Any]) -> Any:
        """Commit or abort a held task transaction; a refusal (fenced) is Java's answer, returned as data."""
        held = self.held.pop(int(a["handle"]), None)
        if held is None:
            raise RequestError(f"no held transaction {a['handle']!r}")
        try:
            return self._finish_transaction(held, a.get("outcome", "commit"), float(a.get("timeout_s", 30)))
        finally:
            self._stop_all(held["stoppers"])

    def _finish_transaction(self, held: dict[str, Any], outcome: str, timeout_s: float) -> Any:
        producer = held["producer"]
        call = {"commit": producer.commitTransaction, "abort": producer.abortTransaction}.get(outcome)
        if call is None:
            raise RequestError(f"outcome must be commit, abort or hold, got {outcome!r}")
        try:
            run_bounded(call, timeout_s, f"{outcome}Transaction()")
        except self.jp.JException as e:
            return {"outcome": outcome, "error": self.b.error(e)}
        return {"outcome": outcome, "error": None}

    def _stop_all(self, stoppers: list[Callable[[], Any]]) -> None:
        for stop in [] if STATE["recycle"] else stoppers:
            try:
                run_bounded(stop, 15, f"{getattr(stop, '__name__', 'stop')}()")
            except Recycle as e:
                _log(str(e))
            except Exception as e:
                _log(f"stop failed: {e!r}")

    # --- FileStreamSourceConnector in the Debezium embedded engine ----------------------------
    def filestream_run(self, a: dict[str, Any]) -> Any:
        J, jp = self.jp.JClass, self.jp
        expect, timeout_s = int(a["expect_lines"]), float(a.get("timeout_s", 60))
        props = {
            "name": a["connector"],
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": a["file"],
            "topic": a.get("topic", "lines"),
            "topic.prefix": a.get("topic", "lines"),
            "offset.storage": "org.apache.kafka.connect.storage.KafkaOffsetBackingStore",
            "offset.storage.topic": a["offsets_topic"],
            "offset.storage.partitions": str(a.get("num_partitions", 25)),
            "offset.storage.replication.factor": "1",
            "bootstrap.servers": a["bootstrap"],
            "offset.flush.interval.ms": "200",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            **a.get("extra_config", {}),
        }
        lines: list[str | None] = []
        lock = threading.Lock()
        enough, task_stopped, connector_stopped, completed = (threading.Event() for _ in range(4))
        outcome: dict[str, Any] = {}
        bridge = self.b

        @jp.JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer")
        class Lines:
            @jp.JOverride
            def handleBatch(self, records: Any, committer: Any) -> None:
                # markProcessed hands each record's source offset to the OffsetStorageWriter at once, so
                # once a line is counted here its offset is in the writer before close() is requested.
                for r in records:
                    value = r.record().value()
                    committer.markProcessed(r)
                    with lock:
                        lines.append(bridge.py_str(value) if value is not None else None)
                committer.markBatchFinished()
                with lock:
                    if len(lines) >= expect:
                        enough.set()

        @jp.JImplements("io.debezium.engine.DebeziumEngine$ConnectorCallback")
        class Lifecycle:
            @jp.JOverride
            def taskStopped(self) -> None:  # called after the task's final offset commit
                task_stopped.set()

            @jp.JOverride
            def connectorStopped(self) -> None:  # called after the offset store was stopped
                connector_stopped.set()

        @jp.JImplements("io.debezium.engine.DebeziumEngine$CompletionCallback")
        class Completion:
            @jp.JOverride
            def handle(self, success: Any, message: Any, error: Any) -> None:
                outcome.update(
                    success=bool(success),
                    message=bridge.py_str(message) if message else None,
                    error=bridge.error(error) if error is not None else None,
                )
                completed.set()
                enough.set()  # wake the waiter: the engine ended (e.g. failed) before enough lines

        engine = (
            J("io.debezium.engine.DebeziumEngine")
            .create(J("io.debezium.embedded.Connect"))
            .using(self.b.props(props, "java.util.Properties"))
            .using(Lifecycle())
            .using(Completion())
            .notifying(Lines())
            .build()
        )
        runner = threading.Thread(target=engine.run, name="debezium-engine", daemon=True)
        t0 = time.monotonic()
        runner.start()
        enough.wait(timeout_s)
        with lock:
            got: list[str | None] = list(lines)
        _log(f"filestream: {len(got)} lines after {time.monotonic() - t0:.2f}s")
        if completed.is_set() and len(got) < expect:
            raise RuntimeError(f"engine ended before {expect} lines: {outcome}; emitted {got!r}")

        # Graceful close: close() commits the task's offsets, stops the task, then the offset store.
        # It refuses to run while tasks are still starting, so retry that case until the deadline.
        close_deadline = time.monotonic() + 30
        while True:
            box: dict[str, Any] = {}

            def do_close(box: dict[str, Any] = box) -> None:
                try:
                    engine.close()
                except BaseException as e:
                    box["error"] = e

            closer = threading.Thread(target=do_close, name="engine-close", daemon=True)
            closer.start()
            closer.join(1.0)  # close() itself may take longer; its progress is tracked by the callbacks
            err = box.get("error")
            if err is not None and "tasks are starting" in str(err) and time.monotonic() < close_deadline:
                time.sleep(0.2)
                continue
            if err is not None:
                raise err
            break
        t1 = time.monotonic()
        if not task_stopped.wait(30) and not completed.is_set():
            raise Recycle("engine task did not stop (final offset commit unknown) within 30s")
        _log(f"filestream: task stopped (offsets committed) {time.monotonic() - t1:.2f}s after close()")
        if not connector_stopped.wait(15):
            STATE["recycle"] = True
            _log("filestream: offset store stop did not finish in 15s (JVM marked for recycling)")
            _dump_java_threads()
        completed.wait(5)
        if len(got) < expect:
            raise RuntimeError(f"timed out after {timeout_s}s with {len(got)}/{expect} lines: {got!r}")
        return {"lines": got, "outcome": outcome}

    # --- Connect's config and status topics, through KafkaConfigBackingStore / KafkaStatusBackingStore --
    def _cluster_worker_config(self, a: dict[str, Any]) -> Any:
        """A distributed worker's config naming the topics; replication 1 because the test broker is one node."""
        props = {
            "bootstrap.servers": a["bootstrap"],
            "group.id": a.get("group_id", "connect-oracle"),
            "config.storage.topic": a["config_topic"],
            "config.storage.replication.factor": "1",
            "status.storage.topic": a.get("status_topic") or "connect-oracle-status-unused",
            "status.storage.replication.factor": "1",
            "status.storage.partitions": str(a.get("status_partitions", 5)),
            "offset.storage.topic": "connect-oracle-offsets-unused",  # required by DistributedConfig, never opened
            "offset.storage.replication.factor": "1",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            **a.get("extra_config", {}),
        }
        return self.jp.JClass("org.apache.kafka.connect.runtime.distributed.DistributedConfig")(self.b.props(props))

    def _cluster_stores(self, a: dict[str, Any]) -> tuple[Any, Any, list[Callable[[], Any]]]:
        """Both stores built as ``ConnectDistributed`` builds them (no config transformer: nothing resolves ``${}``)."""
        J = self.jp.JClass
        config = self._cluster_worker_config(a)
        client_id_base = J("org.apache.kafka.connect.util.ConnectUtils").clientIdBase(config)
        admin_props = self.b.HashMap(config.originals())
        admin_props.put("client.id", client_id_base + "shared-admin")
        admin = J("org.apache.kafka.connect.util.SharedTopicAdmin")(admin_props)
        config_store = J("org.apache.kafka.connect.storage.KafkaConfigBackingStore")(
            self.b.converter(False), config, None, admin, client_id_base
        )
        config_store.setUpdateListener(self._herder_listener())
        status_store = None
        if a.get("status_topic"):
            status_store = J("org.apache.kafka.connect.storage.KafkaStatusBackingStore")(
                J("org.apache.kafka.common.utils.Time").SYSTEM, self.b.converter(False), admin, client_id_base
            )
            status_store.configure(config)
        stoppers = [s.stop for s in (status_store, config_store) if s is not None] + [admin.close]
        return config_store, status_store, stoppers

    def _herder_listener(self) -> Any:
        """The store calls its herder back once started; a herder that ignores the calls is enough here."""
        jp = self.jp

        @jp.JImplements("org.apache.kafka.connect.storage.ConfigBackingStore$UpdateListener")
        class IgnoringHerder:
            @jp.JOverride
            def onConnectorConfigRemove(self, connector: Any) -> None:
                pass

            @jp.JOverride
            def onConnectorConfigUpdate(self, connector: Any) -> None:
                pass

            @jp.JOverride
            def onTaskConfigUpdate(self, tasks: Any) -> None:
                pass

            @jp.JOverride
            def onConnectorTargetStateChange(self, connector: Any) -> None:
                pass

            @jp.JOverride
            def onSessionKeyUpdate(self, key: Any) -> None:
                pass

            @jp.JOverride
            def onRestartRequest(self, request: Any) -> None:
                pass

            @jp.JOverride
            def onLoggingLevelUpdate(self, namespace: Any, level: Any) -> None:
                pass

        return IgnoringHerder()

    def _with_cluster_stores(self, a: dict[str, Any], body: Callable[[Any, Any], Any]) -> Any:
        deadline = float(a.get("timeout_s", 60))
        config_store, status_store, stoppers = run_bounded(
            lambda: self._cluster_stores(a), deadline, "cluster stores configure()"
        )
        try:
            t0 = time.monotonic()
            run_bounded(config_store.start, deadline, "KafkaConfigBackingStore.start()")
            if status_store is not None:
                run_bounded(status_store.start, deadline, "KafkaStatusBackingStore.start()")
            _log(f"cluster stores start took {time.monotonic() - t0:.2f}s")
            return body(config_store, status_store)
        finally:
            for stop in [] if STATE["recycle"] else stoppers:  # same containment as _with_store
                try:
                    run_bounded(stop, 15, f"{getattr(stop, '__name__', 'stop')}()")
                except Recycle as e:
                    _log(str(e))
                except Exception as e:
                    _log(f"stop failed: {e!r}")

    def _cluster_view(self, config_store: Any, status_store: Any, connectors: list[str]) -> dict[str, Any]:
        """What Connect's herder would see: ``ClusterConfigState`` plus the status store's connector status."""
        snapshot = config_store.snapshot()
        out: dict[str, Any] = {}
        for name in connectors:
            target = snapshot.targetState(name)
            raw = snapshot.rawConnectorConfig(name)
            view: dict[str, Any] = {
                "contains": bool(snapshot.contains(name)),
                "target_state": None if target is None else str(target.name()),
                "task_count": int(snapshot.taskCount(name)),
                "config": None if raw is None else {self.b.py_str(k): self.b.py_str(v) for k, v in raw.items()},
                "status": None,
            }
            fencing = snapshot.taskCountRecord(name)  # KIP-618's tasks-fencing-<c> record, if any
            view["task_count_record"] = None if fencing is None else int(fencing.intValue())
            view["pending_fencing"] = bool(snapshot.pendingFencing(name))
            status = None if status_store is None else status_store.get(name)
            if status is not None:
                view["status"] = {
                    "state": str(status.state().name()),
                    "trace": None if status.trace() is None else self.b.py_str(status.trace()),
                    "worker_id": self.b.py_str(status.workerId()),
                    "generation": int(status.generation()),
                }
            out[name] = view
        return out

    def connect_cluster_write(self, a: dict[str, Any]) -> Any:
        """Run ``steps`` through the real stores, in order, as a worker/herder would; return Java's view.

        Steps: ``put_connector_config`` (connector, config, target_state or null), ``put_task_configs``
        (connector, tasks: list of maps; ``[]`` is what stopping a connector writes), ``put_target_state``
        (connector, state), ``put_task_count_record`` (connector, count: KIP-618's ``tasks-fencing-<c>``),
        ``remove_connector_config`` (connector), ``put_connector_status`` (connector, state, trace,
        worker_id, generation).
        """
        J = self.jp.JClass
        TargetState = J("org.apache.kafka.connect.runtime.TargetState")
        State = J("org.apache.kafka.connect.runtime.AbstractStatus$State")
        deadline = float(a.get("timeout_s", 60))

        def body(config_store: Any, status_store: Any) -> Any:
            named: list[str] = []
            for step in a["steps"]:
                op, name = step["op"], step["connector"]
                if name not in named:
                    named.append(name)
                if op == "put_connector_config":
                    state = step.get("target_state")
                    call = functools.partial(
                        config_store.putConnectorConfig,
                        name,
                        self.b.props(step["config"]),
                        None if state is None else TargetState.valueOf(state),
                    )
                elif op == "put_task_configs":
                    tasks = self.b.ArrayList()
                    for task in step["tasks"]:
                        tasks.add(self.b.props(task))
                    call = functools.partial(config_store.putTaskConfigs, name, tasks)
                elif op == "put_target_state":
                    call = functools.partial(config_store.putTargetState, name, TargetState.valueOf(step["state"]))
                elif op == "put_task_count_record":
                    call = functools.partial(config_store.putTaskCountRecord, name, self.jp.JInt(int(step["count"])))
                elif op == "remove_connector_config":
                    call = functools.partial(config_store.removeConnectorConfig, name)
                elif op == "put_connector_status":
                    if status_store is None:
                        raise RequestError("put_connector_status needs a status_topic")
                    status = J("org.apache.kafka.connect.runtime.ConnectorStatus")(
                        name,
                        State.valueOf(step["state"]),
                        step.get("trace"),
                        step.get("worker_id", "oracle:8083"),
                        self.jp.JInt(int(step.get("generation", 0))),
                        step.get("version"),
                    )
                    status_store.put(status)
                    call = status_store.flush
                else:
                    raise RequestError(f"unknown connect_cluster_write step {op!r}")
                run_bounded(call, deadline, f"{op}({name})")
            # putTargetState does not read back; a refresh makes the snapshot include every step.
            run_bounded(
                functools.partial(config_store.refresh, self.jp.JLong(int(deadline * 1000)), self._millis()),
                deadline,
                "KafkaConfigBackingStore.refresh()",
            )
            return self._cluster_view(config_store, status_store, named)

        return self._with_cluster_stores(a, body)

    def connect_cluster_read(self, a: dict[str, Any]) -> Any:
        """Fresh stores read both topics to their end: Java's interpretation of whatever is there."""
        return self._with_cluster_stores(a, lambda c, s: self._cluster_view(c, s, list(a["connectors"])))

    def _millis(self) -> Any:
        return self.jp.JClass("java.util.concurrent.TimeUnit").MILLISECONDS

    # --- sink connectors: the REST body as Connect parses it, and Java's Admin on consumer groups -------
    def sink_parse_offsets(self, a: dict[str, Any]) -> Any:
        """Per body: Jackson → ``ConnectorOffsets.toMap()`` → ``SinkUtils.parseSinkConnectorOffsets``.

        Answers ``{"parsed": [[topic, partition, offset|null], ...]}`` (sorted) or ``{"error": ...}``.
        """
        J = self.jp.JClass
        mapper = J("com.fasterxml.jackson.databind.ObjectMapper")()
        ConnectorOffsets = J("org.apache.kafka.connect.runtime.rest.entities.ConnectorOffsets")
        SinkUtils = J("org.apache.kafka.connect.util.SinkUtils")
        out: list[Any] = []
        for body in a["bodies"]:
            try:
                offsets = mapper.readValue(self.b.java_str(body), ConnectorOffsets)
                parsed = SinkUtils.parseSinkConnectorOffsets(offsets.toMap())
            except (self.jp.JException, UnicodeDecodeError) as e:
                out.append({"error": self.b.error(e)})
                continue
            rows = [
                [self.b.py_str(tp.topic()), int(tp.partition()), None if off is None else int(off.longValue())]
                for tp, off in parsed.items()
            ]
            out.append({"parsed": sorted(rows, key=lambda r: (r[0], r[1]))})
        return out

    def properties_load(self, a: dict[str, Any]) -> Any:
        """``java.util.Properties.load(InputStream)`` per file, as Connect's ``PropertyFileLoginModule``
        reads its credentials file: ``{"entries": [[key, value], ...]}`` (sorted) or ``{"error": ...}``."""
        J = self.jp.JClass
        out: list[Any] = []
        for b64 in a["files"]:
            props = J("java.util.Properties")()
            try:
                props.load(J("java.io.ByteArrayInputStream")(self._bytes(b64)))
            except (self.jp.JException, UnicodeDecodeError) as e:
                out.append({"error": self.b.error(e)})
                continue
            entries = [[self.b.py_str(k), self.b.py_str(props.getProperty(k))] for k in props.stringPropertyNames()]
            out.append({"entries": sorted(entries)})
        return out

    def sink_offsets_shape(self, a: dict[str, Any]) -> Any:
        """``SinkUtils.consumerGroupOffsetsToConnectorOffsets`` serialized by Jackson, as GET answers it."""
        J = self.jp.JClass
        offsets = self.b.HashMap()
        for topic, partition, offset in a["offsets"]:
            tp = J("org.apache.kafka.common.TopicPartition")(topic, self.jp.JInt(partition))
            offsets.put(tp, J("org.apache.kafka.clients.consumer.OffsetAndMetadata")(self.jp.JLong(int(offset))))
        entity = J("org.apache.kafka.connect.util.SinkUtils").consumerGroupOffsetsToConnectorOffsets(offsets)
        mapper = J("com.fasterxml.jackson.databind.ObjectMapper")()
        return self.b.py_str(mapper.writeValueAsString(entity))

    def admin_group_offsets(self, a: dict[str, Any]) -> Any:
        """Java's ``Admin`` on one consumer group, the calls ``Worker`` makes for sink connectors.

        ``action``: ``list``, ``alter`` (offsets: [[topic, partition, offset]]), ``delete_offsets``
        (partitions: [[topic, partition]]) or ``delete_group``. Failures come back as the Java exception.
        """
        J = self.jp.JClass
        TopicPartition = J("org.apache.kafka.common.TopicPartition")
        props = self.b.HashMap()
        props.put("bootstrap.servers", a["bootstrap"])
        admin = J("org.apache.kafka.clients.admin.Admin").create(props)
        group, action = a["group"], a["action"]
        deadline = float(a.get("timeout_s", 30))
        try:
            if action == "list":
                future = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
            elif action == "alter":
                offsets = self.b.HashMap()
                try:
                    for topic, partition, offset in a["offsets"]:
                        offsets.put(
                            TopicPartition(topic, self.jp.JInt(partition)),
                            J("org.apache.kafka.clients.consumer.OffsetAndMetadata")(self.jp.JLong(int(offset))),
                        )
                except self.jp.JException as e:  # e.g. a negative offset: Java refuses before any request
                    return {"error": self.b.error(e)}
                future = admin.alterConsumerGroupOffsets(group, offsets).all()
            elif action == "delete_offsets":
                partitions = J("java.util.HashSet")()
                for topic, partition in a["partitions"]:
                    partitions.add(TopicPartition(topic, self.jp.JInt(partition)))
                future = admin.deleteConsumerGroupOffsets(group, partitions).all()
            elif action == "delete_group":
                future = admin.deleteConsumerGroups(J("java.util.Collections").singleton(group)).all()
            else:
                raise RequestError(f"unknown admin_group_offsets action {action!r}")
            try:
                result = run_bounded(
                    functools.partial(future.get, self.jp.JLong(int(deadline * 1000)), self._millis()),
                    deadline + 5,
                    f"Admin {action}",
                )
            except self.jp.JClass("java.util.concurrent.ExecutionException") as e:
                return {"error": self.b.error(e.getCause())}
            if action == "list":
                return {
                    "offsets": sorted(
                        [self.b.py_str(tp.topic()), int(tp.partition()), int(om.offset())] for tp, om in result.items()
                    )
                }
            return {"ok": True}
        finally:
            run_bounded(admin.close, 15, "Admin.close()")


def _exit_when_orphaned() -> None:
    """Exit if the test process dies, even while the main thread is stuck inside a Java call."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        _log("parent process is gone; exiting")
        os._exit(0)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


# --- main loop -----------------------------------------------------------------------------------


def main() -> None:
    global PROTO
    ap = argparse.ArgumentParser()
    ap.add_argument("--jvm", required=True, help="path of libjvm.so")
    ap.add_argument("--classpath", required=True, help="os.pathsep-separated jars")
    ap.add_argument("--jvm-opt", action="append", default=[])
    args = ap.parse_args()
    PROTO = _claim_stdout()
    _exit_when_orphaned()
    # Jackson accepts 1000 levels of nesting; the typed form of such a value recurses about twice that.
    sys.setrecursionlimit(20000)

    t0 = time.monotonic()
    import jpype

    jpype.startJVM(
        args.jvm,
        *args.jvm_opt,
        classpath=args.classpath.split(os.pathsep),
        convertStrings=False,
        ignoreUnrecognized=True,
    )
    System = jpype.JClass("java.lang.System")
    bridge = Bridge()
    ops = Ops(bridge)
    _send(
        {
            "ready": True,
            "java_version": str(System.getProperty("java.version")),
            "java_home": str(System.getProperty("java.home")),
            "vm": str(System.getProperty("java.vm.name")),
            "start_s": round(time.monotonic() - t0, 3),
        }
    )

    while True:
        line = sys.stdin.readline()
        if not line:
            break
        req = json.loads(line)
        rid, op = req.get("id"), req.get("op")
        if op == "close":
            _send({"id": rid, "ok": True, "result": {}})
            break
        t1 = time.monotonic()
        try:
            fn = getattr(Ops, op, None) if isinstance(op, str) and not op.startswith("_") else None
            if fn is None:
                raise RequestError(f"unknown op {op!r}")
            result = fn(ops, req.get("args", {}))
            resp: dict[str, Any] = {"id": rid, "ok": True, "result": result}
        except BaseException as e:  # every failure becomes an answer; the loop must survive
            if not isinstance(e, jpype.JException):
                traceback.print_exc()
            resp = {"id": rid, "ok": False, "error": bridge.error(e)}
        resp["elapsed_s"] = round(time.monotonic() - t1, 3)
        resp["recycle"] = STATE["recycle"]
        _send(resp)
        if STATE["recycle"]:
            break
    PROTO.flush()
    sys.stderr.flush()
    os._exit(0)  # never wait for non-daemon Java threads (a stuck KafkaBasedLog thread would block exit)


if __name__ == "__main__":
    main()
