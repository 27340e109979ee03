"""``connect-offsets``: the daemon's offsets as a batch DataFrame, one row per partition."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from emulator.codec.keys import encode_key
from tests.fixtures.daemon import DaemonFactory, DaemonProcess
from tests.spark.helpers import unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_rows_are_the_daemons_offsets_with_their_log_coordinates(
    spark: SparkSession, embedded_daemon: DaemonProcess
) -> None:
    client = embedded_daemon.client()
    first, second = unique("src-a"), unique("src-b")
    client.alter(
        first,
        {
            "offsets": [
                {"partition": {"filename": "/data/a.txt"}, "offset": {"position": 30}},
                {"partition": {"filename": "/data/b.txt"}, "offset": {"position": 7}},
            ]
        },
        create=True,
    )
    client.alter(second, {"offsets": [{"partition": {"table": "t", "protocol": "1"}, "offset": {"n": 1}}]}, create=True)

    frame = spark.read.format("connect-offsets").option("url", embedded_daemon.url).load()
    rows = [r.asDict() for r in frame.where(frame.connector.isin(first, second)).collect()]
    got = {(r["connector"], r["partition"]): json.loads(r["offset"]) for r in rows}
    assert got == {
        (first, '{"filename":"/data/a.txt"}'): {"position": 30},
        (first, '{"filename":"/data/b.txt"}'): {"position": 7},
        (second, '{"table":"t","protocol":"1"}'): {"n": 1},
    }
    assert all(r["kafka_partition"] is not None and r["kafka_offset"] is not None for r in rows), rows

    only = spark.read.format("connect-offsets").option("url", embedded_daemon.url).option("connector", second).load()
    assert [r.connector for r in only.collect()] == [second]


def test_history_rows_come_oldest_first_with_origins_and_tombstones(
    spark: SparkSession, embedded_daemon: DaemonProcess
) -> None:
    client = embedded_daemon.client()
    name = unique("hist")
    for position in (10, 20, 30):
        body = {"offsets": [{"partition": {"filename": "/data/h.txt"}, "offset": {"position": position}}]}
        client.alter(name, body, create=True)
    client.reset(name)

    frame = (
        spark.read.format("connect-offsets")
        .option("url", embedded_daemon.url)
        .option("history", "true")
        .option("connector", name)
        .load()
    )
    rows = [r.asDict() for r in frame.collect()]
    assert [(json.loads(r["offset"]) if r["offset"] else None, r["tombstone"]) for r in rows] == [
        ({"position": 10}, False),
        ({"position": 20}, False),
        ({"position": 30}, False),
        (None, True),
    ]
    assert {r["origin"] for r in rows} == {"daemon"}
    assert [r["operation"] for r in rows] == ["PATCH", "PATCH", "PATCH", "DELETE"]
    assert all(r["partition"] == '{"filename":"/data/h.txt"}' for r in rows)
    assert [r["time_ms"] for r in rows] == sorted(r["time_ms"] for r in rows)


def test_half_a_surrogate_pair_reaches_spark_as_jacksons_escape(
    spark: SparkSession, embedded_daemon: DaemonProcess
) -> None:
    """Arrow's strings are UTF-8, which cannot hold a lone surrogate (Connect's data may: it writes
    and reads it as \\uD800); the row carries the escape, which any JSON reader turns back into it."""
    name = unique("odd")
    body = {"offsets": [{"partition": {"f": "\ud800"}, "offset": {"p": "x\udc00"}}]}
    embedded_daemon.client().alter(name, body, create=True)

    frame = spark.read.format("connect-offsets").option("url", embedded_daemon.url).option("connector", name).load()
    (row,) = frame.collect()

    assert (row.partition, row.offset) == ('{"f":"\\uD800"}', '{"p":"x\\uDC00"}')
    assert json.loads(row.partition) == body["offsets"][0]["partition"]


@pytest.mark.parametrize("unreadable", ["ctl\nx", "half\ud800"], ids=["control-character", "half-a-surrogate-pair"])
def test_all_connectors_skip_one_whose_name_no_url_may_hold_and_say_so(
    daemon_factory: DaemonFactory, caplog: pytest.LogCaptureFixture, unreadable: str
) -> None:
    """Any tool may write ``["ctl\\nx",…]`` to the log; the daemon refuses that name in a URL (400, as
    Connect does), and reading every connector (offsets or history) failed on it. Connect's data may
    name one ``half\\ud800`` (a lone surrogate, from Jackson's escape), which UTF-8, so no URL, can
    hold: the client's ``UnaddressableConnector`` failed both reads, every connector's rows with them.
    A daemon of its own: such a connector stays in its log for good."""
    from emulator.history.spark import rows as history_rows
    from emulator.spark.offsets_source import current_rows

    daemon = daemon_factory()
    plain = unique("src-plain")
    records = [
        {
            "key": base64.b64encode(encode_key(name, {"f": "a"})).decode(),  # Connect's bytes: a task reads them
            "value": base64.b64encode(b'{"p":1}').decode(),
        }
        for name in (unreadable, plain)
    ]
    assert httpx.post(f"{daemon.url}/offsets/records", json={"records": records}).status_code == 200

    with caplog.at_level(logging.WARNING, logger="emulator.spark.options"):
        rows = list(current_rows(daemon.url, None))
    assert [(r[0], r[1], r[2]) for r in rows] == [(plain, '{"f":"a"}', '{"p":1}')]
    assert any(repr(unreadable) in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="emulator.spark.options"):
        changes = list(history_rows({"url": daemon.url}))
    assert {change[0] for change in changes} == {plain}
    assert any(repr(unreadable) in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)


NOBODY = "http://127.0.0.1:47250"
"""No daemon: an option is refused before the daemon is asked anything."""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"connectr": "c"}, "connect-offsets has no option 'connectr'; did you mean connector? (it takes "),
        ({"limit": "3"}, "connect-offsets: option limit applies to the history (history=true)"),
    ],
    ids=["misspelt", "history-only"],
)
def test_load_refuses_an_invalid_option_with_our_message_last(
    spark: SparkSession, options: dict[str, str], message: str
) -> None:
    """The options were checked only when an action planned the read: ``load()`` passed, and the
    action failed in a long PythonException. Now ``load()`` refuses, as the streaming sources do."""
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException) as refused:
        spark.read.format("connect-offsets").option("url", NOBODY).options(**options).load()
    lines = str(refused.value).splitlines()
    at = next(i for i, line in enumerate(lines) if message in line)
    assert lines[at].split(": ", 1)[1].startswith(message), lines
    assert lines[at + 1].startswith(" SQLSTATE"), lines
    assert len(lines) <= 8, lines


def test_read_stream_is_refused_as_a_batch_source_not_with_pysparks_unbound_local_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    """PySpark asks no streaming question at ``load()``; the query fails at its start, with ours."""
    from pyspark.errors import StreamingQueryException

    frame = spark.readStream.format("connect-offsets").option("url", NOBODY).load()
    query = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp")).start()
    try:
        with pytest.raises(StreamingQueryException) as failed:
            query.awaitTermination(60)
    finally:
        query.stop()
    text = str(failed.value)
    assert "UnboundLocalError" not in text, text
    assert (
        'OptionError: connect-offsets is a batch source; use spark.read.format("connect-offsets"), not spark.readStream'
    ) in text
