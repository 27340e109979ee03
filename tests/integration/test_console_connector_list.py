"""The console's connectors list is filtered, sorted and cut to one page by the daemon
(``GET /ui/api/connectors?q=&kind=&sort=&desc=&at=&limit=&connector=``), in the order the page used
to sort it itself: by the column, ties by name, names in natural order, unknown values last.

With every row in each answer, 10,000 connectors were a 4.2 MB answer at every 2 s refresh of every
open console (benchmarks/RESULTS.md, "Console: the connectors list").
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from emulator.client import OffsetsClient
from tests.fixtures.daemon import DaemonProcess

COUNT = 12


@pytest.fixture
def listed(embedded_daemon: DaemonProcess) -> str:
    """``COUNT`` connectors ``<prefix>0`` … ``<prefix>11``; connector i has i % 3 + 1 partitions."""
    prefix = f"list-{uuid.uuid4().hex[:8]}-"
    with OffsetsClient(embedded_daemon.url) as client:
        for i in range(COUNT):
            offsets = [{"partition": {"file": f"f{p}"}, "offset": {"position": i}} for p in range(i % 3 + 1)]
            client.alter(f"{prefix}{i}", {"offsets": offsets}, create=True)
    return prefix


def page(daemon: DaemonProcess, **params: Any) -> dict[str, Any]:
    answer = httpx.get(f"{daemon.url}/ui/api/connectors", params=params, timeout=30)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def names(body: dict[str, Any], prefix: str) -> list[str]:
    return [row["name"].removeprefix(prefix) for row in body["connectors"]]


def test_a_page_is_the_filters_matches_in_natural_name_order_from_at(
    embedded_daemon: DaemonProcess, listed: str
) -> None:
    first = page(embedded_daemon, q=listed.upper(), limit=5)
    assert names(first, listed) == ["0", "1", "2", "3", "4"], "case-insensitive filter, 2 before 10"
    assert first["matching"] == COUNT and first["total"] >= COUNT and first["at"] == 0
    last = page(embedded_daemon, q=listed, limit=5, at=10)
    assert names(last, listed) == ["10", "11"] and last["at"] == 10
    gone = page(embedded_daemon, q=listed, limit=5, at=500)
    assert gone["at"] == 10 and names(gone, listed) == ["10", "11"], "a page past the end moves back to the last"
    everything = page(embedded_daemon, q=listed)
    assert len(everything["connectors"]) == COUNT, "without limit, every matching row"


def test_sorting_by_a_column_keeps_ties_in_name_order_and_unknown_values_last(
    embedded_daemon: DaemonProcess, listed: str
) -> None:
    most = page(embedded_daemon, q=listed, sort="partitions", desc="true", limit=4)
    assert names(most, listed) == ["2", "5", "8", "11"]
    assert {row["partitions"] for row in most["connectors"]} == {3}
    fewest = page(embedded_daemon, q=listed, sort="partitions", limit=4)
    assert names(fewest, listed) == ["0", "3", "6", "9"]
    backwards = page(embedded_daemon, q=listed, desc="true", limit=3)
    assert names(backwards, listed) == ["11", "10", "9"]

    with OffsetsClient(embedded_daemon.url) as client:
        client.claim(f"{listed}7", "b-owner")
        client.claim(f"{listed}4", "a-owner")
    claimed = page(embedded_daemon, q=listed, sort="claim", limit=3)
    assert names(claimed, listed) == ["4", "7", "0"], "owners in order, then the unclaimed by name"
    assert claimed["connectors"][0]["claim"]["owner"] == "a-owner"
    assert claimed["connectors"][2]["claim"] is None


def test_one_connector_alone_and_a_kind(embedded_daemon: DaemonProcess, listed: str) -> None:
    alone = page(embedded_daemon, connector=f"{listed}3")
    assert names(alone, listed) == ["3"] and alone["matching"] == 1
    assert page(embedded_daemon, connector=f"{listed}3x")["connectors"] == []
    assert page(embedded_daemon, q=listed, kind="source")["matching"] == COUNT
    assert page(embedded_daemon, q=listed, kind="sink")["matching"] == 0, "no Connect cluster: the log holds sources"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"sort": "size"}, "sort must be one of"),
        ({"kind": "both"}, "kind must be source or sink"),
        ({"limit": 0}, "limit must be between 1 and 1000"),
        ({"limit": 5000}, "limit must be between 1 and 1000"),
        ({"at": -1}, "at must be 0 or more"),
    ],
)
def test_a_page_it_cannot_make_is_a_400_naming_the_parameter(
    embedded_daemon: DaemonProcess, params: dict[str, Any], message: str
) -> None:
    answer = httpx.get(f"{embedded_daemon.url}/ui/api/connectors", params=params, timeout=30)
    assert answer.status_code == 400
    assert answer.json()["error_code"] == 400 and message in answer.json()["message"]
