"""A streaming source's invalid option is refused as early as PySpark lets it, in our words.

PySpark makes the data source and asks its ``schema()`` at ``load()`` (unless a schema is given),
and makes the stream reader only when the started query plans its first batch. Before, the
sources checked their options only in the reader, so ``load()`` and ``start()`` passed and the
query died at its first batch; and an exception raised while PySpark makes the reader surfaces
inside PySpark's own ``UnboundLocalError`` (its runner's ``finally: reader.stop()`` has no
reader): a 1,900-character message whose last line was PySpark's error, not ours.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException

from tests.spark.helpers import unique

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NOBODY = "http://127.0.0.1:47150"
"""No daemon: a refused option is refused before the daemon is asked anything."""

CASES = [
    pytest.param(
        "connect-file",
        {"connector": "c", "file": "/tmp/in.txt", "maxLinesPerTriger": "1"},
        "connect-file has no option 'maxlinespertriger'; did you mean maxLinesPerTrigger? (it takes ",
        id="file-misspelt",
    ),
    pytest.param(
        "connect-file",
        {"connector": "c", "file": "/tmp/in.txt", "maxLinesPerTrigger": "abc"},
        "option maxLinesPerTrigger must be an integer, got 'abc'",
        id="file-not-an-integer",
    ),
    pytest.param(
        "connect-file",
        {"file": "/tmp/in.txt"},
        "option 'connector' is required: the Connect connector whose offsets are shared",
        id="file-no-connector",
    ),
    pytest.param(
        "connect-kafka",
        {"connector": "c", "kafka.bootstrap.servers": "127.0.0.1:9"},
        "option 'topics' is required (comma-separated topic names)",
        id="kafka-no-topics",
    ),
    pytest.param(
        "connect-debezium",
        {"connector": "c", "maxRecordsPerTriger": "5"},
        "connect-debezium has no option 'maxrecordspertriger'; did you mean maxRecordsPerTrigger?",
        id="debezium-misspelt",
    ),
]


def _ours_ends_the_trace(text: str, message: str) -> None:
    """Our message is the trace's last line (PySpark's ``SQLSTATE`` follows it), and PySpark's
    ``UnboundLocalError`` is nowhere."""
    assert "UnboundLocalError" not in text, text
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if message in line), None)
    assert at is not None, text
    assert lines[at].split(": ", 1)[1].startswith(message), lines[at]
    assert lines[at + 1].startswith(" SQLSTATE"), text


@pytest.mark.parametrize(("source", "options", "message"), CASES)
def test_load_refuses_an_invalid_option_in_a_few_lines_ending_with_ours(
    spark: SparkSession, source: str, options: dict[str, str], message: str
) -> None:
    reader = spark.readStream.format(source).option("url", NOBODY).options(**options)
    with pytest.raises(AnalysisException) as refused:
        reader.load()
    text = str(refused.value)
    _ours_ends_the_trace(text, message)
    assert len(text.splitlines()) <= 8, f"a short trace, not PySpark's whole runner:\n{text}"


@pytest.mark.parametrize(("source", "options", "message"), CASES)
def test_with_a_schema_given_the_first_batch_fails_with_our_message_not_pysparks_unbound_local_error(
    spark: SparkSession, tmp_path: Path, source: str, options: dict[str, str], message: str
) -> None:
    """A schema given skips ``schema()``, so nothing refuses before the query runs: PySpark makes
    the reader first there."""
    frame = spark.readStream.format(source).option("url", NOBODY).options(**options).schema("value string").load()
    query = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path / unique("cp"))).start()
    try:
        with pytest.raises(StreamingQueryException) as failed:
            query.awaitTermination(60)
    finally:
        query.stop()
    _ours_ends_the_trace(str(failed.value), message)
