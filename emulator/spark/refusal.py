"""Refusing a streaming source's options as early, and as plainly, as PySpark 4 lets a source.

PySpark makes the Python data source and asks its ``schema()`` when ``load()`` is called, unless
the caller gave a schema; the stream reader is made only when the started query plans its first
batch. So the sources check their options in ``schema()`` (``refuse_now``), and ``load()`` raises.

With a schema given, the first place is ``streamReader()``; but an exception raised there reaches
the caller wrapped in PySpark's own ``UnboundLocalError`` (its streaming runner's ``finally:
reader.stop()`` has no reader), the message a last line but one of a long trace. So
``reader_or_refusal`` hands PySpark a ``RefusedStreamReader`` instead, which raises the same
error from the query's first call: the query then fails with our message as its last line.

``DataSource.__init__`` would be earlier still, but PySpark says it must not be overridden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

T = TypeVar("T")


def _plain(error: Exception) -> Exception:
    """The error without our frames or its cause: PySpark prints the whole trace into its message,
    and the option's message says all there is to say."""
    error.__cause__ = None
    error.__suppress_context__ = True
    return error.with_traceback(None)


def refuse_now(check: Callable[[], T]) -> T:
    """What ``check`` returns (making the stream reader checks every option); what it raises, plainly."""
    try:
        return check()
    except Exception as exc:
        raise _plain(exc) from None


class RefusedStreamReader(DataSourceStreamReader):
    """Stands in for a stream reader that could not be made: every call raises why, except
    ``commit`` and ``stop`` (nothing was read, nothing to release)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def _refuse(self) -> NoReturn:
        raise _plain(self.error)

    def initialOffset(self) -> dict[str, Any]:
        self._refuse()

    def latestOffset(self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None) -> dict[str, Any]:
        self._refuse()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        self._refuse()

    def read(self, partition: InputPartition) -> Any:
        self._refuse()

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing was read."""

    def stop(self) -> None:
        """Nothing to release."""


def reader_or_refusal(make: Callable[[], DataSourceStreamReader]) -> DataSourceStreamReader:
    """The stream reader ``make`` returns, or a ``RefusedStreamReader`` carrying why it could not be made."""
    try:
        return make()
    except Exception as exc:
        return RefusedStreamReader(exc)
