"""Session-wide fixtures live in their own modules, one per real component."""

pytest_plugins = [
    "tests.fixtures.broker",  # Tansu, a real Kafka-protocol broker, once per session
    "tests.oracle.fixtures",  # Apache Kafka's own classes in a JVM subprocess, once per session
    "tests.fixtures.daemon",  # the daemon under test, started as a real process
    "tests.fixtures.connect_cluster",  # a Connect cluster's topics (written by Java) and a daemon following them
    "pytester",  # pytest's own harness: tests/testkit runs sample user test files in a subprocess
]
