"""``connect-offsets``: the daemon's current offsets as a batch DataFrame.

One row per connector partition: ``connector``, ``partition`` and ``offset`` (compact JSON text, key
order as the daemon returns it), and where the daemon's ``GET /offsets/records`` knows them, the
live record's ``kafka_partition``, ``kafka_offset`` and ``timestamp_ms`` in the offsets log (null
otherwise; with several raw keys for one partition, the newest record's). Options: ``url``;
``connector`` (only that one; default all). Reading all, a connector whose name holds a control
character (the log may hold one; no URL may name it, as in Connect) is skipped with a WARNING.

History: with option ``history=true`` the rows are the offsets history instead (every change the
daemon archived, oldest first, with origin and log coordinates), from ``emulator.history.spark``
(``SCHEMA``, ``rows(options)``), read through the daemon's history route. Options there: ``url``,
``connector``, ``partition`` (JSON map), ``from``/``to`` (ISO-8601, epoch ms or ``now-1h``), ``limit``.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import json
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from emulator.client.credentials import Credentials
from emulator.client.errors import ApiError, UnaddressableConnector
from emulator.client.http import OffsetsClient
from emulator.codec.surrogates import escape_in_json
from emulator.spark.options import DaemonAccess, OptionError, bool_option, only_known, skipped_for_its_name
from emulator.spark.refusal import RefusedStreamReader, refuse_now

SCHEMA = "connector string, partition string, offset string, kafka_partition int, kafka_offset long, timestamp_ms long"
HISTORY_MODULE = "emulator.history.spark"
HISTORY_ONLY = ("partition", "from", "to", "limit")
"""Options of the history rows alone."""


def batch_only() -> OptionError:
    """What ``spark.readStream.format("connect-offsets")`` is told."""
    return OptionError(
        'connect-offsets is a batch source; use spark.read.format("connect-offsets"), not spark.readStream'
    )


class HistoryUnavailable(RuntimeError):
    """``history`` was asked for but this installation has no history reader."""


def _history() -> ModuleType:
    try:
        module = importlib.import_module(HISTORY_MODULE)
    except ModuleNotFoundError as exc:
        raise HistoryUnavailable(
            f"option history needs {HISTORY_MODULE} (SCHEMA, check(options), rows(options)), which is not "
            "installed in this version; without the option this source returns the current offsets"
        ) from exc
    return module


def _compact(value: Any) -> str:
    """Compact JSON for a Spark string column; half a surrogate pair (which Arrow's UTF-8 refuses)
    as Jackson's escape (``emulator.codec.surrogates``)."""
    return escape_in_json(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _canonical(partition: Any) -> str:
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


Coordinates = tuple[int | None, int | None, int | None]


def record_coordinates(client: OffsetsClient, connector: str) -> dict[str, Coordinates]:
    """Where each live partition's record sits in the offsets log, from ``GET /offsets/records``
    (empty when the daemon has no such route)."""
    try:
        body = client.request("GET", "/offsets/records", params={"connector": connector})
    except ApiError as exc:
        if exc.status in (404, 405):
            return {}
        raise
    found: dict[str, tuple[tuple[int, int], Coordinates]] = {}
    for record in body.get("records", []):
        if record.get("value") is None:
            continue
        try:
            key = json.loads(base64.b64decode(record["key"]))
        except (binascii.Error, ValueError, KeyError, TypeError):
            continue  # not a key Connect would read: it has no row in GET either
        if not (isinstance(key, list) and len(key) == 2 and key[0] == connector):
            continue
        coordinates = (record.get("kafka_partition"), record.get("offset"), record.get("timestamp_ms"))
        rank = (record.get("timestamp_ms") or -1, record.get("offset") or -1)
        previous = found.get(_canonical(key[1]))
        if previous is None or rank > previous[0]:
            found[_canonical(key[1])] = (rank, coordinates)
    return {k: v for k, (_, v) in found.items()}


def current_rows(
    url: str, connector: str | None, credentials: Credentials | None = None, retry_for_s: float | None = None
) -> Iterator[tuple[Any, ...]]:
    with OffsetsClient(url, credentials=credentials, retry_for_s=retry_for_s) as client:
        names = [connector] if connector else client.connectors()
        for name in names:
            try:
                rows = client.offsets(name)
            except (ApiError, UnaddressableConnector) as exc:
                if isinstance(exc, ApiError) and exc.status == 404 and connector is None:
                    continue  # removed between the two calls
                if connector is None and skipped_for_its_name(exc, name, "connect-offsets"):
                    continue
                raise
            where = record_coordinates(client, name)
            for row in rows:
                partition = row.get("partition")
                coordinates = where.get(_canonical(partition), (None, None, None))
                yield (name, _compact(partition), _compact(row.get("offset")), *coordinates)


class ConnectOffsetsReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        only_known(options, "connect-offsets", ("connector", "history", *HISTORY_ONLY))
        self.options = dict(options)
        self.daemon = DaemonAccess.of(options)
        self.connector = options.get("connector") or None
        self.history = bool_option(options, "history", False)
        if self.history:
            _history().check(self.options)
        else:  # read as if given, they would have been ignored: limit=3 answered every row
            given = [name for name in HISTORY_ONLY if name in {key.lower() for key in options}]
            if given:
                raise OptionError(
                    f"connect-offsets: option {', '.join(given)} applies to the history (history=true); "
                    "without it the rows are the current offsets, all of them"
                )

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if self.history:
            yield from _history().rows(self.options)
            return
        access = self.daemon
        yield from current_rows(access.url, self.connector, access.credentials, access.retry_for_s)


class ConnectOffsetsDataSource(DataSource):
    """``spark.read.format("connect-offsets")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "connect-offsets"

    def schema(self) -> str:
        """Checks the options first (making the reader checks them all, without asking the daemon):
        PySpark asks for the schema at ``load()`` unless one is given, and makes the reader only when
        an action plans the read, where an error is a long PythonException (``emulator.spark.refusal``)."""
        reader = refuse_now(lambda: ConnectOffsetsReader(self.options))
        if reader.history:
            schema: str = _history().SCHEMA
            return schema
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return refuse_now(lambda: ConnectOffsetsReader(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream`` gets a reader that refuses from the query's first call with our
        message (PySpark's own error here is an ``UnboundLocalError``: ``emulator.spark.refusal``)."""
        return RefusedStreamReader(batch_only())
