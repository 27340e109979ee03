"""A connector named with half a surrogate pair in the history archive.

Connect's data may name a connector ``half\\ud800`` (Jackson reads the escape into a lone surrogate;
an import writes such a key as it is). An Avro string is UTF-8, so the archive keeps that name as
its backslash escape: the six characters ``\\ud800`` (``emulator.history.avro_rows``), which is
also how another connector may spell its name literally. The queries matched on that field alone:
the history of ``half\\ud800`` (a backslash, a name any URL carries) held the other connector's
changes, and a rollback of it wrote the other connector's records (QA audit of lone surrogates).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.codec.keys import logical_id
from emulator.history.query import HistoryReader, connector_history, read_history, state_as_of
from emulator.model.errors import ConnectorNotFound
from emulator.server.ui.history_index import HistoryIndex
from tests.unit.test_console_history_index import refresh_until
from tests.unit.test_history_archive import Stack, open_stack, value

SURROGATE = "half\ud800"  # the lone surrogate: Connect's data
LITERAL = "half\\ud800"  # a backslash, then "ud800": the escape spelt out, another connector


def key(connector_json: bytes, n: int) -> bytes:
    """A Connect key; ``connector_json`` is the name as JSON string content (escapes allowed)."""
    return b'["%s",{"file":"f%d"}]' % (connector_json, n)


SURROGATE_KEY = key(b"half\\ud800", 1)  # JSON's escape: the lone surrogate
LITERAL_KEY = key(b"half\\\\ud800", 2)  # JSON's escaped backslash: the six characters


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    opened = open_stack(tmp_path)
    yield opened
    opened.close()


def reader(stack: Stack) -> HistoryReader:
    return HistoryReader(stack.archive.directory, stack.archive)


def files(offsets: list[Any]) -> dict[str, Any]:
    return {o["partition"]["file"]: o["offset"]["pos"] for o in offsets}


def test_the_history_of_a_name_spelt_like_the_escape_is_its_own_and_a_rollback_of_it_touches_no_other(
    stack: Stack,
) -> None:
    stack.append([(SURROGATE_KEY, value(1))])
    assert stack.archive.sync(10)
    with pytest.raises(ConnectorNotFound):  # the literal name has no record yet: not the other's
        connector_history(reader(stack), LITERAL)
    time.sleep(0.01)
    stack.append([(LITERAL_KEY, value(2))])
    assert stack.archive.sync(10)
    now = time.time_ns() // 1_000_000 + 1

    page = connector_history(reader(stack), LITERAL)
    assert [c["key"] for c in page.changes] == [LITERAL_KEY.decode()], "only its own change"
    past = state_as_of(reader(stack), LITERAL, now)
    assert list(past.rows) == [LITERAL_KEY], "a rollback would write only its own record"
    assert files(past.offsets()) == {"f2": 2}

    # Through the Python API a name holding the surrogate itself is found, and only its rows.
    assert [r["key"] for r in read_history(stack.archive.directory.parent, connector=SURROGATE)] == [SURROGATE_KEY]
    assert [r["key"] for r in read_history(stack.archive.directory.parent, connector=LITERAL)] == [LITERAL_KEY]
    assert list(state_as_of(reader(stack), SURROGATE, now).rows) == [SURROGATE_KEY]


def test_the_console_counts_each_connectors_changes_under_its_own_name(stack: Stack) -> None:
    """The console's index keyed connectors by the archived field: the surrogate's connector showed
    no change at all, and the literal name's row showed both connectors' changes."""
    stack.append([(SURROGATE_KEY, value(1))])
    stack.append([(LITERAL_KEY, value(2)), (key(b"half\\\\ud800", 3), value(3))])
    index = HistoryIndex(stack.archive)
    refresh_until(index, 3)
    counts = {name: records for name, (_, records) in index.last_changes().items()}
    assert counts == {SURROGATE: 1, LITERAL: 2}
    assert index.counts(SURROGATE) == {logical_id({"file": "f1"}): 1}
    kept, total = index.partition(LITERAL, logical_id({"file": "f1"}))
    assert (kept, total) == ([], 0), "the other connector's partition is not the literal name's"
