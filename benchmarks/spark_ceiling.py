"""The ``python-ceiling`` source of the Spark benchmarks (see ``spark_support.register_python_ceiling``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import StructType


class _Reader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.lines = int(options["lines"])
        self.width = int(options.get("width", "60"))
        self.partitions_count = int(options.get("partitions", "4"))

    def initialOffset(self) -> dict[str, Any]:
        return {"n": 0}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        return {"n": self.lines}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        total = end["n"] - start["n"]
        if total <= 0:
            return []
        share = -(-total // self.partitions_count)
        return [
            InputPartition(min(share, total - i * share)) for i in range(self.partitions_count) if i * share < total
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        per_batch = max(1, (4 << 20) // self.width)  # the same ~4 MiB batches connect-file yields
        line = "0" * 14 + " " + "x" * (self.width - 16)
        batch = pa.RecordBatch.from_arrays([pa.array([line] * per_batch, type=pa.string())], names=["value"])
        left = int(partition.value)
        while left > 0:
            size = min(left, per_batch)
            left -= size
            yield batch.slice(0, size)


class PythonCeilingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "python-ceiling"

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _Reader(self.options)
