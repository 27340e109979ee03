"""One real local Spark (``local[2]``, no UI) for the whole session, with this package's sources registered.

Spark starts in this process (py4j to its JVM); Kafka Connect's code never does: it runs in the
oracle's own JVM subprocess. Executors' Python workers must import ``emulator`` and ``tests``, and
must be this interpreter (it has pyarrow), so both are set before the JVM starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The session's Spark; about 20 s to start here, which is why every test that asks for it is ``slow``."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # declared in the test extra: missing is a failure, not a skip
        pytest.fail(f"pyspark is not installed ({exc}); pip install -e '.[test]'", pytrace=False)

    from emulator.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("connect-offsets-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.noDataProgressEventInterval", "60000")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
