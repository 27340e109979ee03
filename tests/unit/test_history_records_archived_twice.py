"""A record archived twice is listed once, and never makes a history page fail.

It happens when an operator puts archive files back beside the ones that replaced them: a rollback's
directory renamed back as docs/operations.md says, or a file restored from a backup after the daemon
had archived the log again. Rows then share a place (time, epoch, Kafka partition and offset): the
page listed each change twice, and its heap of places compared two rows' dicts when places tied,
answering 500 ``TypeError: '<' not supported between instances of 'dict' and 'dict'`` (upgrade QA).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

from emulator.history.query import HistoryReader, connector_history
from emulator.history.schema import content_crc
from tests.unit.test_history_archive import Stack, open_stack, value

KEY = b'["twice",{"file":"f"}]'


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    opened = open_stack(tmp_path)
    yield opened
    opened.close()


def _archived_twice(stack: Stack, as_external: bool = False) -> Path:
    """The archive's open file copied beside it as a closed file (the name spans every time), its
    rows made ``external`` (no operation nor principal, as a re-archiving writes them) if asked."""
    assert stack.archive.sync(10)
    directory = stack.archive.directory
    (live,) = directory.glob("history-*.avro.open")
    copy = directory / "history-0000000001_0_99999999999999.avro"
    if not as_external:
        shutil.copy(live, copy)
        return directory
    with live.open("rb") as source:
        reader = fastavro.reader(source)
        schema = reader.writer_schema
        metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
        rows = [_as_external(row) for row in reader]
    with copy.open("wb") as out:
        fastavro.writer(out, schema, rows, metadata=metadata, codec="deflate")
    return directory


def _as_external(row: dict[str, Any]) -> dict[str, Any]:
    changed = {**row, "origin": "external", "operation": None, "request_connector": None}
    changed.update(principal=None, remote=None)
    changed["crc32"] = content_crc(changed)
    return changed


def test_each_change_is_listed_once_on_every_page(stack: Stack) -> None:
    for n in range(12):
        stack.append([(KEY, value(n))], operation="PATCH")
    directory = _archived_twice(stack)
    whole = connector_history(HistoryReader(directory), "twice", limit=100)
    assert [c["offset"]["pos"] for c in whole.changes] == list(range(11, -1, -1))
    assert whole.report.records == 24, "both copies were read"
    assert not whole.truncated
    listed = []
    before = None
    for _ in range(12):
        page = connector_history(HistoryReader(directory), "twice", limit=5, before=before)
        listed += [c["offset"]["pos"] for c in page.changes]
        if page.next is None:
            break
        before = tuple(int(n) for n in page.next.split("."))
    assert listed == list(range(11, -1, -1))


def test_the_copy_that_says_who_made_the_change_is_the_one_listed(stack: Stack) -> None:
    for n in range(3):
        stack.append([(KEY, value(n))], operation="PATCH")
    directory = _archived_twice(stack, as_external=True)
    page = connector_history(HistoryReader(directory), "twice")
    assert page.report.records == 6 and not page.report.damaged, page.report
    assert [(c["offset"]["pos"], c["origin"], c["operation"]) for c in page.changes] == [
        (2, "daemon", "PATCH"),
        (1, "daemon", "PATCH"),
        (0, "daemon", "PATCH"),
    ]
