"""How Spark offsets map to Connect offsets, in both directions.

``connect-file`` checkpoints a self-describing offset, so the listener and ``spark-handoff`` can
publish it from the checkpoint alone::

    {"connector": "file-src", "filename": "/data/in.txt", "position": 151, "byte_offset": 163}

``position`` is Connect's ``{"position": N}`` for partition ``{"filename": …}``; ``byte_offset`` is
where the next line starts in the file (they differ after non-ASCII text, see ``filestream``). Keys
are always built in this order: Spark compares offsets as JSON strings.

Sources that are not ours (``ListenerCommitter``) publish their ``endOffset`` as follows:

- Kafka-shaped (``{"topic": {"0": 23}}``, next offset to read, as Spark's Kafka source and
  ``connect-kafka`` write it): one partition per topic-partition, in Connect's sink-connector shape
  ``{"kafka_topic": t, "kafka_partition": p}`` -> ``{"kafka_offset": n}``. As ``kind="sink"`` this is
  exactly a consumer-group commit for ``connect-<name>``; as ``kind="source"`` the same shape is
  stored as a source connector's offsets.
- Any other JSON object: partition ``{"spark_source": <index>}``, offset = the object flattened
  (nested keys joined with ``.``; Connect offsets hold primitives only; lists become JSON text).
- A bare number or string: ``{"spark_source": <index>}`` -> ``{"offset": value}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from emulator.spark.filestream import Cursor

FILE_KEYS = ("connector", "filename", "position", "byte_offset")


@dataclass(frozen=True, slots=True)
class FileOffset:
    connector: str
    filename: str
    cursor: Cursor

    def spark(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "filename": self.filename,
            "position": self.cursor.position,
            "byte_offset": self.cursor.byte_offset,
        }

    def connect_entry(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Connect's (partition, offset) for this point, exactly as FileStreamSourceTask writes it."""
        return {"filename": self.filename}, {"position": self.cursor.position}

    @classmethod
    def parse(cls, value: Any) -> FileOffset | None:
        """A ``connect-file`` Spark offset, or ``None`` if ``value`` is not one."""
        if not isinstance(value, dict) or set(value) != set(FILE_KEYS):
            return None
        connector, filename, position, byte_offset = (value[k] for k in FILE_KEYS)
        if not (isinstance(connector, str) and isinstance(filename, str)):
            return None
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (position, byte_offset)):
            return None
        return cls(connector, filename, Cursor(position, byte_offset))


def kafka_shaped(value: Any) -> dict[str, dict[int, int]] | None:
    """``{"topic": {"0": 23}}`` as ``{"topic": {0: 23}}``, or ``None`` if ``value`` is not that shape."""
    if not isinstance(value, dict) or not value:
        return None
    out: dict[str, dict[int, int]] = {}
    for topic, partitions in value.items():
        if not isinstance(topic, str) or not isinstance(partitions, dict):
            return None
        by_partition: dict[int, int] = {}
        for partition, offset in partitions.items():
            if not (isinstance(partition, str) and partition.lstrip("-").isdigit()):
                return None
            if not isinstance(offset, int) or isinstance(offset, bool):
                return None
            by_partition[int(partition)] = offset
        out[topic] = by_partition
    return out


def kafka_entries(shaped: dict[str, dict[int, int]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Connect's sink-offset entries. Negative values (Spark's -1 latest / -2 earliest markers) are not
    positions and are left out."""
    return [
        ({"kafka_topic": topic, "kafka_partition": partition}, {"kafka_offset": offset})
        for topic in sorted(shaped)
        for partition, offset in sorted(shaped[topic].items())
        if offset >= 0
    ]


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested keys joined with ``.``. Two fields that join to the same key (``{"a.b": 1, "a": {"b":
    2}}``) are a ``ValueError``: keeping one, as a plain update did, published an offset that lost
    the other without a word."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            flat = _flatten(item, name + ".")
        else:
            flat = {name: json.dumps(item, separators=(",", ":")) if isinstance(item, list) else item}
        for joined, leaf in flat.items():
            if joined in out:
                raise ValueError(
                    f"the offset's fields flatten to the key {joined!r} twice (nested keys are joined with '.'): "
                    "a Connect offset cannot hold both"
                )
            out[joined] = leaf
    return out


def foreign_entries(value: Any, source_index: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Source-connector entries for a foreign source's parsed ``endOffset`` (see module docstring)."""
    if value is None:
        return []
    shaped = kafka_shaped(value)
    if shaped is not None:
        return kafka_entries(shaped)
    partition = {"spark_source": source_index}
    if isinstance(value, dict):
        flat = _flatten(value)
        return [(partition, flat)] if flat else []
    if isinstance(value, list):
        return [(partition, {"offset": json.dumps(value, separators=(",", ":"))})]
    return [(partition, {"offset": value})]
