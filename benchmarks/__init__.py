"""Benchmarks of the daemon against Apache Kafka's own classes (issue section 8); not tests.

Run from the repository root, e.g. ``.venv/bin/python -m benchmarks.restore``; see README.md.
"""
