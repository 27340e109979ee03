"""The embedded offsets log: a Kafka-shaped partitioned log in one SQLite file."""
