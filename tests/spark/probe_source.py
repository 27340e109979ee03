"""A stand-in for a source that is not ours and checkpoints Kafka-shaped offsets, like Spark's own Kafka
source (which the pyspark wheel lacks here): ``{"<topic>": {"0": next, "1": next}}``. Partition 0
advances by 2 records per batch and partition 1 by 1, up to ``total`` on partition 0."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import StructType


class KafkaShapedReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.topic = options["topic"]
        self.total = int(options["total"])

    def initialOffset(self) -> dict[str, Any]:
        return {self.topic: {"0": 0, "1": 0}}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        first, second = start[self.topic]["0"], start[self.topic]["1"]
        if first >= self.total:
            return start
        return {self.topic: {"0": first + 2, "1": second + 1}}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return [InputPartition((start[self.topic], end[self.topic]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[str]]:
        start, end = partition.value
        for p in ("0", "1"):
            for offset in range(start[p], end[p]):
                yield (f"{p}:{offset}",)


class KafkaShapedSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafka-shaped-probe"

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaShapedReader(self.options)


class FixedOffsetsReader(DataSourceStreamReader):
    """One batch per offset of the JSON list in option ``offsets``, then nothing new."""

    def __init__(self, options: dict[str, str]) -> None:
        self.offsets: list[Any] = json.loads(options["offsets"])

    def initialOffset(self) -> dict[str, Any]:
        return {"before": "first"}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> Any:
        for i, offset in enumerate(self.offsets):
            if offset == start:
                return self.offsets[i + 1] if i + 1 < len(self.offsets) else start
        return self.offsets[0]

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[str]]:
        yield ("row",)


class FixedOffsetsSource(DataSource):
    """A source that is not ours whose end offsets are given (``offsets``: a JSON list, one per batch)."""

    @classmethod
    def name(cls) -> str:
        return "fixed-offsets-probe"

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return FixedOffsetsReader(self.options)
