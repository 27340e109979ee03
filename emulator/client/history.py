"""Client calls for the history routes, on top of the synchronous ``OffsetsClient``.

Kept beside the history code (not in ``emulator.client.http``) so the route table of the KIP-875 client
stays Connect's; errors, URL handling and timeouts are the same as for every other call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emulator.client.http import OffsetsClient, _connector_path, _Request


@dataclass(frozen=True)
class PastOffsets:
    """Connect's offsets list at a past time, and what the daemon said beside it in headers (Connect's
    body has no room for it): ``warning`` is None unless the answer may not be the offsets of that time
    (damaged archive files were skipped) or comes from an archive another daemon writes."""

    offsets: list[dict[str, Any]]
    as_of: str | None
    """The time the history was read at, as the daemon parsed ``as_of`` (ISO-8601)."""
    damaged_files: int
    warning: str | None


class HistoryClient(OffsetsClient):
    """``OffsetsClient`` with the history routes (ours); built, retried and typed the same way."""

    def __enter__(self) -> HistoryClient:
        return self

    def history(
        self,
        connector: str,
        *,
        partition: Mapping[str, Any] | None = None,
        from_time: str | int | None = None,
        to_time: str | int | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> dict[str, Any]:
        """``GET /connectors/{c}/offsets/history``: ``{"changes": [...], "order": "newest_first", ...}``;
        ``before``: a page's ``next``, for the page after it."""
        params: dict[str, str] = {}
        if partition is not None:
            params["partition"] = json.dumps(partition, separators=(",", ":"), ensure_ascii=False)
        if from_time is not None:
            params["from"] = str(from_time)
        if to_time is not None:
            params["to"] = str(to_time)
        if limit is not None:
            params["limit"] = str(limit)
        if before is not None:
            params["before"] = before
        result: dict[str, Any] = self._call(_Request("GET", _connector_path(connector) + "/history", params))
        return result

    def offsets_as_of(self, connector: str, as_of: str | int, epoch: int | None = None) -> list[dict[str, Any]]:
        """``GET /connectors/{c}/offsets?as_of=T``: Connect's offsets list as it was at ``as_of``
        (``epoch``: in that epoch of the archive alone). Without the daemon's warning (a damaged
        archive: the offsets may not be those of that time): ``past_offsets`` has it."""
        return self.past_offsets(connector, as_of, epoch).offsets

    def past_offsets(self, connector: str, as_of: str | int, epoch: int | None = None) -> PastOffsets:
        """``offsets_as_of`` with what the daemon says beside Connect's body: the time it read the
        history at, how many damaged archive files it met, and its warning."""
        params = {"as_of": str(as_of), **({"epoch": str(epoch)} if epoch is not None else {})}
        offsets, headers = self._call(
            _Request("GET", _connector_path(connector), params, unwrap="offsets", with_headers=True)
        )
        return PastOffsets(
            offsets=offsets,
            as_of=headers.get("X-Offsets-As-Of"),
            damaged_files=int(headers.get("X-Offsets-History-Damaged-Files") or 0),
            warning=headers.get("X-Offsets-History-Warning"),
        )

    def rollback(
        self,
        connector: str,
        to_time: str | int,
        dry_run: bool = False,
        allow_damaged: bool = False,
        epoch: int | None = None,
    ) -> dict[str, Any]:
        """``POST /connectors/{c}/offsets/rollback``: ``{"message", "dry_run", "changes": [...]}``.
        From a damaged archive the write is refused (``FencedError``, kind ``history_damaged``) unless
        ``allow_damaged``."""
        params = {
            "to": str(to_time),
            **({"dry_run": "true"} if dry_run else {}),
            **({"allow_damaged": "true"} if allow_damaged else {}),
            **({"epoch": str(epoch)} if epoch is not None else {}),
        }
        result: dict[str, Any] = self._call(_Request("POST", _connector_path(connector) + "/rollback", params))
        return result

    def history_status(self) -> dict[str, Any]:
        """``GET /history/status``: the archiver's state (where it has archived to, whether it is behind
        or stalled, damaged files); ``NotFoundError`` (kind ``history_disabled``) on a daemon without
        history."""
        result: dict[str, Any] = self._call(_Request("GET", "/history/status"))
        return result
