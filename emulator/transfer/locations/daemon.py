"""A running daemon as a location: ``GET``/``POST /offsets/records``.

The daemon plans and checks an import itself (Connect's STOPPED rule against its cluster,
read-your-writes, its own live view) and answers the diff, so a transfer through it is the safe
way to write offsets while Connect runs.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from emulator.client.credentials import Credentials, redact
from emulator.formats.model import Loaded, RawRecord
from emulator.transfer.errors import LocationError
from emulator.transfer.locations.base import Location
from emulator.transfer.options import TransferContext
from emulator.transfer.report import ApplyResult


class DaemonLocation(Location):
    kind = "daemon"
    store = True

    def __init__(self, url: str, credentials: Credentials | None = None) -> None:
        """``credentials`` left out: the process default (the environment's ``CONNECT_OFFSETS_TOKEN``
        and the like, see ``emulator.client.credentials``), or the URL's own ``user:password@``."""
        self.url = url.rstrip("/")
        self.credentials = credentials

    @property
    def description(self) -> str:
        return redact(self.url)

    def _call(
        self,
        method: str,
        path: str,
        ctx: TransferContext,
        params: dict[str, Any] | None = None,
        json: Any = None,
    ) -> Any:
        from emulator.client.http import OffsetsClient

        with OffsetsClient(self.url, timeout_s=ctx.options.timeout_s, credentials=self.credentials) as client:
            return client.request(method, path, params=params, json=json)

    def _records(self, ctx: TransferContext, connectors: Sequence[str] = ()) -> list[RawRecord]:
        body = self._call(
            "GET", "/offsets/records", ctx, params={"connector": list(connectors)} if connectors else None
        )
        try:
            return [
                RawRecord(
                    base64.b64decode(r["key"]),
                    None if r["value"] is None else base64.b64decode(r["value"]),
                    r.get("kafka_partition"),
                    r.get("offset"),
                    r.get("timestamp_ms"),
                )
                for r in body["records"]
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise LocationError(f"{self.description}/offsets/records answered an unexpected body: {exc!r}") from exc

    def read(self, ctx: TransferContext) -> Loaded:
        return Loaded(self._records(ctx, sorted(ctx.options.connectors)))

    def current(self, ctx: TransferContext, connectors: Sequence[str]) -> list[RawRecord]:
        return self._records(ctx, connectors) if connectors else []

    def apply(self, incoming: list[RawRecord], ctx: TransferContext) -> ApplyResult:
        """The daemon plans and checks the import itself (STOPPED rule, its live view) and answers the diff."""
        params = {
            "dry_run": str(ctx.options.dry_run).lower(),
            "allow_malformed": str(ctx.options.malformed == "keep").lower(),
            "write_all": str(ctx.options.write_all).lower(),
        }
        if ctx.options.diff_limit is not None:
            params["diff_limit"] = str(ctx.options.diff_limit)
        body = {
            "records": [
                {
                    "key": base64.b64encode(r.key).decode("ascii"),
                    "value": None if r.value is None else base64.b64encode(r.value).decode("ascii"),
                }
                for r in incoming
            ]
        }
        ctx.progress.report(f"sending to {self.description}/offsets/records", len(incoming), len(incoming), force=True)
        result = self._call("POST", "/offsets/records", ctx, params=params, json=body)
        try:
            # An older daemon does not check values and answers no count.
            return ApplyResult(
                result["diff"], int(result["written"]), unreadable_values=int(result.get("unreadable_values", 0))
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise LocationError(f"{self.description}/offsets/records answered an unexpected body: {exc!r}") from exc
