"""The Java oracle: Apache Kafka 4.3.0's own classes, in a JVM subprocess, as the reference for every
compatibility test (``from tests.oracle import JavaOracle, typed``)."""

from tests.oracle import typed
from tests.oracle.client import JavaOracle
from tests.oracle.errors import JavaError, JavaException, OracleError, OracleTimeout

__all__ = ["JavaError", "JavaException", "JavaOracle", "OracleError", "OracleTimeout", "typed"]
