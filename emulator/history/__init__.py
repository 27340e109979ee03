"""History beyond compaction: every change the daemon sees, archived in Avro files with its origin.

Public API (also what the Spark batch source wraps):

- ``read_history(history_dir, log=None, *, connector=None, partition=None, from_ms=None, to_ms=None,
  report=None) -> Iterator[HistoryRow]``: archive rows (a TypedDict, ``rows.py``), oldest first (see
  ``query.read_history``);
- ``list_logs(history_dir)``: which logs an archive directory holds;
- ``HistoryArchive``: the daemon's archiver (``archive.py``, which wires the queue, the archiver
  thread, the file writer, retention and recovery, one module each); ``HistoryReader`` and the
  queries in ``query.py``; rollback planning in ``rollback.py``.

Names are imported on first use, so that light modules (``times``, ``origins``) can be imported by
the settings and the service without loading fastavro.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "HistoryArchive": "emulator.history.archive",
    "HistoryError": "emulator.history.directory",
    "ReadReport": "emulator.history.files",
    "HistoryReader": "emulator.history.query",
    "HistoryRow": "emulator.history.rows",
    "list_logs": "emulator.history.query",
    "read_history": "emulator.history.query",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'emulator.history' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
