"""Spark shares the offset history: data sources and listeners over the daemon.

``register(spark)`` registers ``connect-file`` (streaming, FileStreamSourceConnector's offsets),
``connect-kafka`` (streaming, a sink connector's consumer group), ``connect-debezium`` (streaming, a
Debezium connector run inside the job) and ``connect-offsets`` (batch, the daemon's offsets).
``OffsetCommitListener`` / ``ListenerCommitter`` publish completed batches;
``stop_between_batches`` stops a query at a batch boundary, for a hand-off without a repeated batch. The pure parts
(``filestream``, ``checkpoint``, ``committer``, ``shapes``, ``handoff``, ``debezium_offsets``) do not
import pyspark, so the CLI can use them; the pyspark-based names are imported lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from emulator.spark.debezium_source import ConnectDebeziumDataSource
    from emulator.spark.file_source import ConnectFileDataSource
    from emulator.spark.handoff import CommitTarget
    from emulator.spark.listener import ListenerCommitter, OffsetCommitListener
    from emulator.spark.offsets_source import ConnectOffsetsDataSource
    from emulator.spark.stopping import StopOutcome, stop_between_batches

_LAZY = {
    "ConnectDebeziumDataSource": "emulator.spark.debezium_source",
    "ConnectFileDataSource": "emulator.spark.file_source",
    "ConnectOffsetsDataSource": "emulator.spark.offsets_source",
    "ListenerCommitter": "emulator.spark.listener",
    "OffsetCommitListener": "emulator.spark.listener",
    "CommitTarget": "emulator.spark.handoff",
    "StopOutcome": "emulator.spark.stopping",
    "stop_between_batches": "emulator.spark.stopping",
}

__all__ = [
    "CommitTarget",
    "ConnectDebeziumDataSource",
    "ConnectFileDataSource",
    "ConnectOffsetsDataSource",
    "ListenerCommitter",
    "OffsetCommitListener",
    "StopOutcome",
    "register",
    "stop_between_batches",
]


def register(spark: SparkSession) -> None:
    """Register every data source of this package with ``spark`` (``spark.dataSource.register``)."""
    from emulator.spark.debezium_source import ConnectDebeziumDataSource
    from emulator.spark.file_source import ConnectFileDataSource
    from emulator.spark.kafka_source import ConnectKafkaDataSource
    from emulator.spark.offsets_source import ConnectOffsetsDataSource

    for source in (ConnectFileDataSource, ConnectOffsetsDataSource, ConnectKafkaDataSource, ConnectDebeziumDataSource):
        spark.dataSource.register(source)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
