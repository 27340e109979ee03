"""The console's tables are filtered, sorted and cut to one page by the daemon, in the order the page
used to sort them itself: by the column, ties in the table's order, text in natural order, unknown
values last. The connectors list (``GET /ui/api/connectors?q=&kind=&sort=&desc=&at=&limit=&connector=``)
and a connector's offsets (``GET /ui/api/connectors/{name}?q=&sort=&desc=&at=&limit=``).

With every row in each answer, 10,000 connectors were a 4.2 MB answer at every 2 s refresh of every
open console, and a connector with 10,000 partitions 1.9 MB (benchmarks/RESULTS.md, round 19).
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


@pytest.fixture
def partitioned(embedded_daemon: DaemonProcess) -> str:
    """A connector with ``COUNT`` partitions ``{"file": "f<i>"}`` at position 100 - i."""
    name = f"table-{uuid.uuid4().hex[:8]}"
    offsets = [{"partition": {"file": f"f{i}"}, "offset": {"position": 100 - i}} for i in range(COUNT)]
    with OffsetsClient(embedded_daemon.url) as client:
        client.alter(name, {"offsets": offsets}, create=True)
    return name


def table(daemon: DaemonProcess, connector: str, **params: Any) -> dict[str, Any]:
    answer = httpx.get(f"{daemon.url}/ui/api/connectors/{connector}", params=params, timeout=30)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def files(body: dict[str, Any]) -> list[str]:
    return [row["partition"]["file"] for row in body["offsets"]]


def test_a_connectors_offsets_are_cut_to_the_page_the_table_asks_for(
    embedded_daemon: DaemonProcess, partitioned: str
) -> None:
    whole = table(embedded_daemon, partitioned)
    assert files(whole) == [f"f{i}" for i in range(COUNT)], "natural order of the partition's JSON; no limit: all"
    last = table(embedded_daemon, partitioned, limit=5, at=10)
    assert files(last) == ["f10", "f11"]
    assert (last["partitions"], last["matching"], last["at"]) == (COUNT, COUNT, 10)
    assert all(isinstance(row["log_offset"], int) for row in last["offsets"]), "rows keep their log place"
    assert files(table(embedded_daemon, partitioned, q='"F1"')) == ["f1"], "on the JSON text, quotes too, any case"
    ones = table(embedded_daemon, partitioned, q="f1")
    assert files(ones) == ["f1", "f10", "f11"] and ones["matching"] == 3
    assert files(table(embedded_daemon, partitioned, q='"position":95')) == ["f5"], "or on the offset's"
    assert files(table(embedded_daemon, partitioned, sort="offset", desc="true", limit=2)) == ["f0", "f1"]
    by_place = table(embedded_daemon, partitioned, sort="log_offset", desc="true")["offsets"]
    places = [row["log_offset"] for row in by_place]
    assert places == sorted(places, reverse=True) and len(places) == COUNT


def test_an_offsets_page_it_cannot_make_is_a_400(embedded_daemon: DaemonProcess, partitioned: str) -> None:
    answer = httpx.get(f"{embedded_daemon.url}/ui/api/connectors/{partitioned}", params={"sort": "name"}, timeout=30)
    assert answer.status_code == 400 and "sort must be one of partition, offset" in answer.json()["message"]


def test_a_kept_table_is_never_served_once_its_connector_changed(
    embedded_daemon: DaemonProcess, partitioned: str
) -> None:
    """The daemon keeps a connector's prepared table between requests (paging through it, the page's
    refreshes); a write is seen by the next request, as the API's own GET sees it."""
    before = table(embedded_daemon, partitioned, q="f3", limit=5)
    assert before == table(embedded_daemon, partitioned, q="f3", limit=5), "an unchanged connector, the same page"
    with OffsetsClient(embedded_daemon.url) as client:
        client.alter(
            partitioned,
            {
                "offsets": [
                    {"partition": {"file": "f3"}, "offset": {"position": 7}},
                    {"partition": {"file": "f4"}, "offset": None},
                ]
            },
        )
    after = table(embedded_daemon, partitioned, limit=100)
    assert after["partitions"] == COUNT - 1 and "f4" not in files(after)
    assert {row["partition"]["file"]: row["offset"] for row in after["offsets"]}["f3"] == {"position": 7}
    assert files(table(embedded_daemon, partitioned, q='"position":7}'))[0] == "f3"


def test_a_partition_history_asked_with_a_number_beyond_a_double_is_a_400(
    embedded_daemon: DaemonProcess, partitioned: str
) -> None:
    """``1e999999`` reads as an infinity, which the answer echoed: a 500 and two tracebacks in the
    log for anyone with read on one connector."""
    answer = httpx.get(
        f"{embedded_daemon.url}/ui/api/connectors/{partitioned}/history",
        params={"partition": '{"file":1e999999}'},
        timeout=30,
    )
    assert answer.status_code == 400, answer.text
    assert "beyond a double's range" in answer.json()["message"]
    assert "Traceback" not in embedded_daemon.log_tail(20)
