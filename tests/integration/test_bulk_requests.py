"""Bulk PATCH and DELETE: the same answers, writes and audit lines as small ones.

Above ``emulator.service.bulk.BULK_ITEMS`` items, a request's planning (validation, commit sequences,
the records to write), its audit notes and its answer run on a worker thread instead of the event
loop (a 10,000-partition request held every other request for a quarter of a second). What must hold
is that nothing about the outcome depends on which: these requests are all above the threshold.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from emulator.service.bulk import BULK_ITEMS
from tests.fixtures.daemon import DaemonProcess

PARTITIONS = BULK_ITEMS + 500


def offsets(position: int) -> dict[str, Any]:
    return {
        "offsets": [
            {"partition": {"file": f"/data/{p}.txt"}, "offset": {"position": position + p}} for p in range(PARTITIONS)
        ]
    }


def positions(http: httpx.Client, path: str) -> dict[str, int]:
    return {row["partition"]["file"]: row["offset"]["position"] for row in http.get(path).json()["offsets"]}


def test_a_bulk_patch_and_reset_answer_write_and_refuse_as_small_ones_do(embedded_daemon: DaemonProcess) -> None:
    name = f"bulk-{uuid.uuid4().hex[:8]}"
    path = f"/connectors/{name}/offsets"
    with httpx.Client(base_url=embedded_daemon.url, timeout=120) as http:
        dry = http.patch(path, params={"create": "true", "dry_run": "true"}, json=offsets(0))
        assert dry.status_code == 200, dry.text
        assert dry.json()["message"] == f"Dry run: nothing was written. {PARTITIONS} record(s) would be written."
        assert len(dry.json()["records"]) == PARTITIONS

        written = http.patch(path, params={"create": "true"}, json=offsets(0))
        assert written.status_code == 200, written.text
        assert written.json()["message"].startswith("The Connect framework-managed offsets for this connector")
        assert positions(http, path) == {f"/data/{p}.txt": p for p in range(PARTITIONS)}

        sequenced = {"sequence_source": "bulk", "sequence": "5"}
        assert http.patch(path, params=sequenced, json=offsets(100)).status_code == 200
        stale = http.patch(path, params={**sequenced, "sequence": "4"}, json=offsets(200))
        assert stale.status_code == 200, stale.text
        assert len(stale.json()["dropped"]) == PARTITIONS  # every partition's commit is older than the last
        assert positions(http, path) == {f"/data/{p}.txt": 100 + p for p in range(PARTITIONS)}

        bad = offsets(0)
        bad["offsets"][PARTITIONS - 1]["offset"] = {"position": {"nested": 1}}
        refused = http.patch(path, json=bad)
        assert refused.status_code == 500, refused.text  # Connect's answer to a nested offset value
        assert positions(http, path) == {f"/data/{p}.txt": 100 + p for p in range(PARTITIONS)}, "nothing written"

        reset_dry = http.delete(path, params={"dry_run": "true"})
        assert reset_dry.status_code == 200, reset_dry.text
        records = reset_dry.json()["records"]
        assert len(records) == PARTITIONS and all(r["value"] is None for r in records)
        reset = http.delete(path)
        assert reset.status_code == 200, reset.text
        assert http.get(path).json()["offsets"] == []
