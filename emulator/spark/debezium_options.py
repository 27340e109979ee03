"""``connect-debezium``'s options, checked with messages that name the option (pure: no pyspark).

The connector's own configuration passes through as ``debezium.<property>`` (``debezium.connector.class``,
``debezium.database.hostname``, ``debezium.slot.name``, …), exactly the properties a Connect worker or
Debezium's embedded engine takes. Three are the source's own, because they decide whose offsets
these are: the connector's ``name`` is the ``connector`` option, and ``offset.storage*`` /
``offset.flush.*`` are refused (the offsets live in the daemon; the source commits per batch).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from emulator.spark.debezium_stream import EngineSettings
from emulator.spark.options import DaemonAccess, OptionError, bool_option, int_option, only_known

PREFIX = "debezium."
BASE_COLUMNS = (
    ("seq", "bigint"),
    ("key", "string"),
    ("value", "string"),
    ("topic", "string"),
    ("source_partition", "string"),
    ("source_offset", "string"),
)
AFTER_TYPES = {
    "string": "string",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "long": "bigint",
    "smallint": "smallint",
    "short": "smallint",
    "boolean": "boolean",
    "double": "double",
    "float": "float",
}
_OWNED = ("offset.storage", "offset.flush.", "offset.commit.policy")
_COLUMN = re.compile(r"^\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\s+([A-Za-z]+)\s*$")


class ConnectDebeziumError(OptionError):
    """Bad options, or a position the source cannot resume from."""


@dataclass(frozen=True, slots=True)
class AfterColumns:
    """Flatten ``after`` of one table's change events into typed columns."""

    table: str
    """``schema.table`` (Postgres), ``database.table`` (MySQL), or a bare table name."""
    columns: tuple[tuple[str, str], ...]
    """(name, Spark type) in order."""


@dataclass(frozen=True, slots=True)
class DebeziumOptions:
    daemon: DaemonAccess
    connector: str
    engine: EngineSettings
    max_records: int | None
    commit_offsets: bool
    claim_epoch: int | None
    """The epoch of the job's claim on the connector (option ``claimEpoch``): a claimed connector
    refuses commits without it."""
    after: AfterColumns | None
    records_per_partition: int

    @property
    def schema(self) -> str:
        columns = list(BASE_COLUMNS) + list(self.after.columns if self.after else ())
        return ", ".join(f"`{name}` {kind}" for name, kind in columns)


def parse_after(options: Mapping[str, str]) -> AfterColumns | None:
    table, listed = options.get("afterTable"), options.get("afterColumns")
    if not table and not listed:
        return None
    if not table or not listed:
        raise ConnectDebeziumError("options afterTable and afterColumns go together (the table, and its columns)")
    columns: list[tuple[str, str]] = []
    for item in listed.split(","):
        match = _COLUMN.match(item)
        if match is None:
            raise ConnectDebeziumError(f"option afterColumns: {item.strip()!r} is not 'name type'")
        name, kind = match.group(1), match.group(2).lower()
        if kind not in AFTER_TYPES:
            raise ConnectDebeziumError(
                f"option afterColumns: column {name} has type {kind!r}; supported: {', '.join(sorted(AFTER_TYPES))} "
                "(use string for anything else: it holds the JSON value)"
            )
        if name in dict(BASE_COLUMNS) or name in dict(columns):
            raise ConnectDebeziumError(f"option afterColumns: column {name!r} is already a column of the source")
        columns.append((name, AFTER_TYPES[kind]))
    return AfterColumns(table.strip(), tuple(columns))


def connector_properties(options: Mapping[str, str], connector: str) -> dict[str, str]:
    props = {k[len(PREFIX) :]: v for k, v in options.items() if k.startswith(PREFIX) and len(k) > len(PREFIX)}
    if not props.get("connector.class"):
        raise ConnectDebeziumError(
            "option 'debezium.connector.class' is required (e.g. io.debezium.connector.postgresql.PostgresConnector)"
        )
    named = props.get("name")
    if named is not None and named != connector:
        raise ConnectDebeziumError(
            f"debezium.name is {named!r} but option connector is {connector!r}: the connector's name is its identity "
            "(its offsets are stored under it); set only 'connector'"
        )
    for key in props:
        if key.startswith(_OWNED):
            raise ConnectDebeziumError(
                f"option debezium.{key} is not allowed: the offsets are the daemon's, committed per micro-batch"
            )
    props["name"] = connector
    return props


OWN_OPTIONS = (
    "connector",
    "startTimeoutMs",
    "replayTimeoutMs",
    "pollTimeoutMs",
    "classpath",
    "jsonSchemas",
    "engineQueueSize",
    "maxBufferedRecords",
    "javaHome",
    "jvmOptions",
    "engineLogLevel",
    "engineDir",
    "maxRecordsPerTrigger",
    "commitOffsets",
    "claimEpoch",
    "recordsPerPartition",
    "afterTable",
    "afterColumns",
)


def parse_options(options: Mapping[str, str]) -> DebeziumOptions:
    only_known(options, "connect-debezium", OWN_OPTIONS, prefix=PREFIX)
    connector = options.get("connector")
    if not connector:
        raise ConnectDebeziumError("option 'connector' is required: the connector's name, whose offsets are shared")
    props = connector_properties(options, connector)
    start_ms = int_option(options, "startTimeoutMs", 120_000, 1000) or 120_000
    replay_ms = int_option(options, "replayTimeoutMs", 120_000, 1000) or 120_000
    poll_ms = int_option(options, "pollTimeoutMs", 200, 0)
    classpath = tuple(p for p in re.split(f"[,{re.escape(os.pathsep)}]", options.get("classpath") or "") if p)
    engine = EngineSettings(
        connector=connector,
        props=props,
        schemas=bool_option(options, "jsonSchemas", False),
        queue_limit=int_option(options, "engineQueueSize", 10_000, 1) or 10_000,
        max_buffered=int_option(options, "maxBufferedRecords", 50_000, 1) or 50_000,
        poll_wait_s=(poll_ms or 0) / 1000,
        replay_timeout_s=replay_ms / 1000,
        start_timeout_s=start_ms / 1000,
        java_home=options.get("javaHome") or None,
        classpath=classpath,
        jvm_options=tuple((options.get("jvmOptions") or "").split()),
        log_level=(options.get("engineLogLevel") or "WARN").upper(),
        engine_dir=options.get("engineDir") or None,
    )
    max_records = int_option(options, "maxRecordsPerTrigger", None, 1)
    if max_records is not None and max_records > engine.max_buffered:
        raise ConnectDebeziumError(
            f"option maxRecordsPerTrigger ({max_records}) exceeds maxBufferedRecords ({engine.max_buffered})"
        )
    return DebeziumOptions(
        daemon=DaemonAccess.of(options),
        connector=connector,
        engine=engine,
        max_records=max_records,
        commit_offsets=bool_option(options, "commitOffsets", True),
        claim_epoch=int_option(options, "claimEpoch", None, 0),
        after=parse_after(options),
        records_per_partition=int_option(options, "recordsPerPartition", 10_000, 1) or 10_000,
    )
