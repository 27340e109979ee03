"""The offsets log on Kafka and the Kafka plumbing every Kafka reader and writer shares.

- ``config``: the one librdkafka configuration builder (per role, with the settings we force).
- ``reader``: the one topic reader (``KafkaBasedLog``'s reading, ``read_to_end``), used by the
  offsets log, the claims topic and Connect's config and status topics.
- ``writer``: the offsets producer (Java's placement, acknowledged appends).
- ``topics``: creating and verifying compacted topics, partition counts, list offsets.
- ``offsets_log``: ``KafkaOffsetLog``, composing the above.
- ``claims``: claims and fencing with transactional producers.
- ``groups`` (and ``group_offset_delete``): consumer groups' committed offsets, for sink connectors.
- ``health``: the last error, kept for health endpoints.
"""
