"""GET bodies of large connectors are cached until the connector changes (issue 12: reads).

A cached body must never hide a change: every test writes through a real daemon and reads back at
once (read-your-writes), on bodies large enough to be cached (16 KiB and more).
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.fixtures.daemon import DaemonProcess

WIDE = 600
"""Partitions: ~25 KiB of GET body, above the cache's 16 KiB floor."""


def wide_body(name: str, position: int) -> dict[str, Any]:
    return {"offsets": [{"partition": {"file": f"{name}-{i}"}, "offset": {"position": position}} for i in range(WIDE)]}


def cache_stats(http: httpx.Client) -> dict[str, int]:
    stats: dict[str, int] = http.get("/status").json()["get_cache"]
    return stats


def positions(response: httpx.Response) -> set[Any]:
    assert response.status_code == 200, response.text
    return {row["offset"]["position"] if row["offset"] else None for row in response.json()["offsets"]}


def test_an_unchanged_connector_is_answered_from_the_cache_with_the_same_bytes(embedded_daemon: DaemonProcess) -> None:
    name = f"wide-{uuid.uuid4().hex[:10]}"
    with httpx.Client(base_url=embedded_daemon.url, timeout=30) as http:
        assert http.patch(f"/connectors/{name}/offsets", params={"create": "true"}, json=wide_body(name, 1)).is_success
        first = http.get(f"/connectors/{name}/offsets")
        before = cache_stats(http)
        second = http.get(f"/connectors/{name}/offsets")
        after = cache_stats(http)

    assert len(first.content) > 16 * 1024
    assert second.content == first.content
    assert second.headers["content-type"] == "application/json"
    assert after["hits"] == before["hits"] + 1


def test_a_patch_a_partition_reset_and_a_delete_are_seen_by_the_next_get(embedded_daemon: DaemonProcess) -> None:
    name = f"wide-{uuid.uuid4().hex[:10]}"
    url = f"/connectors/{name}/offsets"
    with httpx.Client(base_url=embedded_daemon.url, timeout=30) as http:
        assert http.patch(url, params={"create": "true"}, json=wide_body(name, 1)).is_success
        assert positions(http.get(url)) == {1}
        http.get(url)  # cached now

        assert http.patch(url, json=wide_body(name, 2)).is_success
        assert positions(http.get(url)) == {2}

        one = {"offsets": [{"partition": {"file": f"{name}-0"}, "offset": None}]}
        assert http.patch(url, json=one).is_success
        after_tombstone = http.get(url)
        assert len(after_tombstone.json()["offsets"]) == WIDE - 1

        assert http.delete(url).is_success
        assert http.get(url).json() == {"offsets": []}


def test_the_connector_list_follows_a_new_connector(embedded_daemon: DaemonProcess) -> None:
    """The list body is cached too (for principals that see every name) and must show a new name at once."""
    with httpx.Client(base_url=embedded_daemon.url, timeout=30) as http:
        http.get("/connectors")
        before = cache_stats(http)
        http.get("/connectors")
        assert cache_stats(http)["hits"] == before["hits"] + 1
        name = f"new-{uuid.uuid4().hex[:10]}"
        patched = http.patch(
            f"/connectors/{name}/offsets",
            params={"create": "true"},
            json={"offsets": [{"partition": {"f": 1}, "offset": {"p": 1}}]},
        )
        assert patched.is_success, patched.text

        assert name in http.get("/connectors").json()
