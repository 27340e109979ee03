"""The offsets log on Kafka and the Kafka plumbing every Kafka reader and writer shares."""
